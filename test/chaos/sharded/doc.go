// Package sharded is the sharded mode of the randomized fault suite (test/chaos): it
// tests pkg/k8s/sharding the way test/chaos tests the elector, with seeded random fault
// schedules over the replicas of a ring, every history recorded, and a checker over
// every history. It has no code outside its tests.
//
// # Running
//
// hack/test.sh runs it with everything else: TestShardedChaos runs 11 fixed seeds, each
// a history in a testing/synctest bubble (about a minute of fake time; a few seconds
// of wall time for all of them), and TestCheckerFindsViolations and
// TestCheckerFindsObjectViolations show that the checker fails each broken property.
// Alone, and as a soak:
//
//	go test -race -run 'TestShardedChaos$' -v ./test/chaos/sharded
//	BATON_SHARDED_CHAOS_SEEDS=1000 go test -race -run 'TestShardedChaos$' -v ./test/chaos/sharded
//	BATON_SHARDED_CHAOS_FIRST=5001 BATON_SHARDED_CHAOS_SEEDS=1000 ...                  # other seeds
//	BATON_SEED=6 go test -race -run 'TestShardedChaos$' -v ./test/chaos/sharded       # one seed
//
// TestShardedChaosShapes runs the shape of issue 25's defect 3, replicas of one ring
// with different numbers of shards (S=12 and S=8 sharing the ring's Leases): 9 fixed
// seeds, each 2 replicas at S=12 and then 30s of joins of either shape, leaves,
// crashes, pauses, cuts and lagging watches; it fails a history in which one of
// 2,000 objects was owned by two replicas at once, or in which, after the faults,
// the replicas leading shards are not of one shape leading all its shards. As a
// soak: BATON_SHARDED_SHAPES_SEEDS=N (BATON_SHARDED_CHAOS_FIRST moves the first).
//
// A 2000-seed soak of it at the code of issue 27's last stops failed one history,
// seed 867 (88 objects owned twice): a leaving S=12 replica, cut off while it marked
// its member Lease leaving, took two shards released naming it after its renew
// deadline had passed, beside an admitted S=8 replica, because only Run's loop ended
// the admission, and it no longer ran (docs/design/sharding.md, # Ring shape). A
// bisection of the seed puts its first failing commit at the one-write hand-overs
// (earlier code ran another history for it). With the admission lapsing by time
// (Sharder.mayLeadLocked), seeds 1 to 2000 pass (102,244 shard terms, 5,249
// refusals to campaign; about 5 minutes under -race on 2 shared cores), and 867 is
// in the fixed list.
//
// BATON_SHARDED_CHAOS_LOG=1 writes every replica's log (Debug) to stderr. With -v the
// test logs a summary: histories, shard terms, fenced writes (refused, and accepted
// after their term ended), faults by kind, overlaps in the elector's cold-start
// window, the slowest settling after the faults stopped, and violations by kind with
// their seeds. A failing history prints its violations, its schedule and the command
// that replays it. A history replays exactly: a seed fixes the schedule of faults
// (kinds, instants, targets), the electors' retry jitter (sharding.Config.JitterSource),
// the shard work's writes, and the latency (below 1ms each way) of every store call,
// watch delivery and fenced write of every replica, from a stream per replica, store
// and operation (one per watch for its deliveries), drawn when a call starts (before a
// pause holds it) and again for a delivery a resume releases. So no two replicas, and no two shard
// electors of one replica, act at one instant of fake time, where the order of
// goroutines would decide: without the latencies the three replicas that start
// together race for the shard Leases at the first instant, and later two replicas or
// two hand-overs act at one instant, and no seed replayed. TestShardedChaosReplay runs
// seeds 1, 2 and 6 twice each and fails unless both runs give equal fingerprints (the
// schedule, every shard term and fenced write to the nanosecond, each replica's
// hand-over counters); the logs must be equal too with BATON_SHARDED_REPLAY_STRICT=1
// (in CI a difference of the logs alone is logged: two goroutines of one replica at
// one instant may log a cancelled read's error either way, or a closing watch at
// shutdown, without changing any outcome; seeds 1, 19, 25 and 40 showed such
// differences under load). BATON_SHARDED_REPLAY_SEEDS=N runs seeds 1 to N
// (BATON_SHARDED_CHAOS_FIRST moves the first) so, as a soak.
//
// # A history
//
// A ring of 12 shards on in-memory stores (sharding.NewMemoryStores) at
// LeaseDuration 3s, RenewDeadline 2s, RetryPeriod 500ms. Replicas r0 to r2 start
// together; from 5s to 35s come 8 to 15 faults at seeded instants; then none. Each
// replica reaches the stores through a node of its own, which gives every call, reply
// and watch delivery its seeded latency and injects the replica's faults:
//
//   - joins (a new replica, up to 5 live), graceful leaves (Run's context ends; the
//     others act meanwhile) and crashes (cut off for good, at least 2 live stay).
//     Half of the crashes (drawn from a source of their own, so that the other
//     faults of a seed stay as they were) are deaths: the process dies (its shard
//     work ends at once) and the kubelet reports it 0 to 1s later, for the death
//     signal (sharding.Config.Incarnation and DeathWatch, every replica's on);
//   - pauses (0.75 to 6.75s): the node's store calls, their replies, its watch
//     deliveries and its register writes are held until it resumes; timers keep
//     running, so its terms end on time by its clock, and a write whose term was
//     checked before the pause reaches the register after it;
//   - cuts from the store (0.75 to 6.75s): calls fail at once, or hang until their
//     context ends (a black-holed API server); a reply of a call under way is lost
//     (the write may have been applied); watches close and new ones fail;
//   - lagging watches (1.5 to 7.5s): every shard and member event reaches the node 20ms
//     to 1s late;
//   - 1 to 3 shard Leases deleted by hand, and a replica's member Lease deleted by hand;
//   - faults of the member Lease that carries the shard terms (docs/design/
//     sharding-renewal.md), drawn from a source of their own: one of r0 to r2 cannot
//     renew its member Lease for 0.75 to 6.75s while its shard Leases' calls go
//     through, and one of them restarts with the same identity (its process dies, a
//     new run with another incarnation starts 0 to 1s later, half of the time with
//     the kubelet's report of the old run), each only on a replica still in its
//     first run.
//
// Every owner of a shard writes the shard's 2 objects to a fenced register every half
// to one and a half RetryPeriod, each write stamped with its shard term and sent after
// checking its term context, as a fenced client does; the register accepts a write
// whose stamp is at least the highest it accepted for the object.
//
// # Owned objects and shard labels
//
// Each history also carries the objects of a sharded controller with
// CacheOwnShardsByLabel over the ring (pkg/integration/controllerruntime), For
// "Owner", Owns "Child", on a model of the API server that one goroutine steps (the
// objects' faults, and every replica run's controller every 100ms, at seeded offsets
// below netLatency, so that no step falls on an instant at which a term begins or
// ends, and a seed replays). What is the library's own: the ring's ShardOf (an
// owner's shard from its UID, a child's from its controller owner's UID),
// metav1.GetControllerOf (which of a child's references decides), ShardLabelKey (the
// label of a ring shape, and of a stale one, Shards 8) and the shard terms of the real
// sharder, from OnAcquired's term context to its end. The rules that tie them
// together are methods of the library's controller-runtime controller, bound to its
// informers, queue and client, not callable from here, and are modelled after
// labelcache.go, shardcache.go, shardowner.go and sharded.go (which
// TestShardedLabelCacheRandomized runs against the real API server instead):
//
//   - the labeller, on every replica, writes the shard label of an object without it
//     (the label set, the ring's other shapes' labels removed, as patchLabel's patch)
//     when the object's shard is led here: on first sight, again when the object
//     changes and at every resync (3s, the library's 30s scaled as the ring's timings
//     are), and for the backlog of a shard just acquired. A patch is not fenced: it
//     fails while the replica is cut off, is held while it is paused, and lands
//     whenever it lands (the value depends on the UID alone);
//   - each led shard's informer delivers the objects labelled with the shard (every one
//     at the term's start, then what changed, and those gone or relabelled away as
//     deletes); an object whose label names another shard than its own (a stray) is
//     relabelled and not enqueued (and relabelled again at the informer's resync, the
//     labeller's period, should that patch have failed); an owner enqueues itself, a
//     child its controller owner when that owner's shard is led here;
//   - a request is reconciled at the controller's next step, admitted only under a
//     live term of its owner's shard here (the library's begin), else dropped.
//
// Six owners with 0 to 2 children and one child that no shard caches start the
// history; from 5s to 35s come 16 to 31 faults of the objects, drawn from a source of
// their own (so that the ring's schedule of a seed stays as it was): owners created
// with children (a child may also carry a reference, not the controller's, to another
// owner), a child created 0.2 to 2s before its owner (its events name an owner not
// yet seen), owners deleted with their children left (their references name a UID
// gone), children deleted or updated, children no shard caches (only a reference that
// is not the controller's, or a controller of another kind), a label removed by hand,
// set to another shard, or replaced by the label of the stale shape, and, for 0.75 to
// 6.75s, one replica's label writes refused, or their replies lost (applied, the
// replica told they failed), or slow (each lands 0.2 to 2s after it was sent, while
// the shards move), each window with two new owners whose labels may be due meanwhile.
//
// # Checker
//
// A shard term is recorded from OnAcquired to the end of its context: in a bubble both
// instants are exact, so terms of different replicas are compared on one clock, and a
// term that ends at the instant another starts does not overlap it. A history fails
// for:
//
//   - two owners of a shard at once: two of its terms overlap. One case is counted
//     and reported instead, the elector's documented cold-start window: the higher
//     of the two terms was acquired by a create sent before its elector had seen the
//     Lease (a replica that just started, finding a Lease deleted by hand while its
//     holder was cut off); fencing covers it, as the register's check shows;
//   - shard terms not rising: each term of a shard is above every term of the shard
//     that began before it (terms are the fencing tokens);
//   - the fenced register, checked per object with porcupine against a model in
//     which a write is accepted exactly when its stamp is above every stamp accepted
//     before, or equal to it from the same writer (one term, one writer): a write of
//     an ended term accepted after a newer term wrote, or two replicas with one term,
//     fail it. A write accepted after its term ended but before a newer term wrote (a
//     paused owner's) is counted, not failed: fencing makes it harmless;
//   - at the bound after the faults stopped (2·LeaseDuration + 2·RetryPeriod, 7s:
//     a LeaseDuration for the Leases of a crashed or cut-off owner to expire;
//     another for a shard whose Lease was deleted by hand or whose elector's watch
//     broke meanwhile, which the elector then waits out as an unknown holder; the
//     backoff of a broken watch and the settle delay of the hand-overs after it): a
//     shard without exactly one owner among the live replicas, or shares more than
//     one shard apart;
//   - in the LeaseDuration after the bound: a shard that moved (a term began or
//     ended), or a write of a settled owner refused.
//
// and, for the objects:
//
//   - a reconcile not under a term of its owner's shard on its replica: the term
//     recorded by the shard work (the span), not the controller's own record, at the
//     reconcile's instant;
//   - a child's event that enqueued its owner on a replica that did not hold a term of
//     the owner's shard then, or whose controller owner is in another shard (the
//     checker's shard of a child is written apart from the model's: the reference
//     with Controller true, when it is an Owner);
//   - at the bound: an object not labelled with its shard (a child with its controller
//     owner's, whether that owner exists or not), or a child no shard caches carrying
//     the label; an object not in the cache of exactly the replica owning its shard
//     then (of no replica, for a child no shard caches);
//   - after the faults stopped, a second label write that changed an object (one may
//     still be due: a write refused or failed before, tried again at the resync or at
//     the shard's acquisition), or any after the bound: moves write no object.
//
// # Findings
//
// Seed 6 found a defect of pkg/k8s/sharding: a member Watch call that hung (cut off,
// calls hanging) held up the sharder's loop for good, and with it the renewals of its
// member Lease; the others dropped the replica while it kept its shards, and the shares
// stayed 4, 3, 3, 2. The sharder now gives such a call up after RenewDeadline, as the
// elector does (sharding.TestSharderMemberWatchHangs); seed 6 stays in the fixed list.
//
// With that fix, seeds 1 to 2000 show no violation (117,505 shard terms, 1,973,767
// fenced writes, 2,172 refused, 3,198 accepted after their term ended before a newer
// term wrote; 22,775 faults; 8 to 13 minutes per 1000 on 2 shared cores). The slowest
// to settle took 5.5s after the faults stopped (seed 1933), within the 7s bound. Four
// histories (seeds 1071, 1844, 1943, and one of seeds 1 to 1000) overlapped two
// owners of a shard, for at most 1.07s, in the elector's cold-start window: a replica
// that had just started created a shard Lease deleted by hand while its holder was cut
// off, under a higher term, so fencing refused the old holder's writes once the new
// one wrote. A sharder cannot close that window by waiting for its electors to be
// warm: an elector whose first look finds the Lease absent has still never seen it.
// Seed 1071 is in the fixed list, so that CI sees the checker tell the window apart.
//
// Those figures are from before the shard electors followed only (instead of having
// their acquiring writes refused) and before the death signal. The summary also
// counts the shards of replicas the kubelet reported dead, how many were owned again
// within 10ms of the report, and the longest (a shard whose Lease was deleted by
// hand meanwhile, or whose new owner was paused, takes longer).
//
// The seeded latencies changed the path of every seed. With them, seeds 1 to 500
// show no violation (30,103 shard terms, 498,787 fenced writes, 596 refused, 706
// accepted late; 3.2 minutes under -race on 2 shared cores); none of them overlapped
// in the cold-start window, seed 1071 still does (0.75s). Seeds 1 to 150 (under
// -race), 1001 to 1100 and 1071 replayed exactly, fingerprints and logs.
//
// With the shard terms carried by the member Lease (docs/design/sharding-renewal.md)
// and its faults added (member renewals failing, restarts with the same identity),
// the soaks found three defects of that design before it landed: seed 5 gave two
// owners of a shard (a fresh read of a member was compared with a sign newer than the
// one its elector had judged by), and seeds 145, 166, 184 and 5211 left a shard
// without owner after the bound (a shard Lease deleted, or its term ended, under a
// live holder whose member renewals then kept it from everyone). Seeds 5, 145 and
// 5211 are in the fixed list. With the fixes, seeds 1 to 300 and 5001 to 5300 show
// no violation (39,051 shard terms, 582,332 fenced writes, 644 refused, 859 accepted
// late; 351 member-renewal failures and 404 restarts applied; about 2 minutes per 300
// under -race on 2 shared cores); one history (seed 182) overlapped in the elector's
// cold-start window (1.22s), and the slowest settled 5.5s after the faults stopped.
//
// With the owned objects and shard labels added (# Owned objects and shard labels),
// seeds 1 to 2000 show no violation of the ring's properties (130,991 shard terms,
// 1,938,387 fenced writes, 2,179 refused, 3,032 accepted late; 5 overlaps in the
// cold-start window, the longest 1.22s; the slowest settled 5.6s after the faults
// stopped, seed 1933), with 45,048 owners, 50,880 children, 178,831 reconciles (10,513
// requests dropped, their term ended), 100,243 label writes (12,755 refused, 2,791
// failed, 7,458 replies lost, 4,287 landing after the term that sent them ended) and
// 3,686 strays relabelled; 27 minutes under -race on 2 shared cores. 54 histories
// fail the objects' properties at the bound (seeds 38, 77, 111, 150, 212, 268, ...):
// an object labelled with another shard by hand whose relabel patch failed (refused,
// or its replica cut off) stayed labelled so, cached by the owner of the wrong shard
// and not by its own shard's owner. That was the library's behaviour, as modelled: a
// stray label was relabelled only from a led shard's informer event (relabelStray),
// and the shard informers had no resync (runShardStore, resync 0), so a failed patch
// was tried again only when the object changed or the stray's shard moved, not "at
// the next resync" as patchLabel's comment says (only the informers of unlabelled
// objects resynced). The library's shard informers of labelled kinds now resync (labelResync)
// and a resync relabels a stray again, enqueueing nothing
// (TestShardedLabelCacheStrayRelabelRetried, which failed before); the model's do
// likewise, all 54 histories pass, and seeds 38 and 150 are in the fixed list. With
// that, seeds 2001 to 2500 show no violation (32,715 shard terms, 484,209 fenced
// writes; 11,177 owners, 12,605 children, 44,579 reconciles, 24,970 label writes,
// 3,077 refused, 1,178 landing after their term, 1,051 strays relabelled; 7.4
// minutes under -race on 2 shared cores).
//
// With one-write hand-overs (docs/design/sharding-renewal.md, # One-write
// hand-overs; the summary counts the terms begun on one), seeds 1 to 2000 show no
// violation (127,890 shard terms, 55,740 of them on a hand-off, 1,959,227 fenced
// writes, 2,224 refused, 3,061 accepted late; 2,092 lagging watches, 2,244 graceful
// leaves and 5,141 joins among the faults; 4 overlaps in the cold-start window, the
// longest 1.22s; the slowest settled 6.6s after the faults stopped, seed 844; 10
// minutes under -race on 2 shared cores).
//
// At the code of issue 27's last stops (the others' crashed member Leases deleted,
// every counted member's death followed, turns that skip the moves a holder
// withholds), seeds 1 to 2000 show no violation (122,492 shard terms, 50,792 of them
// on a hand-off, 1,964,580 fenced writes, 2,205 refused, 3,080 accepted late; 5,141
// joins, 2,244 leaves, 1,133 crashes, 1,139 deaths reported, 2,092 lagging watches;
// 45,048 owners, 50,817 children, 168,969 reconciles; 4 overlaps in the cold-start
// window, the longest 1.22s; the slowest settled 6.86s after the faults stopped,
// seed 1333, within the 7s bound; 3,419 of 3,807 shards of replicas reported dead
// owned again within 10ms of the report; 523s under -race on 2 shared cores). With
// the admission lapsing by time (the shapes seed 867 above), again no violation:
// 122,494 shard terms, 50,797 on a hand-off, 1,964,573 fenced writes, the same 4
// cold-start overlaps and slowest settle (529s).
package sharded
