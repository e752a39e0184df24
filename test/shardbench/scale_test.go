package shardbench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// scaleResult is what one configuration's run measured.
type scaleResult struct {
	kind     kind
	replicas int
	work     time.Duration // the timer of each reconcile

	reconciles int           // reconciles that ended in the window
	window     time.Duration // from the gate's opening to the last needed reconcile
	rate       float64       // reconciles per second in the window
	// busyRate is the capacity: reconciles per second from the gate's opening until
	// the first replica ran out of work, while every replica's workers were busy.
	// Unlike rate, which waits for the replica with the largest share, it does not
	// depend on how evenly the hash spread the backlog.
	busyRate float64
	drain    time.Duration // until every object's backlog version was reconciled
	backlog  int           // objects in the backlog

	shares       []int     // backlog objects in each replica's shards
	busy         []float64 // each replica's workers' busy fraction until its last reconcile
	meanWork     time.Duration
	probe        time.Duration // the mean length of a bare timer of the same duration, in the window
	writeRate    float64       // backlog writes per second
	churnWrites  int
	cpu          cpuUse
	violations   []string
	cacheObjects []int // ConfigMaps of the namespace in each replica's manager cache
}

// runScale runs one configuration (see the package doc) and returns what it measured;
// it fails tb if the run could not be made, not for violations (the caller checks).
func runScale(tb testing.TB, p params, w *world, k kind, n int) scaleResult {
	tb.Helper()
	ctx := context.Background()
	led, g := newLedger(), newGate()
	rs := newReplicas(tb, p, w, k, n, led, g)
	defer stopAll(tb, rs)
	startBalanced(tb, p, rs)
	ring, err := sharding.NewRing(p.shards)
	if err != nil {
		tb.Fatal(err)
	}
	shardOf := map[string]int{}
	for name, uid := range w.uids {
		shardOf[name] = ring.ShardOf(string(uid))
	}
	drainTimeout := time.Duration(float64(p.objects)/float64(p.workers)*float64(p.work+time.Millisecond)) + 2*p.lease + 60*time.Second
	led.await(w.versions())
	batontest.WaitFor(tb, drainTimeout, "every object's current version reconciled", led.caughtUp)

	// The backlog: every object updated while the workers are held back.
	g.pause()
	res := scaleResult{kind: k, replicas: n, work: p.work, backlog: len(w.names)}
	res.writeRate = w.touchAll(tb)
	backlog := w.versions()
	owned, leaderTerm := shardTerms(rs), rs[0].rt.Term()
	mine := func(i int) func(name string) bool {
		if k == single {
			return func(string) bool { return true }
		}
		set := map[int]bool{}
		for _, st := range owned[i] {
			set[st.Shard] = true
		}
		return func(name string) bool { return set[shardOf[name]] }
	}
	for i, r := range rs {
		in := mine(i)
		if k == single && !r.rt.IsLeader() {
			in = func(string) bool { return false }
		}
		share := 0
		for _, name := range w.names {
			if in(name) {
				share++
			}
		}
		res.shares = append(res.shares, share)
		var reader client.Reader = r.mgr.GetCache()
		if r.sharded != nil {
			reader = r.sharded.Reader()
		}
		batontest.WaitFor(tb, 60*time.Second, r.kit.Name+"'s cache holding the backlog versions", func() bool {
			for _, name := range w.names {
				if !in(name) {
					continue
				}
				var cm corev1.ConfigMap
				if err := reader.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: name}, &cm); err != nil || parseVersion(cm.ResourceVersion) < backlog[name] {
					return false
				}
			}
			return true
		})
		var list corev1.ConfigMapList
		if err := reader.List(ctx, &list); err != nil {
			tb.Fatal(err)
		}
		res.cacheObjects = append(res.cacheObjects, len(list.Items))
		// Why this wait too: an informer updates its store before its handlers enqueue.
		batontest.WaitFor(tb, 60*time.Second, r.kit.Name+"'s queue holding its share", func() bool { return r.queued() >= share })
	}

	// The timed part.
	led.await(backlog)
	cpu0 := readCPU()
	t0 := time.Now()
	g.resume()
	churnCtx, stopChurn := context.WithCancel(ctx)
	probed := make(chan time.Duration, 1)
	go func() { probed <- probeTimer(churnCtx, p.work) }()
	churned := make(chan error, 1)
	go func() {
		var err error
		res.churnWrites, err = w.churn(churnCtx, p.churn, uint64(n)<<8|uint64(len(k)))
		churned <- err
	}()
	batontest.WaitFor(tb, drainTimeout, "the backlog reconciled", led.caughtUp)
	stopChurn()
	if err := <-churned; err != nil {
		tb.Fatalf("churn: %v", err)
	}
	res.probe = <-probed
	final := w.versions()
	led.await(final)
	batontest.WaitFor(tb, drainTimeout, "every object's latest version reconciled", led.caughtUp)
	cpu1 := readCPU()
	if after := shardTerms(rs); !slices.EqualFunc(owned, after, slices.Equal) {
		tb.Errorf("%s-%d: shards moved during the timed part: before %v, after %v", k, n, owned, after)
	}
	if k == single && rs[0].rt.Term() != leaderTerm {
		tb.Errorf("%s: the leader's term changed during the timed part: %d, then %d", k, leaderTerm, rs[0].rt.Term())
	}
	stopAll(tb, rs)

	ivs := led.snapshot()
	if k == sharded {
		res.violations = check(ivs, final, shardOf)
	} else {
		res.violations = check(ivs, final, nil)
	}
	res.drain = reconciledBy(ivs, backlog, t0).Sub(t0)
	end := reconciledBy(ivs, final, t0)
	res.window = end.Sub(t0)
	res.cpu = cpuBetween(cpu0, cpu1)
	res.measure(ivs, rs, t0, end, p.workers)
	return res
}

// probeTimer waits on timers of d one after the other until ctx ends, and returns
// their mean length: how late a timer fires in this process under the machine's
// load, to compare with the reconciles' mean length.
func probeTimer(ctx context.Context, d time.Duration) time.Duration {
	var total time.Duration
	n := 0
	for ctx.Err() == nil {
		start := time.Now()
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
			total += time.Since(start)
			n++
		case <-ctx.Done():
			timer.Stop()
		}
	}
	if n == 0 {
		return 0
	}
	return total / time.Duration(n)
}

// reconciledBy returns the moment by which every object of want had that version
// reconciled: the latest of the first reconciles, ending after t0, that read it.
func reconciledBy(ivs map[string][]interval, want map[string]uint64, t0 time.Time) time.Time {
	var last time.Time
	for name, v := range want {
		var first time.Time
		for _, iv := range ivs[name] {
			if iv.done && iv.version >= v && iv.end.After(t0) && (first.IsZero() || iv.end.Before(first)) {
				first = iv.end
			}
		}
		if first.After(last) {
			last = first
		}
	}
	return last
}

// measure fills in the rate, the busy fractions and the mean work from the
// reconciles that ended in (t0, end].
func (res *scaleResult) measure(ivs map[string][]interval, rs []*replica, t0, end time.Time, workers int) {
	busy := map[string]time.Duration{}
	last := map[string]time.Time{}
	var work time.Duration
	done := 0
	for _, list := range ivs {
		for _, iv := range list {
			if !iv.end.After(t0) || iv.end.After(end) {
				continue
			}
			res.reconciles++
			from := iv.start
			if from.Before(t0) {
				from = t0
			}
			busy[iv.replica] += iv.end.Sub(from)
			if iv.end.After(last[iv.replica]) {
				last[iv.replica] = iv.end
			}
			if iv.done {
				work += iv.end.Sub(from)
				done++
			}
		}
	}
	if res.window > 0 {
		res.rate = float64(res.reconciles) / res.window.Seconds()
	}
	res.busyRate = busyRate(ivs, rs, t0, last)
	if done > 0 {
		res.meanWork = work / time.Duration(done)
	}
	for _, r := range rs {
		span := last[r.kit.Name].Sub(t0)
		f := 0.0
		if span > 0 {
			f = busy[r.kit.Name].Seconds() / (float64(workers) * span.Seconds())
		}
		res.busy = append(res.busy, f)
	}
}

// busyRate returns the reconciles per second that ended in (t0, first], where first
// is the earliest of the replicas' last reconciles: the window in which every
// replica still had work.
func busyRate(ivs map[string][]interval, rs []*replica, t0 time.Time, last map[string]time.Time) float64 {
	var first time.Time
	for _, r := range rs {
		if l := last[r.kit.Name]; first.IsZero() || l.Before(first) {
			first = l
		}
	}
	if !first.After(t0) {
		return 0
	}
	n := 0
	for _, list := range ivs {
		for _, iv := range list {
			if iv.end.After(t0) && !iv.end.After(first) {
				n++
			}
		}
	}
	return float64(n) / first.Sub(t0).Seconds()
}

// name is the configuration's name in the table and the sub-benchmark.
func (res scaleResult) name() string {
	if res.kind == single {
		return string(single)
	}
	return fmt.Sprintf("%s-%d", res.kind, res.replicas)
}

// balanceBound is the ratio to one replica that perfect workers would reach with
// these shares: the backlog over the largest share.
func (res scaleResult) balanceBound() float64 {
	m := slices.Max(res.shares)
	if m == 0 {
		return 0
	}
	return float64(res.backlog) / float64(m)
}

// timerShare is the capacity (busyRate) over what the replicas' workers could reach
// if every reconcile took as long as a bare timer of the same duration took in the
// window (replicas × workers / that timer): how close the controller came to its
// bound on this machine at this moment. A loaded machine fires timers late, which
// lowers the rates of every configuration, but by different amounts at different
// moments; this share does not move with it.
func (res scaleResult) timerShare(workers int) float64 {
	if res.probe <= 0 {
		return 0
	}
	return res.busyRate / (float64(res.replicas*workers) / res.probe.Seconds())
}

func (res scaleResult) describe() string {
	busy := make([]string, len(res.busy))
	for i, b := range res.busy {
		busy[i] = fmt.Sprintf("%.0f%%", 100*b)
	}
	return fmt.Sprintf("%s: %d reconciles in %v = %.0f/s; backlog of %d drained in %v; shares %v (bound %.2fx); busy %s; mean reconcile %v (a bare %v timer took %v); backlog writes %.0f/s, churn %d writes; caches hold %v; %v",
		res.name(), res.reconciles, res.window.Round(time.Millisecond), res.rate, res.backlog, res.drain.Round(time.Millisecond),
		res.shares, res.balanceBound(), strings.Join(busy, " "), res.meanWork.Round(10*time.Microsecond), res.work, res.probe.Round(10*time.Microsecond), res.writeRate, res.churnWrites,
		res.cacheObjects, res.cpu)
}

func parseVersion(rv string) uint64 {
	var v uint64
	_, _ = fmt.Sscan(rv, &v)
	return v
}
