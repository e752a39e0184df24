// Package leaderelection elects one leader among candidates through a
// coordination.k8s.io/v1 Lease, with the Lease protocol of client-go's
// tools/leaderelection, so Baton electors and stock client-go electors can share a
// Lease and never both lead. It knows nothing of an event bus; the adapter that turns
// its callbacks into events lives elsewhere.
//
// # Usage
//
//	elector, err := leaderelection.New(leaderelection.Config{
//		Identity: podName, LeaseName: "my-controller", LeaseNamespace: ns,
//		ReleaseOnCancel: true,
//	}, clientset, leaderelection.Callbacks{
//		OnStartedLeading: func(ctx context.Context) {
//			// leader work; termctx.Get(ctx) gives the term, ctx ends with it
//		},
//		OnStoppedLeading: func() { /* after each term, exactly once */ },
//	}, logger)
//	err = elector.Start(ctx) // blocks until ctx ends
//
// NewWithStore takes any LeaseStore instead of a clientset, e.g. a MemoryStore for a
// single process. IsLeader, Term and GetLeader answer at any time.
//
// Less formally: at most one candidate believes it leads at any moment, as long as
// clocks tick at about the same rate (see Clocks in docs/design/leaderelection.md) and nobody but the candidates
// writes the Lease; each leadership gets a number (its term) larger than every earlier
// one, to stamp writes with; a crashed leader is replaced a LeaseDuration after its
// last renew, a leader that stops or hands over is replaced within milliseconds.
//
// # Configuration
//
// The zero Config (with Identity, LeaseName, LeaseNamespace and a clientset or store)
// runs an election with the defaults 15s/10s/2s; each field states its default and
// bounds, and New names every bad field. Running without an election must be asked
// for with Config.SingleReplica. Config.Liveness keeps the holders' liveness outside
// the lease (package sharding's member Leases); KubernetesLeaseGroup gives the stores
// of a group of labelled Leases one shared watch.
//
// # Design notes
//
// The design notes (the protocol, expiry, releases, deletes and cold starts, slow
// acquiring writes, history going back, the death signal, following only, hand-over,
// mixing with client-go, watching, terms, clocks, values from the cluster, who controls
// leadership) are in docs/design/leaderelection.md in the repository.
//
// # Concurrency properties
//
// One election goroutine (the caller of Start) does all store reads and writes and runs
// OnStoppedLeading and OnHolderDead; each LeaseStore.Watch call runs in a goroutine of its own (so a hung
// List cannot stall renews), each term's OnStartedLeading runs in a goroutine of its
// own (one term's call returns before the next term starts), and OnNewLeader calls
// come in order from one notifier goroutine. Start waits for all of them, and for abandoned watches to close, before it returns. OnStoppedLeading
// runs exactly once per started term, after the term context was cancelled, also when
// the election goroutine panics. Terms of one elector never overlap. IsLeader, Term,
// GetLeader, Healthy, Stats, HandOver, SetCampaigning, Synced and Identity are safe to
// call from any goroutine.
// No lock is held while calling a callback or the store.
//
// # Testing
//
// MemoryStore has the compare-and-swap and watch semantics of the Kubernetes store and
// runs in testing/synctest bubbles, where all timing here (expiry, renew deadline,
// backoff) runs on the fake clock. Package leaderelectiontest writes, deletes and
// restores a MemoryStore's Lease by hand and fails its watches.
package leaderelection
