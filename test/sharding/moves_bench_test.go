package sharding

// BenchmarkShardMoves measures what moving shards costs a sharded controller on the
// real API server:
//
//	export KUBEBUILDER_ASSETS=$(hack/testenv.sh | tail -n 1)
//	go test -run '^$' -bench BenchmarkShardMoves -benchtime 1x ./test/sharding/
//
// A controller of 64 shards over 640 ConfigMaps (AddShardedController, a reconcile
// reading the object from the cache and standing for 1ms of I/O) runs on four
// replicas; then a fifth joins, leaves gracefully, the four are replaced one by one
// by new replicas (a rolling restart: graceful stop, then start), and one crashes
// (cut off from the API server, releasing nothing). A watch in the benchmark's
// process records every write of the ring's Leases (each new resourceVersion of a
// shard or member Lease is one write) and of the ConfigMaps. It reports:
//
//   - join and leave: the Lease writes that rebalanced (shard Lease releases and
//     takes, member Lease create or delete; renewals apart), per moved shard, the
//     object writes (0 by design), and beside them the two patches per moved object
//     that timebertt/kubernetes-controller-sharding needs at least (a label change
//     through its sharder, and the drain label before it);
//   - join: from the new replica's member Lease (written once its cache is synced
//     and its electors watch their Leases) to every shard held by one of the five
//     within ceil(64/5), by the Lease watch;
//   - leave and rolling restart: per moved shard, the time from its release to its
//     takeover as the Lease watch saw them (p50, p99, max): the time the shard's
//     Lease had no holder. (The old owner's term ended a little before its release
//     was written, once its running reconciles returned.)
//   - crash: from the cut to the last of the crashed replica's shards taken by
//     another, beside the lease duration.
//
// BATON_BENCH_TIMINGS=15s,10s,2s sets LeaseDuration, RenewDeadline and RetryPeriod
// (the default, controller-runtime's). Moves do not wait on them (SettleDelay, 200ms,
// and the watch do); a crash does.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

func BenchmarkShardMoves(b *testing.B) {
	lease, renew, retry := benchTimings(b)
	for range b.N {
		shardMoves(b, lease, renew, retry)
	}
}

func shardMoves(b *testing.B, lease, renew, retry time.Duration) {
	const (
		shards  = 64
		objects = 640
		quiet   = time.Second // after balanced, for late writes to show up in a window
	)
	c := fleetConfig{
		name: "moves", namespace: "moves", shards: shards,
		lease: lease, renew: renew, retry: retry, work: time.Millisecond, workers: 4,
	}
	b.StopTimer()
	env := batontest.StartEnv(b)
	direct, err := client.New(env.Config(), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	createConfigMapsIn(b, direct, c.namespace, objects)
	ring, err := sharding.NewRing(shards)
	if err != nil {
		b.Fatal(err)
	}
	var list corev1.ConfigMapList
	if err := direct.List(context.Background(), &list, client.InNamespace(c.namespace)); err != nil {
		b.Fatal(err)
	}
	perShard := map[int]int{}
	for _, cm := range list.Items {
		perShard[ring.ShardOf(string(cm.UID))]++
	}
	movedObjects := func(moved map[int]bool) int {
		n := 0
		for s := range moved {
			n += perShard[s]
		}
		return n
	}
	leases, stopLeases := watchRing(b, env.Clientset(), "default", c.name)
	defer stopLeases()
	stopObjects := leases.watchObjects(b, env.Clientset(), c.namespace)
	defer stopObjects()
	log := &reconcileLog{ring: ring}
	var live []*ctrlReplica
	defer func() {
		for _, r := range live {
			r.stop(b)
		}
	}()
	start := func(id string) *ctrlReplica {
		r := startCtrlReplica(b, env, c, id, log)
		live = append(live, r)
		return r
	}
	ids := func() []string {
		var out []string
		for _, r := range live {
			out = append(out, r.id)
		}
		return out
	}
	report := func(value float64, unit, format string, args ...any) {
		b.ReportMetric(value, unit)
		b.Logf("shardmoves: "+format, args...)
	}
	b.StartTimer()

	for i := range 4 {
		start(fmt.Sprint("r", i))
	}
	waitBalancedReplicas(b, live, shards, "start of r0..r3", 60*time.Second)

	// A join.
	joinStart := time.Now()
	joiner := start("r4")
	waitBalancedReplicas(b, live, shards, "join of r4", 30*time.Second)
	time.Sleep(quiet)
	joinEnd := time.Now()
	writes, objectWrites := leases.snapshot()
	member := time.Time{}
	for _, w := range writes {
		if w.kind == memberJoin && w.holder == "r4" {
			member = w.at
			break
		}
	}
	if member.IsZero() {
		b.Fatal("r4's member Lease was never seen")
	}
	balanced, ok := balancedAt(writes, member, shards, ids())
	if !ok {
		b.Fatal("the Lease watch never saw the shards balanced over five replicas")
	}
	join := count(writes, objectWrites, joinStart, joinEnd)
	joinGaps, _ := handovers(writes, joinStart, joinEnd)
	report(ms(balanced.Sub(member)), "join-balanced-ms", "join: balanced %v after r4's member Lease was written (%v after its start, which synced its cache first)",
		balanced.Sub(member).Round(time.Millisecond), balanced.Sub(joinStart).Round(time.Millisecond))
	moves(b, report, "join", join, movedObjects(join.movedShards))
	report(ms(pct(joinGaps, 99)), "join-handover-p99-ms", "join: %s", gapLine(joinGaps))

	// A graceful leave.
	leaveStart := time.Now()
	joiner.stop(b)
	stopped := time.Since(leaveStart)
	live = slices.DeleteFunc(live, func(r *ctrlReplica) bool { return r == joiner })
	waitBalancedReplicas(b, live, shards, "graceful leave of r4", 30*time.Second)
	time.Sleep(quiet)
	leaveEnd := time.Now()
	writes, objectWrites = leases.snapshot()
	leave := count(writes, objectWrites, leaveStart, leaveEnd)
	leaveGaps, leaveUnreleased := handovers(writes, leaveStart, leaveEnd)
	moves(b, report, "leave", leave, movedObjects(leave.movedShards))
	b.Logf("shardmoves: leave: r4 stopped (handed over its shards and left) in %v", stopped.Round(time.Millisecond))
	report(ms(pct(leaveGaps, 50)), "leave-handover-p50-ms", "leave: %s", gapLine(leaveGaps))
	b.ReportMetric(ms(pct(leaveGaps, 99)), "leave-handover-p99-ms")
	b.ReportMetric(ms(pct(leaveGaps, 100)), "leave-ownerless-max-ms")
	if leaveUnreleased > 0 {
		b.Errorf("leave: %d shards taken without a release", leaveUnreleased)
	}

	// A rolling restart of all four.
	rollStart := time.Now()
	for i := range 4 {
		old := live[0]
		old.stop(b)
		live = live[1:]
		start(fmt.Sprint("s", i))
		waitBalancedReplicas(b, live, shards, fmt.Sprintf("%s replaced by s%d", old.id, i), 30*time.Second)
	}
	time.Sleep(quiet)
	rollEnd := time.Now()
	writes, objectWrites = leases.snapshot()
	roll := count(writes, objectWrites, rollStart, rollEnd)
	rollGaps, rollUnreleased := handovers(writes, rollStart, rollEnd)
	report(ms(pct(rollGaps, 50)), "rolling-handover-p50-ms", "rolling restart of 4: %s; %d Lease writes for the moves, %d object writes, in %v",
		gapLine(rollGaps), roll.shardMoves+roll.memberMoves, roll.objects, rollEnd.Sub(rollStart).Round(time.Millisecond))
	b.ReportMetric(ms(pct(rollGaps, 99)), "rolling-handover-p99-ms")
	b.ReportMetric(ms(pct(rollGaps, 100)), "rolling-ownerless-max-ms")
	if rollUnreleased > 0 {
		b.Errorf("rolling restart: %d shards taken without a release", rollUnreleased)
	}
	if roll.objects > 0 {
		b.Errorf("rolling restart: %d object writes, want 0", roll.objects)
	}

	// A crash: cut off from the API server, releasing nothing.
	crashed := live[0]
	held := holders(writes, time.Now())
	var shardsOf []int
	for shard, h := range held {
		if h == crashed.id {
			shardsOf = append(shardsOf, shard)
		}
	}
	crashAt := time.Now()
	crashed.sw.Cut()
	live = live[1:]
	waitBalancedReplicas(b, live, shards, "crash of "+crashed.id, 3*lease+30*time.Second)
	time.Sleep(quiet)
	writes, _ = leases.snapshot()
	var recovered time.Duration
	for _, shard := range shardsOf {
		taken := time.Time{}
		for _, w := range writes {
			if w.shard == shard && w.kind == shardTake && w.at.After(crashAt) && w.holder != crashed.id {
				taken = w.at
				break
			}
		}
		if taken.IsZero() {
			b.Fatalf("crash: shard %d of %s never taken", shard, crashed.id)
		}
		recovered = max(recovered, taken.Sub(crashAt))
	}
	report(ms(recovered), "crash-owned-again-ms", "crash of %s (%d shards, no release): all owned again %v after the cut; lease duration %v",
		crashed.id, len(shardsOf), recovered.Round(time.Millisecond), lease)
	crashed.stop(b)

	for _, r := range live {
		r.stop(b)
	}
	n := log.check(b)
	b.Logf("shardmoves: %d reconciles by %v, none of one shard by two replicas at once; machine load: %s", n, log.replicasOf(), loadavg())
	b.ReportMetric(0, "ns/op")
}

// moves reports the writes of a rebalance.
func moves(b *testing.B, report func(float64, string, string, ...any), phase string, c windowCounts, objects int) {
	if c.taken == 0 {
		b.Errorf("%s: no shard moved", phase)
		return
	}
	writes := c.shardMoves + c.memberMoves
	report(float64(writes)/float64(c.taken), phase+"-lease-writes/moved-shard",
		"%s: %d shards moved (%d objects): %d Lease writes (%d of shard Leases, %d of member Leases), %.2f per moved shard, %d object writes; the anchor: at least %d patches (2 per moved object); renewals meanwhile: %d of shard Leases, %d of member Leases",
		phase, c.taken, objects, writes, c.shardMoves, c.memberMoves, float64(writes)/float64(c.taken), c.objects, 2*objects, c.shardRenews, c.memberRenew)
	b.ReportMetric(float64(c.objects), phase+"-object-writes")
	b.ReportMetric(float64(2*objects), phase+"-anchor-patches")
	if c.objects > 0 {
		b.Errorf("%s: %d object writes, want 0", phase, c.objects)
	}
}

// gapLine describes handover times.
func gapLine(gaps []time.Duration) string {
	if len(gaps) == 0 {
		return "no shard handed over"
	}
	return fmt.Sprintf("%d handovers, release to takeover p50 %v, p99 %v, max %v (no holder that long)",
		len(gaps), pct(gaps, 50).Round(100*time.Microsecond), pct(gaps, 99).Round(100*time.Microsecond), pct(gaps, 100).Round(100*time.Microsecond))
}

// pct returns the p-th percentile of sorted (nearest rank), 0 for none.
func pct(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(0, min(len(sorted)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// loadavg returns the machine's load averages, or "unknown".
func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// benchTimings returns BATON_BENCH_TIMINGS (lease,renew,retry), default 15s,10s,2s.
func benchTimings(b *testing.B) (lease, renew, retry time.Duration) {
	v := os.Getenv("BATON_BENCH_TIMINGS")
	if v == "" {
		return 15 * time.Second, 10 * time.Second, 2 * time.Second
	}
	parts := strings.Split(v, ",")
	if len(parts) != 3 {
		b.Fatalf("BATON_BENCH_TIMINGS=%q: want lease,renew,retry durations", v)
	}
	var ds [3]time.Duration
	for i, p := range parts {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil || d <= 0 {
			b.Fatalf("BATON_BENCH_TIMINGS=%q: %q is not a positive duration", v, p)
		}
		ds[i] = d
	}
	return ds[0], ds[1], ds[2]
}
