// Package leaderelection elects one leader among candidates through a
// coordination.k8s.io/v1 Lease, with the Lease protocol of client-go's
// tools/leaderelection, so Baton electors and stock client-go electors can share a
// Lease and never both lead. It knows nothing of an event bus; the adapter that turns
// its callbacks into events lives elsewhere.
//
// # Usage
//
// Build an Elector with New (Kubernetes, client-go typed client) or NewWithStore (any
// LeaseStore, e.g. a MemoryStore for a single process), then call Start, which blocks
// until its context ends. Leader work goes in Callbacks.OnStartedLeading and runs under
// the term context; IsLeader, Term and GetLeader answer at any time.
//
// # Protocol
//
// The lease fields are client-go's: holderIdentity, leaseDurationSeconds, acquireTime,
// renewTime, leaseTransitions. A candidate takes the lease when it is absent, released
// (holder ""), or not renewed for leaseDurationSeconds; leaseTransitions grows when the
// holder changes. Every write is a compare-and-swap on the resourceVersion. The leader
// renews every RetryPeriod; if it has not renewed successfully for RenewDeadline
// (counted from the send time of its last successful renew), its term ends. Releasing
// (Config.ReleaseOnCancel) writes holder "", leaseDurationSeconds 1 and both times, as
// client-go does.
//
// # Expiry
//
// Followers judge expiry by their own monotonic clock from the moment they saw the
// lease's fields last change, never by the remote renewTime, so clock offsets between
// nodes do not matter. Because the observation comes after the renew was sent, and
// RenewDeadline < LeaseDuration, the old leader's term has ended by its own clock
// before any follower takes over; the difference is the margin for clock rate skew.
//
// # Watching
//
// Unlike client-go's followers, which poll, followers here watch the lease
// (LeaseStore.Watch). A released lease is taken on the watch event; a crashed leader's
// lease is taken by a timer at observation + leaseDurationSeconds; a follower sends no
// requests at all while the holder keeps renewing. When the watch breaks it is opened
// again (which re-lists) after a jittered backoff; an open that takes RenewDeadline is
// abandoned and retried, and a watch that stays silent for a RetryPeriod after a write
// conflicted is replaced, so a stalled connection cannot blind a follower. A lease
// deleted by hand is re-created at once by a candidate that knows its last holder's
// term is over (no holder, or the candidate itself); the others wait out its last
// holder's lease duration. A holder written by hand is never taken over before its
// lease duration, not even by the candidate it names.
//
// # Terms
//
// Each acquisition is a term, numbered by the resourceVersion of the acquiring write.
// resourceVersions of one resource are comparable (Kubernetes 1.35, KEP-5504), so terms
// are strictly increasing over all acquisitions of the lease, also after it was deleted
// and re-created, and serve as fencing tokens. TermFromContext reads the term from the
// term context; Elector.Term gives the current one. An elector refuses (and releases) an
// acquisition whose resourceVersion is not a number above its previous term.
//
// The term context ends when the term does: on step-down, on shutdown, and by its own
// clock check: its Err and Done report the term over as soon as RenewDeadline has
// passed since the last successful renew, even before any goroutine ran to cancel it,
// so a process resumed after SIGSTOP sees at once that it no longer leads.
// context.Cause gives ErrRenewDeadlineMissed, ErrLeaseLost or the cause of Start's
// context. Contexts derived from it end when the elector's timer cancels it, which runs
// as soon as the process does.
//
// Losing the lease ends the term, not the elector: it follows again and campaigns for a
// new term in place, once the previous term's OnStartedLeading has returned.
//
// # Concurrency properties
//
// One election goroutine (the caller of Start) does all store reads and writes and runs
// OnStoppedLeading; each LeaseStore.Watch call runs in a goroutine of its own (so a hung
// List cannot stall renews), each term's OnStartedLeading runs in a goroutine of its
// own, and OnNewLeader calls come in order from one notifier goroutine. Start waits for
// all of them before it returns. OnStoppedLeading runs exactly once per started term, after the
// term context was cancelled, also when the election goroutine panics. Terms of one
// elector never overlap. IsLeader, Term, GetLeader, Healthy and Identity are safe to call
// from any goroutine. No lock is held while calling a callback or the store.
//
// # Testing
//
// MemoryStore has the compare-and-swap and watch semantics of the Kubernetes store and
// runs in testing/synctest bubbles, where all timing here (expiry, renew deadline,
// backoff) runs on the fake clock.
package leaderelection
