// Package leaderelection is the event adapter between the pure leader
// election of pkg/k8s/leaderelection (imported as k8sle) and the
// controller's event bus: it runs an elector and publishes its transitions
// as the leadership events of pkg/controller/leadership (re-exported by the
// catalog pkg/controller/events), which the controller runtime
// (pkg/controller/lifecycle) turns into terms.
//
// # Usage
//
//	le, err := leaderelection.New(cfg, clientset, bus, leaderelection.Callbacks{}, logger)
//	// or, embedded: leaderelection.NewWithStore(cfg, k8sle.NewMemoryStore("baton"), bus, ...)
//	m, err := lifecycle.NewManager(bus, lifecycle.Options{TermContext: le.TermContext})
//	m.AddCampaigner(le) // a lifecycle.Component (Start = Run), started once the state is read
//
// # Events
//
// Run publishes LeaderElectionStartedEvent once, then, as the elector calls
// back:
//
//   - BecameLeaderEvent{Identity, Term} before calling OnStartedLeading;
//     Term is the elector's fencing token for the acquisition;
//   - LostLeadershipEvent{Identity, Term, Reason} before calling
//     OnStoppedLeading, exactly once per BecameLeaderEvent and always after
//     it, also when the term ended before its OnStartedLeading goroutine ran;
//     Reason is one of ReasonContextCancelled, ReasonRenewDeadlineMissed,
//     ReasonLeaseCleared, ReasonHandedOver, ReasonLeaseTakenPrefix + the new
//     holder's identity, or the text of another cause the elector gave;
//   - NewLeaderObservedEvent{Identity, IsSelf} before calling OnNewLeader,
//     for each observed change of holder.
//
// Elector returns the elector itself, for what only it answers (IsLeader,
// Term, HandOver, ...).
//
// Terms on one bus therefore come as strictly alternating BecameLeader/Lost
// pairs with strictly increasing terms: losing the lease ends the term, not
// the process, and the elector campaigns again in place.
//
// # Concurrency properties
//
// The callbacks run where the elector runs them: OnStartedLeading in a
// goroutine per term, OnStoppedLeading on the election goroutine, OnNewLeader
// from one notifier goroutine, in order. Publishing never blocks (the bus
// drops for full subscribers instead); the LostLeadershipEvent of a term
// waits only for the BecameLeaderEvent of the same term to be published by
// its goroutine. Run returns after all of them returned. TermContext and
// Resign are safe from any goroutine, as is the elector; no lock is held
// while publishing or calling back.
package leaderelection
