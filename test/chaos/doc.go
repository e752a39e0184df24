// Package chaos tests the elector (pkg/k8s/leaderelection) the way robustness suites
// test consensus systems: seeded random fault schedules over 3 to 5 candidates, every
// history recorded, and a checker over every history. It has no code outside its
// tests.
//
// # Running
//
// hack/test.sh runs it with everything else: TestChaos runs 500 histories on the
// in-memory store and the seeds soaks found beyond them (chaosSeeds), each in a testing/synctest bubble (seconds of wall time for hours
// of fake time), with clock skew; TestChaosReplay runs 10 seeds (and 5 kubelet
// seeds) twice each and compares the histories; TestChaosSkewBeyondTolerance is the negative control of skew (200
// histories at a rate beyond the tolerance must show two leaders);
// TestChaosCreateRace runs 8 fixed seeds of the create-race class (three candidates,
// the lease deleted by hand, often right after a Create lands, lagging watches, slow
// requests: two candidates wait out one absence and Create together; seed 206 gave two
// leaders when a Create's answer started a term before the watch showed the Creates
// around it); TestChaosKubelet runs 60 histories with the kubelet model (below); and
// TestChaosAPIServer runs 3 histories against a real kube-apiserver and etcd
// (pkg/batontest). Alone:
//
//	go test -race -run 'TestChaos$' -v ./test/chaos
//	BATON_CHAOS_HISTORIES=20000 go test -race -run 'TestChaos$' -v ./test/chaos   # soak
//	BATON_CHAOS_FIRST=100000 BATON_CHAOS_HISTORIES=5000 ...                      # other seeds
//	BATON_CHAOS_SKEW=0 go test -race -run 'TestChaos$' -v ./test/chaos           # no skew
//	BATON_CHAOS_SKEW_RATE=1.6 go test -race -run 'TestChaos$' -v ./test/chaos    # beyond
//	BATON_CHAOS_API_HISTORIES=10 go test -race -run TestChaosAPIServer ./test/chaos
//	BATON_CHAOS_HISTORIES=3000 go test -race -run 'TestChaosCreateRace$' -v ./test/chaos
//	BATON_CHAOS_HISTORIES=5000 go test -race -run 'TestChaosKubelet$' -v ./test/chaos
//
// With -v each test logs a summary: histories, terms, fenced writes, faults injected
// by kind, violations by kind with their seeds, the slowest recovery after the faults
// stopped and the smallest gap between two leaders' terms.
//
// # Replaying a seed
//
// A failing history prints its seed, the schedule, the faults as injected, the terms
// each candidate believed in, the violations and the elector logs, and the command
// that replays it:
//
//	BATON_CHAOS_SEED=N go test -race -run 'TestChaos$' -v ./test/chaos
//
// An in-memory history replays exactly: the same faults at the same instants of fake
// time, the same terms and fenced writes to the nanosecond (TestChaosReplay checks 10
// seeds; seeds 1 to 400, run in 2400 pairs, gave equal histories and equal elector
// logs, line for line; kubelet seeds 1 to 150, run in pairs, gave equal histories
// with equal proofs).
// The seed fixes the schedule, each candidate's per-call faults (drawn per operation
// when the call starts, before a pause can hold it), and each incarnation's retry
// jitter (leaderelection.Config.JitterSource). Every call and watch delivery takes a
// seeded latency below 1ms (again after a pause releases it), so that what the
// candidates do never happens at one instant of fake time, where goroutine
// scheduling would pick the order; the elector
// takes inputs that are ready together in a fixed order; a watch the server or the
// fault store ends at the instant of an event never delivers it. A replay runs the
// seed BATON_CHAOS_REPEAT times (default 20), which all show the same history. The
// real API server histories run on the real clock and do not replay exactly.
//
// # Faults
//
// Each candidate reaches the store through a fault store of its own, which injects,
// while a window of that kind is open: requests dropped or delayed, replies lost after
// the write was applied (the caller gets an error, the lease changed) or delayed past
// the caller's deadline; watch events delivered late; a partition (calls fail at once
// or hang until their context ends, watches close, new ones fail); a pause (the
// candidate's store calls, watch deliveries and fenced writes are held until it
// resumes, so a leader that checked its term before the pause writes after it; the
// elector's own timers keep running, as there is no clock to stop, so its term ends on
// time by its own clock, which is what a resumed process's lazy check reports). Point
// faults close the candidate's watches or restart it (its Start returns and a new
// incarnation starts after a while, with or without ReleaseOnCancel).
//
// The in-memory server wraps leaderelection.MemoryStore and adds what a cluster does
// to all candidates: 410 Gone (every watch closes), the Lease deleted by hand, an
// etcd restore (an older snapshot comes back with its older resourceVersion, and later
// writes reuse the versions that follow, so a stale compare-and-swap can match again),
// and an API server restart (every watch closes, every call fails for a while). Half
// of the candidate faults hit whoever leads when the fault starts.
//
// On the real API server the faults are those a client-side wrapper can inject: lost
// and late replies, dropped requests, closed and lagging watches, 410 (all watches
// closed at once: a client cannot make the server send one), deletion of the Lease
// through the API, partitions, pauses and candidate restarts. Restores run on the
// in-memory server only, and so do API server restarts by default (a real restart
// takes seconds, which the CI budget of this package does not have).
// BATON_CHAOS_API_RESTARTS=1 adds one to each history of TestChaosAPIServer as a soak
// fault: at a seeded moment of the fault phase kube-apiserver stops (etcd keeps
// running) and is started again a seeded 1 to 4 s after the stop began, or once it
// exited if that took longer (it stops listening at once, then waits up to 3 s for
// open watches). A restart hits every Lease on the server, so the histories then run
// one at a time. The faults are over when the server answers again (a start takes
// about 3 s): the recovery bound counts from then. The summary counts the restarts as
// "api server restarted (real)", and a history without one fails. Seeds 1 to 5 show
// no violation, in 1.5 minutes:
//
//	BATON_CHAOS_API_RESTARTS=1 BATON_CHAOS_API_HISTORIES=5 go test -race -p 1 -run 'TestChaosAPIServer$' -v ./test/chaos
//
// Clock skew (in-memory histories; on by default, BATON_CHAOS_SKEW=0 turns it off):
// each candidate's elector runs on a clock of its own (leaderelection.Config.Clock)
// built on the bubble's time, which is the true time. A skew window (0 to 2 per
// history, drawn after the other faults so that a seed keeps the faults it had
// without skew) makes one candidate's clock (the leader of the moment in half of
// them) run at a rate from 1−ε to 1+ε for 0.5 to 3 lease durations, ε being the
// elector's tolerance (leaderelection.Config.ClockTolerance: 0.2 for both timings
// here): its readings advance rate times as fast as the true time and its timers
// (expiry waits, the renew deadline, backoff, call and watch timeouts) fire after
// d/rate of true time. Two clocks then differ in rate by up to (1+ε)/(1−ε) =
// LeaseDuration/RenewDeadline, the bound itself, so the suite tests the documented
// tolerance to its edge; the checker compares terms on the true time. Seeds 1 to 3000
// show no violation; seeds 3001 to 15000 one, seed 11263, which is not about clocks
// (see the checker below).
//
// BATON_CHAOS_SKEW_RATE=r forces every window's rate to r, to show that the fault is
// real; TestChaosSkewBeyondTolerance does so at r = 1.6 (a fast follower next to a
// leader at the true rate: beyond LeaseDuration/RenewDeadline = 1.5) and finds two
// leaders in 6 of seeds 1 to 200 (19, 84, 125, 142, 150, 197).
//
// Skew found one elector defect: a leader whose renew's reply was lost, and whose
// retry then conflicted with that renew, recognised the renew as its own but counted
// its term from the retry's send time, so its term outlived the follower's expiry
// wait by the time between the two sends (0.66s in seed 2320 with rates 0.924 and
// 1.073, before the seeded latencies changed the seeds' paths); see
// leaderelection.TestRecognisedLostReplyCreditsItsOwnSend.
//
// A soak of seeds 20001 to 21000 found one more elector defect, seed 20509 (pinned in
// chaosSeeds, which CI runs after the 500): c0's watch was down for 2.9s (a
// partition, then watch opens failing) while c1 led and renewed; 23ms before c0's
// expiry wait for the last state it had seen (c1's renew at resourceVersion 42) ran
// out, an etcd restore put exactly that state back at version 42 (over 47), and c0's
// compare-and-swap on 42 matched: c0 led term 43 for 1.57ms beside c1, which
// stepped down when its watch showed the version gone back. A restore cannot make
// a candidate that watched through it act on an old state (it sees the version go
// back), but it can make a compare-and-swap on an old version match again for one
// that did not. The elector now acquires nothing while its watch has been down for a
// RetryPeriod, and waits from the next list (leaderelection.TestBlindFollowerAfterRestore).
// Seeds 30301 to 35300 found one more, seed 34712 (also pinned): a cold start whose
// Create's reply was lost took its own record back at once when its watch showed it,
// and led 6.8s beside the holder of the Lease deleted before its first look; the
// record of a Create whose answer never came is now waited out
// (leaderelection.TestLostReplyCreateAfterWatchedHolder shows the same path after
// a watched holder, which the checks of a Create's answer had covered only when the
// answer came).
//
// Not injected: a step of a candidate's wall clock. The elector never compares a wall
// time (the lease's renewTime is informational) and takes durations from the
// monotonic reading, which a step of the wall clock does not move; a Clock cannot
// return a time.Time whose wall and monotonic readings disagree, so the suite cannot
// model one. The real API server histories run on the real clock, without skew.
//
// # Recording
//
// A term is recorded from OnStartedLeading to the end of its context. In a bubble the
// two instants are exact (time does not advance while a goroutine can run), so terms
// of different candidates are compared on one clock. On the real API server the
// leader samples its term context every 5ms, and the recorded interval is the part of
// the belief that is certain (from OnStartedLeading, which saw the context on, to the
// last sample that saw it on; a term over before its first sample is the instant it
// began), so an overlap found there is never a scheduling artefact.
//
// The fault store also records, per incarnation, each write whose answer the elector
// got (when it was sent and answered) and the highest resourceVersion handed to its
// watch: a relay puts events in a buffered channel, as a client's watch does, so an
// event handed is one the elector can read from then on, also while it waits for a
// write. Each term started (also one over before its leader work began) is matched
// with the write that was given its version.
//
// While it believes it leads, each leader writes to a fenced register every half
// RetryPeriod or so, with its term: the register accepts a write whose term is at
// least the highest term it accepted, as a store that compares terms does. Each write
// takes a little time on each side, so writes overlap.
//
// # Checker
//
// Each history is checked for:
//
//   - overtaken writes: no term starts on a write whose answer came after the watch
//     had been handed a later state of the lease (a higher resourceVersion): the
//     elector could know the lease had moved past its write;
//   - two leaders: no two incarnations inside overlapping terms (a term that ends at
//     the instant another starts does not overlap it). One overlap is counted as a
//     note instead: the elector's documented cold-start window, where a candidate that
//     never saw the lease (before it sent the write that acquired it; states it wrote
//     itself do not count, so a cold start whose Create's reply was lost and which then
//     took back its own record is one: seed 34712) re-creates one
//     that was deleted while its holder was cut off or still waiting for the answer to
//     its acquiring write (it cannot tell that from a first start). It is tolerated
//     only when the cold start's term is above the old one, so that the fenced register
//     refuses the old term's writes once the new term wrote, whichever belief began
//     first (an old holder whose answer came late begins after the cold start); the
//     summary reports how many and the longest. Open: seed 11263 (outside CI's seeds;
//     with or without skew) fails it: after an etcd restore moved the versions back
//     and the Lease was then deleted, a restarted candidate re-created it at once
//     while the old holder still led, under a term (8) below the old one (13), so
//     fencing did not cover the 12.6ms overlap. Both parts are documented limits of
//     the elector (the cold-start window; terms do not span a restore for a candidate
//     that did not see the later versions). Open too: seed 7004133 (a soak of seeds
//     7000001 to 7005000, with skew; the only failure): c4 took the Lease c2 had
//     released and was cut off; a restore put the release back over c4's take, and
//     c1, whose watch had not shown the take, took the release at once under the
//     same term, 9: two leaders for 1.03s (docs/design/leaderelection.md, # History
//     going back);
//   - term order: each term is above every term that started before it (terms are
//     fencing tokens), but for the cold-start window above;
//   - the fenced register's history, with porcupine, against a model in which a write
//     is accepted exactly when its term is above every term written before, or equal to
//     it from the same incarnation (one term, one writer); writes accepted after their
//     term ended but before a newer term wrote (a paused leader's late write) are
//     counted, not failed: fencing makes them harmless;
//   - stepped down from a lease it still held: a term that ended as lost while the
//     lease's current state was the incarnation's own write (in-memory only);
//   - after the faults stop: by then + LeaseDuration + 2 × RetryPeriod exactly one
//     candidate leads and every live candidate's GetLeader names it; a LeaseDuration
//     later the same term still leads, no term started in between, and the leader's
//     fenced writes were accepted. The second RetryPeriod is slack for the backoff of a
//     watch broken at the end of the faults (up to 1.5 × RetryPeriod). The bound holds
//     also after the lease was deleted or a snapshot restored: every holder here is a
//     Baton elector, and the elector waits out an unknown Baton holder for one lease
//     duration (a holder not Baton's, e.g. client-go's, gets three; no history here has
//     one).
//
// Term order, the register model, refused writes of the settled leader and a
// step-down from its own write are not failed, but reported as notes, across a restore
// of an older snapshot (for term order: a restore after the send of the earlier term's
// acquiring write, which may have landed before it, and before the later term began):
// the store itself then hands out versions, and so terms, it handed out before (one
// version can then name two states), which no elector can prevent. Two leaders and a cluster without a leader across a restore are failed.
//
// Each violation names the issue 9 defect whose pattern it shows (a lease re-created
// by a candidate that had seen it: defect 1; that never had: defect 2; a leader that
// gave up its own lease: defect 3; a restore: defect 4), so that the summary reads as a
// table of seeds per defect.
//
// # The kubelet model
//
// TestChaosKubelet gives the candidates the death signal (leaderelection.Config
// Incarnation and DeathWatch). Each candidate is a container in a pod of its own, and
// each incarnation of the candidate (a restart starts a new one) a process with an
// incarnation of its own: pod namespace, name and UID, container, and a nonce drawn
// from the seed (pkg/k8s/incarnation). The model's kubelet writes the pod's status:
// the process running, after the last one's end (its terminated state as the last
// state); and, only after a process has stopped (its elector's Start returned), that
// process terminated, at once (within 50ms, 8 in 20), late (0.2 to 2 lease durations,
// 6 in 20), never (4 in 20), or without the incarnation's line in the message (2 in
// 20; proves nothing). Its faults: a stale status (an older incarnation's end shown as
// the current state while a newer one runs or has stopped since), a force delete (the
// pod object gone while its process runs; that process's stop is never reported, and
// the next incarnation runs in a new pod of the same name with a new UID), and broken
// pod watches. Each elector's death watch follows the holder's pod as the Watcher
// does (a list, then the events): each status is delivered after a seeded latency,
// later while the candidate's watches lag, held while it is paused; a partition, an
// API server restart or a broken pod watch breaks it (the statuses until then are
// lost) and it opens again a second later, from the current status.
// incarnation.ProvesDead decides what a status proves. One candidate in four releases
// the lease on a stop (ReleaseOnCancel; the others crash), and restarts are about
// twice as frequent among the faults as in TestChaos. After the second settle probe the settled leader is
// killed (its calls cut off: no release) and its stop reported within a second.
//
// A same-identity client-go renewer (issue 25, defect 2): in half the crashes (not
// the final one) the crashed candidate's container comes back, for its down time, as
// a client-go build of the same identity (a StatefulSet pod, an in-place image
// change): from at once and every RetryPeriod, while the lease names its identity, it
// renews the lease as client-go does, keeping the acquireTime and replacing only the
// spec, so the dead incarnation's marker and incarnation annotations stay; the pod
// status meanwhile reports the dead incarnation's end as usual. It leads while it
// renews, so a takeover earlier than the lease rules allow from one of its writes
// fails the history. The draws come from a stream of their own (seeded by the
// history's seed), so a seed keeps its faults. An elector that took the incarnation
// as bound by the acquireTime alone fails 14 of the 60 CI seeds so.
//
// A store whose slow watchers skip states (defect 8): every watch reaches the
// MemoryStore through a relay that holds each event for its latency and lag, and the
// MemoryStore keeps one undelivered event per watcher, so a held relay makes it skip
// states; it marks the event after a skip (leaderelection.LeaseEvent.Gap), and the
// summary counts them ("watch event after skipped states"). Lagging watches lag up to
// three RetryPeriods, so the class covers steady lags above a RetryPeriod (defect 9):
// with them, create-race seed 3 stalled an elector that gave a new watch the lag it
// had measured, when the lag began where it could not be measured (each new watch was
// given up before its first event). TestChaosKubelet fails when the CI seeds show no
// client-go renew or no skip. A soak with these shapes (BATON_CHAOS_FIRST=1001
// BATON_CHAOS_HISTORIES=2000, each of TestChaos, TestChaosCreateRace and
// TestChaosKubelet; 12 minutes on two heavily loaded cores) showed no violation but
// kubelet seed 1884, the documented restore-then-delete-then-cold-start limit below;
// 3864 client-go renews and 776 watch events after skipped states in the kubelet
// histories, 3234 such events in the create-race ones.
//
// The checker adds:
//
//   - a proof delivered to a death watch for an incarnation whose process ran then;
//   - a takeover earlier than the lease rules allow (a write that took the lease from
//     another holder less than LeaseDuration/(1+ε) after that holder's state was
//     written, ε the clock tolerance with skew on: no follower's wait is shorter)
//     must be on a proof of the holder's recorded incarnation, given to the taker's
//     death watch before the write landed, and that incarnation's process must have
//     stopped before the write landed; otherwise the history fails, naming the taker,
//     the write, its time and the proofs the taker had (across a restore, a note);
//   - the final crash: the next term starts within 100ms of the status that reported
//     it (liveness; the model's latencies make it about 2ms).
//
// The summary counts the proofs delivered, the early takeovers judged, the final
// crashes and the slowest takeover after a report. Seeds 1 to 5000 (8 minutes on two
// loaded cores): 23038 terms, 20979 proofs delivered, 6894 takeovers on a death proof
// judged, 4226 final crashes (the slowest taken over 2.7ms after its report), no
// violation of the kubelet checks; two histories (545, 1884) give two leaders, neither
// on a death proof: both are the elector's documented limit of a restore moving
// versions back, then a hand delete, then a cold start re-creating the Lease under a
// term no higher than the cut-off holder's (docs/design/leaderelection.md, # History
// going back; seed 11263 of TestChaos).
//
// The suite found one defect of the death signal: seed 258 gave two leaders for 1.4s.
// A follower whose watch had stalled saw neither the crashed holder's last renew nor
// the takeover after it; an etcd restore put the dead holder's last state back; the
// follower re-listed, found that state (new to it) with the proof of its holder's
// death, and took it at once, while the holder erased by the restore, cut off, still
// led. The elector now takes at once on a proof only a state a watch event delivered
// (leaderelection.TestDeathSignalRestoredState).
//
// The checker can fail: TestCheckerKubelet feeds it hand-made histories; an elector
// that carried a holder's proof over to the next holder it saw failed 38 of the 40
// first seeds; one that carried a proof over to the same container's next incarnation
// (a restart) failed 11 of seeds 1 to 1500, seed 53 first, which is why CI runs 60.
// Not modelled: a pod re-created under the same name while the force-deleted one's
// process still runs (two processes of one candidate), and liveness while faults are
// active (the final crash measures it in the calm).
//
// # Concurrency properties
//
// Histories of TestChaos run in parallel (t.Parallel), each in its own bubble with
// its own server, candidates and register; nothing is shared between them but the
// summary, which has a mutex. The API server histories run at once on separate
// Leases of one API server, or one at a time with BATON_CHAOS_API_RESTARTS=1 (a
// restart hits every Lease).
package chaos
