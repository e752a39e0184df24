// Package incarnation names one run of a process in a Kubernetes container (an
// incarnation), records it on a Lease, and decides from the kubelet's reports whether
// that run is over. It lets a follower take a lease at once when the kubelet reports
// the leader's container terminated, instead of waiting the lease out.
//
// # Usage
//
// Turn the death signal on in an elector's config:
//
//	inc, err := incarnation.Learn(incarnation.LearnOptions{}) // ErrNotInPod: leave it off
//	w, err := incarnation.NewWatcher(clientset, logger)
//	config.Incarnation, config.DeathWatch = inc.String(), w // leaderelection.Config
//
// Learn reads the pod from the Downward API environment (POD_NAMESPACE, POD_NAME,
// POD_UID, see deploy/) and the container from CONTAINER_NAME, draws a random nonce
// and writes it, as the line "baton-incarnation:<nonce>", to the container's
// termination message file; the kubelet copies that file into the pod status when
// the container terminates. ProvesDead accepts a status as proof only for the same
// pod UID and container, in a terminated state whose message has the line; nothing
// else (a pod deleted, a NotReady node, another nonce) proves a death. Watcher
// follows a holder's pod and closes a channel once ProvesDead holds.
//
// Two rules for a deployment: the application must not overwrite the termination
// message file, and may append at most 4045 bytes to it; and nobody but the kubelets
// may update or patch pods/status in the candidates' namespace (such a status proves
// a running holder dead to every follower). Where the second cannot be ensured,
// leave the death signal off.
//
// # Design notes
//
// Why a nonce and not the container ID, which reports are trusted, who can prove a
// death and the termination message's limits are in docs/design/incarnation.md in
// the repository.
package incarnation
