// Package incarnation names one run of a process in a Kubernetes container (an
// incarnation), records it on a Lease, and decides from the kubelet's reports whether
// that run is over. It lets a follower take a lease at once when the kubelet reports
// the leader's container terminated, instead of waiting the lease out.
//
// # What an incarnation is
//
// An Incarnation is the pod (namespace, name, UID), the container name, and a nonce:
// 128 random bits the process draws when it starts. The process writes the nonce, as
// the line "baton-incarnation:<nonce>", to its container's termination message file
// (terminationMessagePath, /dev/termination-log by default) before it records the
// incarnation anywhere. When the container terminates, for any reason (exit, crash,
// SIGKILL, OOM kill), the kubelet copies that file into the container's terminated
// state in the pod status (state.terminated.message, and after a restart
// lastState.terminated.message).
//
// # Why a nonce and not the container ID
//
// A process cannot learn its container ID safely from its pod's status: right after a
// restart, the status may still show the previous container running (the kubelet
// writes status asynchronously), with its ID and restart count, and nothing in one
// reading tells a stale status from a fresh one (start times are in whole seconds and
// a crash loop restarts within a second). A process that recorded the previous
// container's ID would be "proven dead" by the report of that container's end while
// it runs and leads. The nonce needs no reading of the status at all: only this
// process knows it before it records it, and the kubelet's report carries it only
// from this container's own termination message file, which the kubelet creates anew
// for every container start.
//
// # Which reports are trusted
//
// ProvesDead reports a pod status as proof that an incarnation is over only when the
// status is of the same pod UID and shows, for the same container name, a terminated
// state (current, or the last one before a restart: a newer incarnation runs) whose
// message has the incarnation's line. Nothing else proves death, and must never
// shorten a wait:
//
//   - the pod object gone: a force delete removes it while the process may still run;
//   - a deletion timestamp: the process runs until its grace period ends;
//   - a NotReady node, a pod phase of Unknown, a failed probe: the process may run,
//     cut off from the API server;
//   - a status about another incarnation: another nonce, another pod UID (a pod of the
//     same name re-created), another container;
//   - a newer incarnation of the container whose last state does not carry the
//     nonce (the app overwrote the termination message): the lease rules decide.
//
// Without a positive report (the kubelet down, the node cut off) the lease rules hold
// as without this package.
//
// The container's status is read from the pod's container statuses and its init
// container statuses, so Baton may run as a native sidecar (an init container with
// restartPolicy Always), whose status the kubelet reports among the init containers.
//
// # Who can prove a death
//
// The nonce is not secret: it is in the Lease annotation for every reader of the
// Lease. A pod status is written by the kubelet, but the API lets anyone with update
// or patch on pods/status in the namespace write one too, and such a status carrying
// the line proves the holder over to every follower with a death watch: it takes the
// Lease at once while the holder runs, and two leaders run until the holder's next
// renew fails (at most its RenewDeadline; the fences bound what the old term writes,
// see the leaderelection package doc). Trust pods/status writers as Lease writers
// (leaderelection's "Who controls leadership"): grant update and patch on pods/status
// in the candidates' namespace to nobody but the kubelets (the node authorizer does
// so), and give no workload there a Role with those verbs on pods/status nor a
// wildcard over resources or verbs. Where that cannot be ensured, leave the death
// signal off (no Config.DeathWatch): the lease rules then decide alone.
//
// # Learning one's own incarnation
//
// Learn reads the pod's identity from the Downward API environment (POD_NAMESPACE,
// POD_NAME, POD_UID, see deploy/) and the container's name from CONTAINER_NAME, draws
// the nonce, and writes the termination message file; only then does it return the
// incarnation. None of the three POD_ variables set means the process does not run in
// a pod (embedded mode; CONTAINER_NAME alone is set by other environments too): Learn
// returns ErrNotInPod, and the caller leaves the death signal off. Some
// set but not all is an error naming the missing ones. The application must not
// overwrite the termination message file later, and may append at most 4045 bytes to
// it: the kubelet keeps only the last 4096 bytes of the file (its
// getTerminationMessage reads it with tail.ReadAtMost(path, 4096)), so past that the
// line, written first, is cut off; it then cuts each container's message to its first
// 12288/N bytes, N the pod's containers, init and ephemeral containers, which keeps
// the line while the file is within 4096 bytes. A message without the line proves
// nothing, which is safe but slow.
//
// # Watching
//
// Watcher follows one pod by name (a List and a Watch with the field selector
// metadata.name) and closes a channel once the pod's status proves the incarnation
// over. It implements the elector's death watch (leaderelection.Config.DeathWatch).
package incarnation
