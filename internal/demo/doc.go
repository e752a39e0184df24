// Package demo is `baton demo`: several replicas of the reference
// controller in one process, on the embedded world of package app (one
// in-memory lease, one in-memory published object, a shared configuration
// document and pod set), put through leader failures while their inputs
// change, with every hand-over checked.
//
// # What a run does
//
// Run starts Options.Replicas replicas, the first alone until it leads (so
// that runs of one seed start alike; who wins each later race for the lease
// is up to timing, as in a cluster). Then,
// for each of Options.Failovers failovers, it lets the leader lead for
// Options.Dwell while the pods change, changes the configuration and the
// pods again and waits until every replica's all-replica side holds the
// change, and then fails the leader in one of five ways, in an order
// drawn from Options.Seed:
//
//   - kill: the replica's stores fail every call from now on and its context
//     is cancelled, so it can neither renew nor release: a crash. The lease
//     is left held, the simulated kubelet stays silent (as when the node is
//     cut off), and the others take the lease once it expires. The replica
//     is then started again, fresh, as a follower.
//   - crash: the same, but once the replica's process is over (its Run
//     returned, elector and components stopped) the simulated kubelet
//     reports its container terminated. A follower's death watch takes
//     that as proof and the follower takes the lease at once, without
//     waiting it out. The replica is then started again.
//   - pause: every call the replica makes to the lease store and the
//     published object blocks, whatever its context says, for a lease
//     duration plus a renew deadline: the replica is frozen past its lease,
//     as by SIGSTOP or a long GC pause, while the others take over. Then it
//     resumes and must find its term over (its elector's own clock has ended
//     it) and step down without writing anything.
//   - release: the replica shuts down gracefully and releases the lease; a
//     follower takes over at once. It is then started again.
//   - hang: a leader-only component of the replica (the "stall" component
//     every replica runs) hangs when its term ends: it ignores the end of
//     its context. The replica is paused until another leads, then every
//     other replica is paused until it leads again, without the stuck
//     component. It must say so (/healthz and /readyz fail, naming it) and,
//     after the step-down grace (a lease duration), resign: it releases the
//     lease and a follower takes over at once. The hand-over checked is
//     from the stuck replica's term to the next; then the component is
//     unblocked and the replica must be healthy again.
//
// After a kill or a pause it changes the configuration and the pods once
// more while nobody leads, so that the new leader can only learn the newest
// state from its own all-replica side through the term's replays. Once per
// run (after the first failover) the configuration change is an invalid
// document, which must never replace the valid one: the new leader keeps
// rendering the last valid configuration and publishes the refusal's reasons
// in the object's status.
//
// # The simulated kubelet
//
// Outside a pod no kubelet reports on a process, and the death signal is
// off; the demo plays the kubelet to show it. Each replica runs in a pod of its own, and each start of it is a new
// incarnation of the pod's container (package pkg/k8s/incarnation: a
// nonce drawn at start). Its election records the incarnation in the lease
// (leaderelection.Config.Incarnation) and watches the holder's through the
// kubelet (Config.DeathWatch). The kubelet keeps one pod status per
// replica: the container running, and, once the engine tells it a start's
// process is over (after a crash, and after a graceful release), terminated
// with that start's termination line, kept as the last state after a
// restart; it reports nothing of a killed replica, nor of a paused or
// hanging one, whose process runs. A follower's watch is proven by the
// check a Kubernetes watch makes (incarnation.ProvesDead).
//
// # Checks
//
// After each failover it checks that the term increased; that the old and
// the new leader's terms did not overlap (a term is taken to run from the
// moment its acquiring write was sent to the moment its elector's term
// context ended, both measured so as to make an overlap more likely to be
// seen, not less); that the new term became ready (every leader-only
// component held the replayed state) and how long after the lease was
// acquired; that the ConfigPublisher, DeploymentScheduler and Coordinator of
// the new leader hold the newest configuration version and pod generation;
// that the new leader's first TemplateRenderedEvent was rendered from them,
// with a server line for each ready pod and none for the others; that the
// published object carries the new term, the new leader's name and the
// newest versions (and the refusal when the newest document was invalid);
// that a write with the old term is refused (fencing); that the takeover
// was of the expected kind (expired lease, or released one after a release
// or a resignation); after a kill, that the lease was taken no sooner than
// a lease duration after the old leader's last renew was sent (the lease
// rules: the kubelet was silent); after a crash, that it was taken sooner
// (the report, not the lease, ended the wait), and that the new term
// started no sooner than the kubelet's report and within a quarter of a
// lease duration of it (the output states the time in milliseconds);
// after a pause, that the paused replica ended its term
// for a missed renew deadline; and after a hang, that the stuck leader
// reported the missing component, resigned once, and was healthy again
// once the component returned.
// At the end it checks, over the whole run, that no two terms overlapped,
// that terms strictly increased, that the observers lost no event and that
// every replica still running is healthy.
//
// # Output
//
// With Options.Live the terminal is redrawn (ANSI) a few times a second:
// who leads, in which term, what each leader-only component holds, the
// published object, and the last lines of the run's log. Without it the log
// lines are printed as they come. After each failover a line reports its
// checks; Report.WriteSummary prints the table at the end and
// Report.WriteSVG draws the timeline of terms, replays, term-ready marks and
// faults.
//
// # Options and interruption
//
// Start from DefaultOptions: Run takes every value as given, refuses those
// out of range before it starts anything (an *OptionError per problem,
// naming the field), and Options.Estimate says about how long a run takes.
// When Run's context ends first, the run stops, keeps the report of the
// failovers done so far, marks the one in progress Interrupted (its checks
// are left out: they failed for want of time) and sets
// Report.Interrupted; the verdict is then INTERRUPTED, not FAIL.
//
// # Concurrency properties
//
// Run owns every goroutine it starts (the replicas, their observers, the
// live view) and returns once all of them ended. A Mux is safe for
// concurrent use; the Report is immutable once Run returned.
package demo
