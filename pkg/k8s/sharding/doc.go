// Package sharding spreads the work of a controller over its replicas: every
// replica leads a share of a fixed set of shards, each shard elected on its own
// coordination.k8s.io/v1 Lease with Baton's elector (its own term, fencing and
// hand-over). There is no extra component: no sharder Deployment, no webhook, no
// CRD, no labels on objects. The replicas' own Leases are the whole state. A shard
// Lease is written only when it changes hands: the liveness of its holder is the
// holder's member Lease (# Renewal), so a quiet ring writes N Leases per RetryPeriod
// whatever its number of shards.
//
// # Ring
//
// A Ring divides the objects into S shards (DefaultShards, 64, unless told
// otherwise; fixed for the life of a ring) by the 64-bit FNV-1a hash of the object's
// UID, each shard a contiguous range of hashes: the function and the ranges of
// Kubernetes' sharded list and watch (KEP-5866), so an API server with the
// ShardedListAndWatch feature can send a replica only its shards' objects
// (Ring.Selector), and a client without it can compute an object's shard itself
// (Ring.ShardOf). Every UID is in exactly one shard.
//
// # Ring shape
//
// A ring's shape is what decides its hash ranges (Ring.Shape: the hash, what it
// hashes, the range rule and S). Every replica of a ring must use the same: shard i's
// Lease is one Lease to all of them, but a different hash range to replicas of another
// S, and both fences pass the writes of each, since each names a Lease its writer
// holds (one replica at S=4 and one at S=8 reconciled 2,549 of 10,000 objects both at
// once, before shapes were recorded). So each replica records its shape on its member
// Lease (ShapeAnnotation; Ring.Shape with "/member-renewal" appended, so that replicas
// of a Baton version that renews every shard Lease count as another shape: #
// Renewal), with its state in the ring (MemberStateAnnotation:
// MemberActive, MemberWaiting, MemberLeaving), and replicas of one shape never lead
// shards while one of another shape does:
//
//   - Admission. A replica joins by writing its member Lease active, and campaigns
//     only once a view of the members that includes that write shows no live member
//     of another shape that is active or leaving. Seeing one, it refuses: it writes
//     its Lease waiting, leads nothing (a shard handed to it is resigned at once), logs
//     at WARN, counts Stats.ShapeRefusals, and reports Refusing (not ready); once no
//     such member is live it writes active again (after a random part of a
//     RetryPeriod, so that two refusing shapes do not collide forever) and checks again.
//     A replica already admitted keeps leading: members of another shape that appear
//     later are left out of its placement and listed by Mismatched.
//   - Why two shapes never lead at once: suppose X and Y of different shapes are both
//     admitted, X's active write first. The member watch delivers whole states in
//     order, so Y's admitting view, which includes Y's later write, includes X's
//     Lease, and it still says active, unless X wrote it since (an admitted replica
//     writes it only leaving, which still blocks Y), deleted it (only after every shard
//     term of X ended: Run deletes its member Lease after its electors stopped) or it
//     expired in Y's view. Y counts it live until LeaseDuration after it last saw it
//     change; X gives up every shard (Elector.Resign) and its admission when its own
//     renews have not succeeded for RenewDeadline < LeaseDuration, measured from when
//     the last good renew was sent (before Y could see it), as the elector bounds a
//     holder's term. Member Leases without a shape (a Baton version before shapes)
//     count as every shape: the check starts once every replica records its shape.
//   - Changing S deliberately: stop every replica of the old S before the first of the
//     new one starts (a Deployment's Recreate strategy, or scale to zero and back). The
//     new replicas start at once when the old ones left gracefully, or wait for a
//     crashed one's member Lease to expire. A rolling update that changes S stalls: the
//     new replicas refuse, and are not ready, while old ones run. A new ring Name does
//     not help during a rolling update: rings of two names do not see each other, and
//     both would lead every object.
//
// # Placement
//
// Place decides which member owns which shard, from the set of live members alone,
// so every replica computes the same answer without talking to the others:
// rendezvous (highest random weight) hashing with a fair-share cap. Shares differ by
// at most one shard (at most ceil(S/N) each). A member that joins or leaves moves its
// own share of shards and, because shares shrink or grow by one, a few more: on
// average 2.1 beyond the minimum over the randomized test's 1000 joins and leaves
// (rings of 16 to 300 shards, up to 17 members), never more than 2·ceil(S/N) beyond
// it (TestPlacementRandomized checks the bound and logs the average).
//
// # Membership
//
// Each replica writes a member Lease of its own ("<ring>-member-<identity>") when it
// joins, renews it every RetryPeriod, marks it leaving when it leaves, and deletes it
// once its shard terms ended. It records this run's incarnation
// (IncarnationAnnotation: Config.Incarnation, or a random name per run), which the
// shard Leases it takes record too. A member Lease's leaseDurationSeconds is bounded as the
// elector bounds a holder's: above leaderelection.MaxLeaseDuration (1h) it is taken as
// 1h, logged at WARN once per record and counted in Stats.OutOfRange, so that a
// leftover or hand-written Lease cannot keep a share of shards without owner for longer. Every replica
// watches the ring's member Leases and counts a member live until LeaseDuration after
// it last saw that member's Lease change, by its own clock, as the elector judges a
// holder: clocks of different nodes need not agree. A replica always counts itself
// while it runs. A Watch call of the member store that has not answered within
// RenewDeadline (a black-holed List) is given up and tried again a RetryPeriod later,
// as the elector does for a shard's Lease, so that it never holds up the renewals of
// the member Lease.
//
// # Renewal
//
// Nobody renews a shard Lease: its holder's terms are carried by the holder's member
// Lease, as Chubby sessions carry Bigtable's tablets (leaderelection.Config.Liveness,
// which this package sets for every shard elector; the single-leader Lease keeps
// client-go's renew semantics). The holder stops acting on a shard RenewDeadline
// after the later of its acquiring write's send and the send of its last member
// renewal that claimed the shard (ShardsAnnotation: each renewal claims the shards
// whose terms it leads when sent) and succeeded while the term was on; a follower
// takes shard k held by H's incarnation I once the shard Lease and I's signs for k on
// H's member Lease (a change while it claimed k for I, before or after the change)
// have been unchanged for LeaseDuration by its own clock, and a fresh list of the
// member Leases (not the watch, which may hang) shows nothing new. A new run of a
// replica (same identity, another incarnation) renews the same member Lease without
// keeping the old run's shards alive. A term that missed its deadline is released,
// and the next renewal no longer claims it; a shard Lease still naming this run after
// its term ended is taken back (placed here) or released. The design, the argument
// that no two owners act at once, restarts, failing member renewals, lagging
// watches, clocks and mixed versions are in docs/design/sharding-renewal.md. Moves are
// as before: a release and a take.
//
// Why member Leases, and not the shard Leases' holders: a replica that just started
// holds no shard, so nobody could see it to give it one. Why not one shared object
// listing the members: every renew of every replica would conflict on it. One Lease
// per replica is written by that replica alone (no conflicts), costs one write per
// RetryPeriod, and expires by itself when the replica dies.
//
// Views may differ for a moment (one replica saw a change before another). That is
// safe: membership and placement only decide who campaigns for a shard; who leads
// it is decided by the shard's Lease alone, and two replicas that both campaign
// get one term between them.
//
// # Shards and their terms
//
// A Sharder runs one replica's part: its member Lease and one elector per shard.
// Every elector follows its shard's Lease (watches it, so it knows when the holder
// stopped renewing or released it), but it campaigns only while placement gives this
// replica the shard: the others follow only (leaderelection.Config.FollowOnly,
// Elector.SetCampaigning) and make no acquiring write, except to take a hand-over
// that names this replica. When placement gives it a shard, its elector takes the
// Lease as soon as what it followed allows: at once for a Lease it saw released,
// absent since its first look, or held by a holder that expired or was proven dead
// meanwhile. Only a genuinely first look (the elector's, or one after a gap in its
// watch) waits as the elector's first-look rules say.
//
// A replica leading a shard that placement gives to another live member hands it
// over with the elector's planned hand-over, SettleDelay after the members or its
// shards last changed: its term ends, the release names the new owner, and the new
// owner's elector takes the Lease on the release's watch event, milliseconds later.
// Rebalancing writes only Leases, two writes per moved shard. The members hand
// shards over in turns, ring-wide, without talking to each other: each sees every
// shard's holder and computes the same placement, so the same pending moves, and
// hands a shard over once the pending moves before it are done (a leaver's first,
// then by shard; up to 16 pending moves, one at a time, more in 16 waves), seen on
// their takes' watch events. A shard is ownerless only from its own release to its
// take, and the API server answers writes sent together each as slowly as their
// number: one move's two writes go out alone. A hand-over that waited a quarter of a
// RetryPeriod (a move withheld, or views that differ) goes without its turn; turns
// decide no owner (TestMovesTakeTurns).
//
// Callbacks.OnAcquired runs for each term of a shard this replica leads, under the
// shard's term context; termctx.Get gives the shard and its term (the
// fencing token of writes for that shard's objects), and the context ends when the
// term does. Callbacks.OnLost runs once after each such term. Owned lists the shards
// led now.
//
// # Hand-over targets
//
// A hand-over names its new owner, and the others give that owner a LeaseDuration to
// take the shard. Two rules keep a hand-over from naming a member that will never
// take it, which would leave the shard without owner for that LeaseDuration:
//
//   - A replica hands a shard only to a member it has seen write its member Lease
//     while it watched. A member seen only on this replica's first look at the
//     members (its Lease as it was then, unwritten since) may have died before this
//     replica started: it then counts live here until a LeaseDuration after that
//     look, later than the others, who saw it renew, count it gone. Such a target is
//     skipped (the shard stays led here, no gap) until the member writes its Lease,
//     which a live member does within a RetryPeriod, or expires. Placement still
//     counts it, so views agree on the placement; only the move waits. A replica
//     that leaves hands the shard to it all the same: the shard cannot stay, the
//     others' placements give it to that member while they count it live (so a
//     plain release would wait for it as long) and pass it over once they count it
//     gone (the second rule), and the release of the leaver's stop would go out
//     with all its others at once (TestYoungLeaverHandsItsShardsOver).
//   - A shard handed to a member this replica's placement does not count (its member
//     Lease says leaving or waiting, was deleted, expired, or it was proven dead) is
//     taken at once by its owner in this replica's placement
//     (leaderelection.Liveness.Gone), instead of a LeaseDuration after the release.
//     A hand-over is decided on a view that may be late: to a member whose death the
//     kubelet reported a moment after, or, when several replicas leave at once, to
//     another leaver whose electors stopped before the release came.
//
// Neither rule touches safety: the first only withholds a move; the second takes a
// Baton release, which its writer wrote after its term ended, and the take is a
// compare-and-swap on that release, which a named member that takes it after all
// wins or loses. Why not hold placement back from a new member instead (until its
// electors have watched for a RetryPeriod): a replica writes its member Lease only
// after every shard elector has seen its Lease (# Joining, leaving and crashing), so
// a hand-over to a new member is taken at once already; what a restarted replica
// got wrong was its view of the dead run, not its own electors.
// TestRestartedReplicaHandsNoShardToDeadMember reproduces a SIGKILL on a real node
// (before these rules, 2 of 30 shards waited a LeaseDuration there as on the node),
// TestScaleDownTakesEveryShardAtOnce a scale from 5 replicas to 2 (before, a shard
// handed to another leaver waited a LeaseDuration).
//
// # Shard work
//
// Workers runs leader-only work per shard: its RunShard, as Callbacks.OnAcquired,
// starts every Work for each shard term on a goroutine of its own, with the term's
// context, and returns once every Work returned (after the term ended, unless they
// all returned nil before), so the shard is handed over only after its work stopped. A Work that fails (an error or a panic)
// is logged, counted and run again after a delay while its term lasts; it stops
// nothing else. The state a shard's new owner needs at once comes from a
// leadership.ShardedReplayer (pkg/controller/leadership) that every replica fills
// with every shard's state before it joins the ring.
//
// # Joining, leaving and crashing
//
// A replica starting (Run) reads the members, starts its electors and waits until
// each has seen its Lease, and only then writes its member Lease, so the others
// never hand it a shard it is not yet watching; it campaigns once it is admitted (#
// Ring shape). When Run's context ends it leaves: it stops campaigning, marks its
// member Lease leaving (the others stop placing shards on it), hands each shard it
// leads to its owner in the placement without it, stops (releasing any shard still
// held), and then deletes its member Lease.
// Its shard work keeps its term until that shard is handed over.
//
// A replica that crashes stops renewing its member Lease: its shard terms end by
// their RenewDeadline, the others see its member Lease go quiet, LeaseDuration after
// its last renew they place its shards on themselves, read the member Leases afresh
// once, and take them (TestSharderFaults: all of them one LeaseDuration after the
// crash).
//
// With the death signal (Config.Incarnation and Config.DeathWatch; see
// pkg/k8s/incarnation), every shard elector records this run's incarnation in the
// Leases it takes and follows the death of its shard's holder; the electors of a
// replica share one watch per holder's incarnation. When the kubelet reports a
// holder's container terminated, each replica counts that member gone at once (until
// its member Lease is written again, by a new run), places its shards on the others,
// and their electors take them at once (TestSharderDeathSignal: milliseconds after
// the report, not a LeaseDuration after the crash).
//
// # Safety
//
// No shard has two leaders at once: that is the elector's guarantee for each shard
// Lease, with its clock-rate tolerance and fencing terms (see leaderelection), with
// the holder's liveness taken from its member Lease (# Renewal; the member signs are
// the one rule of this package that safety depends on, argued in
// docs/design/sharding-renewal.md). Placement and membership decide only who
// campaigns, and a wrong or stale view costs time, never a second leader.
//
// The elector's limits hold per shard too. A shard Lease deleted by hand while its
// holder is cut off may be created again at once by a replica that just started and
// never saw it (the elector's cold-start window): two owners until the old holder's
// RenewDeadline has passed, the new one under the higher term, so that writes fenced
// by the shard term refuse the old owner's once the new one wrote. Do not delete the
// Leases of a running ring by hand. (test/chaos/sharded finds the window in 4 of 2000
// histories, for at most 1.07s.)
//
// # Concurrency properties
//
// Run's goroutine keeps the view of the members, tells the electors which shards they
// may campaign for, and starts hand-overs; each shard's elector runs in a goroutine
// of its own, and each hand-over too. OnAcquired runs on
// the shard elector's leader goroutine, OnLost on its election goroutine. Run waits
// for all of them before it returns. Owned, Assigned and Members are safe to call
// from any goroutine. No lock is held while calling a callback or a store.
//
// Replicas that start at the same moment each see only themselves at first, so each
// campaigns for every shard; the shard Leases give each shard one owner, and the
// hand-overs balance them once the replicas see each other.
//
// # Testing
//
// NewMemoryStores gives the Leases of a ring in memory, for the replicas of one
// process; everything runs in testing/synctest bubbles, where the timing runs on the
// fake clock. Package shardingtest records the shard terms of a ring's replicas and
// checks them (never two owners, balanced shares, time without owner), and cuts a
// replica off from its stores to simulate a crash.
package sharding
