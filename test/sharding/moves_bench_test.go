package sharding

// BenchmarkShardMoves measures what moving shards costs on the real API server:
//
//	export KUBEBUILDER_ASSETS=$(hack/testenv.sh | tail -n 1)
//	go test -v -run '^$' -bench BenchmarkShardMoves -benchtime 1x ./test/sharding/
//
// A ring of 64 shards, 640 ConfigMaps, runs on four replicas; then a fifth joins and
// leaves gracefully, the four are replaced one by one by new replicas (a rolling
// restart: graceful stop, then start), and one crashes (its Lease client cut off
// from the API server: it stops renewing and releases nothing). Twice, each on an
// API server of its own:
//
//   - controller: each replica a manager running AddShardedController, whose
//     reconcile reads the ConfigMap from the cache and stands for 1ms of I/O;
//   - sharder: each replica a bare Sharder.
//
// Handovers are timed by the terms of both sides: from the old term's context's end
// to the new term's start (the Sharder's OnAcquired; the controller's ShardWork,
// started with its term), which is how long the shard had no owner. The
// controller's old owner hands over only once its running reconciles returned, so
// that time is in it. Logged beside, for both: from the send of the old owner's
// write (by the renewTime its writer stamped on it; every replica runs in this
// process, on one clock) to its arrival on the benchmark's Lease watch (a one-write
// hand-over's, or the take that followed a release).
//
// A watch in the benchmark's process records every write of the ring's Leases (each
// new resourceVersion of a shard or member Lease is one write) and of the
// ConfigMaps. It reports, with b.ReportMetric and one log line ("shardmoves: ...")
// per figure:
//
//   - join and leave: the Lease writes that rebalanced (hand-offs, releases and takes
//     of shard Leases, the member Lease's create or delete; renewals counted apart),
//     per moved shard, and the object writes (0: nothing is labelled), beside the
//     two patches per moved object that the anchor,
//     timebertt/kubernetes-controller-sharding, needs at least;
//   - join: from the new replica's member Lease (written once its cache is synced
//     and its electors watch their Leases) to every shard held by one of the five,
//     none more than ceil(64/5), by the Lease watch;
//   - join, leave and rolling restart: handover times, p50, p99 and max (the
//     longest a shard had no owner);
//   - crash: from the cut, and from the last renew of each shard seen, to the last
//     of the crashed replica's shards taken by another, beside the lease duration;
//   - a reference: one Lease update's round trip on the machine at that moment;
//   - rolling restart: the Lease updates the API server served, and how many took
//     over 5ms inside it and in etcd, by its own /metrics (when the tail is the
//     machine's, it shows there), and the parts of its one-write hand-overs: the old
//     owner's (term end to the write's send), the API server's (send to arrival on
//     the watch) and the new owner's (arrival to its term), p50 and p99 each.
//
// BATON_TESTENV_AUDIT=<file> (pkg/batontest) adds the API server's audit log: its
// own time for each request, and what else it served meanwhile.
//
// BATON_BENCH_ROLLS=n runs the rolling restart n times and reports the hand-overs of
// all n pooled too (one roll's p99 is its second slowest hand-over).
//
// BATON_BENCH_TIMINGS=15s,10s,2s sets LeaseDuration, RenewDeadline and RetryPeriod
// (the default, controller-runtime's). Moves do not wait on them (the Sharder's
// SettleDelay, 200ms, and the watches do); a crash does.
//
// # Reading the rolling restart's tail on a small machine
//
// On 2 vCPUs shared by the API server, etcd and this process's five managers, the
// controller kind's pooled p99 (BATON_BENCH_ROLLS=4) is the machine's as much as
// Baton's: 20 runs of one commit gave 12.8 to 21.1ms (median 15.9), bare Sharders
// 8.9 and 12.9ms beside them, and most of a slow hand-over is the API server's part
// (its write's send to its arrival on the watch). During the rolls the API server
// used about a fifth of one core, but in bursts: a scheduler trace (perf sched) of
// 12s of rolls showed the API server's, etcd's and this process's threads waiting
// over 3ms to run 25, 17 and 17 times, up to 9.3ms, while a thread of the API
// server ran 10ms at a stretch. Each of these was tried in interleaved runs against
// the same commit and changed nothing beyond that spread, so it need not be tried
// again: the shard Events off; a single-leader Lease per replica (no release race
// at each leader's stop); an HTTP/2 connection per replica (in one process client-go
// shares one); bearer tokens instead of the client certificate (its check is 8% of
// the API server's CPU); GOMAXPROCS=8 here; a quiet second after the /metrics scrape
// before each roll; protobuf for the Lease clients; etcd on tmpfs; GOGC=400 for this
// process, the API server and etcd (the API server, with a heap of ~120MB, allocates
// ~58MB a roll and collects about once in one); the API server and etcd pinned to one CPU
// and this process to the other, as if the control plane ran on nodes of its own
// (worse: 21 to 26ms, the API server losing its second CPU). The API server's part
// alone, a Lease write's send to its arrival on a watch with no Baton code in it,
// had a pooled p99 of 11.0 to 18.1ms over those 20 runs, and 16.0 to 17.1ms in
// three later ones (hand-overs 16.9 to 18.0ms): a hand-over is that part plus two
// hops inside the replicas, whose own p99s are 1 to 6ms here. Three runs of both
// kinds at a later commit gave the controller kind 13.7, 17.9 and 24.9ms and bare
// Sharders 12.2, 21.4 and 13.4ms, each kind in step with its own API server part
// (12.3 to 19.7ms; bare Sharders' 18.9ms where they reached 21.4).
import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

func BenchmarkShardMoves(b *testing.B) {
	lease, renew, retry := benchTimings(b)
	for _, kind := range []string{"controller", "sharder"} {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				shardMoves(b, kind, lease, renew, retry)
			}
		})
	}
}

// shardMoves runs the benchmark's scenario once on replicas of kind: "controller"
// (AddShardedController; handovers timed by the Leases' stamps) or "sharder" (bare
// Sharders; handovers timed by their callbacks).
func shardMoves(b *testing.B, kind string, lease, renew, retry time.Duration) {
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
	terms := &termLog{}
	var live []ringMember
	defer func() {
		for _, r := range live {
			r.stop(b)
		}
	}()
	start := func(id string) ringMember {
		var r ringMember
		if kind == "controller" {
			r = startCtrlReplica(b, env, c, id, log, terms)
		} else {
			r = startSharderReplica(b, env, c, id, terms)
		}
		live = append(live, r)
		return r
	}
	ids := func() []string {
		var out []string
		for _, r := range live {
			out = append(out, r.name())
		}
		return out
	}
	report := func(value float64, unit, format string, args ...any) {
		b.ReportMetric(value, unit)
		b.Logf("shardmoves: "+kind+": "+format, args...)
	}
	// gaps returns the handover times of [from, to) and how they were measured.
	gaps := func(phase string, writes []leaseWrite, from, to time.Time) ([]time.Duration, string) {
		_, _, arrived, takes := handovers(writes, from, to)
		unreleased(b, kind, from, takes)
		b.Logf("shardmoves: %s: %s: %s", kind, phase, gapLine(arrived, "the old owner's write sent (renewTime) to its arrival on this process's Lease watch"))
		g, _ := terms.gaps(from, to, "")
		return g, "term end to next term start (callbacks)"
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
	joinGaps, how := gaps("join", writes, joinStart, joinEnd)
	report(ms(balanced.Sub(member)), "join-balanced-ms", "join: balanced %v after r4's member Lease was written (%v after its start, which synced its cache first)",
		balanced.Sub(member).Round(time.Millisecond), balanced.Sub(joinStart).Round(time.Millisecond))
	moves(b, report, "join", join, movedObjects(join.movedShards))
	report(ms(pct(joinGaps, 99)), "join-handover-p99-ms", "join: %s; slowest moves: %s", gapLine(joinGaps, how),
		strings.Join(terms.slowest(joinStart, 3, writes), ", "))

	// A reference for the handover times: one Lease write's round trip now.
	write, seen := writeLatency(b, env.Clientset())
	report(ms(write), "lease-write-p50-ms", "reference: a Lease update takes %v and a watch delivers it %v after it was sent (medians of 20, one at a time) on this machine now; a handover is a release, its watch delivery and a take",
		write.Round(100*time.Microsecond), seen.Round(100*time.Microsecond))
	b.ReportMetric(ms(seen), "lease-write-seen-p50-ms")

	// A graceful leave, once r4 has run a RetryPeriod since its member Lease: it has
	// seen every member renew, as a replica that ran a while has, so its hand-overs
	// are hand-offs (a member seen only on its first look gets a release:
	// docs/design/sharding.md, # Hand-over targets).
	if wait := time.Until(member.Add(retry)); wait > 0 {
		time.Sleep(wait)
	}
	leaveStart := time.Now()
	joiner.stop(b)
	stopped := time.Since(leaveStart)
	live = slices.DeleteFunc(live, func(r ringMember) bool { return r == joiner })
	waitBalancedReplicas(b, live, shards, "graceful leave of r4", 30*time.Second)
	time.Sleep(quiet)
	leaveEnd := time.Now()
	writes, objectWrites = leases.snapshot()
	leave := count(writes, objectWrites, leaveStart, leaveEnd)
	leaveGaps, how := gaps("leave", writes, leaveStart, leaveEnd)
	moves(b, report, "leave", leave, movedObjects(leave.movedShards))
	b.Logf("shardmoves: %s: leave: r4 stopped (handed over its shards and left) in %v", kind, stopped.Round(time.Millisecond))
	report(ms(pct(leaveGaps, 50)), "leave-handover-p50-ms", "leave: %s; slowest moves: %s", gapLine(leaveGaps, how),
		strings.Join(terms.slowest(leaveStart, 3, writes), ", "))
	b.ReportMetric(ms(pct(leaveGaps, 99)), "leave-handover-p99-ms")
	b.ReportMetric(ms(pct(leaveGaps, 100)), "leave-ownerless-max-ms")

	// A rolling restart of all four, BATON_BENCH_ROLLS times (default 1): the p99 of
	// one roll's ~145 hand-overs is its second slowest, so several rolls pooled give
	// a steadier tail.
	rolls := benchRolls(b)
	var pooled, pooledSent, pooledSeen, pooledTerm []time.Duration
	for round := range rolls {
		putsBefore := leasePuts(b, env.Clientset())
		rollStart := time.Now()
		var steps []string // what the roll did when, from its start: to place its slowest moves
		mark := func(what string) {
			steps = append(steps, fmt.Sprintf("%s %v", what, time.Since(rollStart).Round(time.Millisecond)))
		}
		for i := range 4 {
			old := live[0]
			mark("stop " + old.name())
			old.stop(b)
			mark("stopped " + old.name())
			live = live[1:]
			start(fmt.Sprint("s", 4*round+i))
			mark(fmt.Sprint("started s", 4*round+i))
			waitBalancedReplicas(b, live, shards, fmt.Sprintf("%s replaced by s%d", old.name(), 4*round+i), 30*time.Second)
			mark(fmt.Sprint("balanced s", 4*round+i))
		}
		puts := leasePuts(b, env.Clientset()).minus(putsBefore)
		time.Sleep(quiet)
		rollEnd := time.Now()
		writes, objectWrites = leases.snapshot()
		b.Logf("shardmoves: %s: rolling restart: the API server's own figures (its /metrics): %v Lease updates, %v of them over 5ms inside the API server and %v over 5ms in etcd",
			kind, puts.total, puts.total-puts.fast, puts.etcdTotal-puts.etcdFast)
		b.Logf("shardmoves: %s: rolling restart: steps: %s; slowest moves: %s",
			kind, strings.Join(steps, ", "), strings.Join(terms.slowest(rollStart, 5, writes), ", "))
		roll := count(writes, objectWrites, rollStart, rollEnd)
		rollGaps, how := gaps("rolling restart", writes, rollStart, rollEnd)
		report(ms(pct(rollGaps, 50)), "rolling-handover-p50-ms", "rolling restart of 4: %s; %d Lease writes for the moves (%d shards moved), %d object writes, in %v",
			gapLine(rollGaps, how), roll.shardMoves+roll.memberMoves, roll.taken, roll.objects, rollEnd.Sub(rollStart).Round(time.Millisecond))
		b.ReportMetric(ms(pct(rollGaps, 99)), "rolling-handover-p99-ms")
		b.ReportMetric(ms(pct(rollGaps, 100)), "rolling-ownerless-max-ms")
		if roll.objects > 0 {
			b.Errorf("rolling restart: %d object writes, want 0", roll.objects)
		}
		pooled = append(pooled, rollGaps...)
		sent, seen, term := terms.handOffParts(rollStart, rollEnd, writes)
		b.Logf("shardmoves: %s: rolling restart: %s", kind, partsLine(sent, seen, term))
		pooledSent, pooledSeen, pooledTerm = append(pooledSent, sent...), append(pooledSeen, seen...), append(pooledTerm, term...)
	}
	if rolls > 1 {
		slices.Sort(pooled)
		report(ms(pct(pooled, 99)), "rolling-pooled-handover-p99-ms", "rolling restart, %d rolls pooled: %s",
			rolls, gapLine(pooled, "term end to next term start (callbacks)"))
		for _, d := range [][]time.Duration{pooledSent, pooledSeen, pooledTerm} {
			slices.Sort(d)
		}
		b.Logf("shardmoves: %s: rolling restart, %d rolls pooled: %s", kind, rolls, partsLine(pooledSent, pooledSeen, pooledTerm))
	}

	// A crash: cut off from the API server, releasing nothing.
	crashed := live[0]
	held := holders(writes, time.Now())
	var shardsOf []int
	for shard, h := range held {
		if h == crashed.name() {
			shardsOf = append(shardsOf, shard)
		}
	}
	crashAt := time.Now()
	crashed.crash()
	live = live[1:]
	waitBalancedReplicas(b, live, shards, "crash of "+crashed.name(), 3*lease+30*time.Second)
	time.Sleep(quiet)
	writes, _ = leases.snapshot()
	// For each shard, from the cut and from the crashed holder's last renew the others
	// saw before the cut (of its member Lease, which carries its shards' terms, or of
	// the shard Lease itself) to its take by another.
	var recovered, afterRenew time.Duration
	for _, shard := range shardsOf {
		var renewed, taken time.Time
		for _, w := range writes {
			member := w.kind == memberJoin || w.kind == memberRenew
			if !member && (w.shard != shard || (w.kind != shardTake && w.kind != shardRenew && w.kind != shardHandOff)) {
				continue
			}
			if w.at.Before(crashAt) && w.holder == crashed.name() {
				renewed = w.at
			}
			if !member && w.at.After(crashAt) && w.kind == shardTake && w.holder != crashed.name() {
				taken = w.at
				break
			}
		}
		if taken.IsZero() {
			b.Fatalf("crash: shard %d of %s never taken", shard, crashed.name())
		}
		recovered = max(recovered, taken.Sub(crashAt))
		afterRenew = max(afterRenew, taken.Sub(renewed))
	}
	report(ms(recovered), "crash-owned-again-ms", "crash of %s (%d shards, no release): all taken again %v after the cut, at most %v after its last renew seen (Lease watch; lease duration %v, renew deadline %v)",
		crashed.name(), len(shardsOf), recovered.Round(time.Millisecond), afterRenew.Round(time.Millisecond), lease, renew)
	b.ReportMetric(ms(afterRenew), "crash-after-last-renew-ms")
	{
		crashGaps, last := terms.gaps(crashAt, time.Now(), crashed.name())
		b.Logf("shardmoves: %s: crash: by the callbacks, the crashed replica's terms ended by its renew deadline, then %s; the last began %v after the cut",
			kind, gapLine(crashGaps, "term end to next term start"), last.Sub(crashAt).Round(time.Millisecond))
	}
	crashed.stop(b)

	for _, r := range live {
		r.stop(b)
	}
	if kind == "controller" {
		n := log.check(b)
		b.Logf("shardmoves: %s: %d reconciles by %v, none of one shard by two replicas at once", kind, n, log.replicasOf())
	}
	if n := terms.overlaps(); n > 0 {
		b.Errorf("%d shard terms began before the previous one of their shard ended", n)
	}
	b.Logf("shardmoves: %s: machine load (1, 5, 15 min): %s", kind, loadavg())
	b.ReportMetric(0, "ns/op")
}

// unreleased logs the takes of a planned move's window that followed no release:
// a shard that waited for its Lease to expire instead of a hand-over.
func unreleased(b *testing.B, kind string, from time.Time, takes []leaseWrite) {
	for _, w := range takes {
		b.Logf("shardmoves: %s: shard %d taken by %s from %q without a release, %v into the phase (leaseTransitions %d, the write before %v earlier)",
			kind, w.shard, w.holder, w.from, w.at.Sub(from).Round(time.Millisecond), w.transitions, w.at.Sub(w.prevAt).Round(time.Millisecond))
	}
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

// writeLatency returns the median round trip of 20 updates of a Lease of its own,
// written one after another, and the median time from sending each to a watch of
// that Lease delivering it.
func writeLatency(b *testing.B, cs kubernetes.Interface) (write, seen time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leases := cs.CoordinationV1().Leases("default")
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "write-latency"}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = leases.Delete(context.Background(), "write-latency", metav1.DeleteOptions{}) }()
	w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=write-latency", ResourceVersion: l.ResourceVersion})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var writes, seens []time.Duration
	for i := range 20 {
		l.Spec.LeaseTransitions = ptr.To(int32(i))
		start := time.Now()
		if l, err = leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		writes = append(writes, time.Since(start))
		for ev := range w.ResultChan() {
			if got, ok := ev.Object.(*coordinationv1.Lease); ok && got.ResourceVersion == l.ResourceVersion {
				seens = append(seens, time.Since(start))
				break
			}
		}
	}
	if len(seens) != len(writes) {
		b.Fatalf("the watch of the reference Lease delivered %d of %d writes", len(seens), len(writes))
	}
	slices.Sort(writes)
	slices.Sort(seens)
	return pct(writes, 50), pct(seens, 50)
}

// putCounts are the API server's counts of Lease updates: all of them and those
// done in at most 5ms, as it timed them (apiserver_request_duration_seconds), and as
// it timed their etcd updates (etcd_request_duration_seconds).
type putCounts struct{ total, fast, etcdTotal, etcdFast float64 }

func (c putCounts) minus(d putCounts) putCounts {
	return putCounts{c.total - d.total, c.fast - d.fast, c.etcdTotal - d.etcdTotal, c.etcdFast - d.etcdFast}
}

// leasePuts reads the API server's putCounts from its /metrics: where a handover's
// time goes when the machine, not Baton, is slow.
func leasePuts(b *testing.B, cs kubernetes.Interface) putCounts {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("the API server's metrics: %v", err)
	}
	var c putCounts
	for line := range strings.Lines(string(raw)) {
		var total, fast *float64
		switch {
		case strings.HasPrefix(line, "apiserver_request_duration_seconds_bucket{") && strings.Contains(line, `verb="PUT"`):
			total, fast = &c.total, &c.fast
		case strings.HasPrefix(line, "etcd_request_duration_seconds_bucket{") && strings.Contains(line, `operation="update"`):
			total, fast = &c.etcdTotal, &c.etcdFast
		default:
			continue
		}
		if !strings.Contains(line, `resource="leases"`) || !strings.Contains(line, `group="coordination.k8s.io"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			b.Fatalf("the API server's metrics: %q: %v", line, err)
		}
		switch {
		case strings.Contains(line, `le="+Inf"`):
			*total += v
		case strings.Contains(line, `le="0.005"`):
			*fast += v
		}
	}
	if c.total == 0 || c.etcdTotal == 0 {
		b.Fatal("the API server's metrics count no Lease update")
	}
	return c
}

// gapLine describes handover times, measured as how says.
func gapLine(gaps []time.Duration, how string) string {
	if len(gaps) == 0 {
		return "no shard handed over"
	}
	return fmt.Sprintf("%d handovers, %s p50 %v, p99 %v, max %v (the longest a shard had no owner)",
		len(gaps), how, pct(gaps, 50).Round(100*time.Microsecond), pct(gaps, 99).Round(100*time.Microsecond), pct(gaps, 100).Round(100*time.Microsecond))
}

// partsLine describes the parts of one-write hand-overs (termLog.handOffParts).
func partsLine(sent, seen, term []time.Duration) string {
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("the parts of its %d one-write hand-overs, p50/p99: term end to the write's send %v/%v (the old owner), "+
		"send to its arrival on this process's Lease watch %v/%v (the API server), arrival to the new term %v/%v (the new owner)",
		len(seen), r(pct(sent, 50)), r(pct(sent, 99)), r(pct(seen, 50)), r(pct(seen, 99)), r(pct(term, 50)), r(pct(term, 99)))
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

// benchRolls returns BATON_BENCH_ROLLS, how many rolling restarts to run, default 1.
func benchRolls(b *testing.B) int {
	v := os.Getenv("BATON_BENCH_ROLLS")
	if v == "" {
		return 1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("BATON_BENCH_ROLLS=%q: want a positive number of rolling restarts", v)
	}
	return n
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
