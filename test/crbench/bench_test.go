package crbench

// BenchmarkControllerRuntime runs, against one real kube-apiserver:
//
//	export KUBEBUILDER_ASSETS=$(hack/testenv.sh | tail -n 1)
//	go test -run '^$' -bench BenchmarkControllerRuntime -benchtime 1x -timeout 60m ./test/crbench/
//
// Knobs (environment), shared with test/election:
//
//	BATON_BENCH_TIMINGS=15s,10s,2s  LeaseDuration, RenewDeadline, RetryPeriod
//	BATON_BENCH_ROUNDS=3            rounds per implementation
//	BATON_BENCH_IDLE=20s            window over which the idle follower's requests are counted
//
// Implementations: "cr-stock" (a manager with LeaderElection, the controller with
// EnableWarmup), "baton-cr" (a manager without election, the controller added through
// pkg/integration/controllerruntime) and "baton-bare" (pkg/k8s/leaderelection alone,
// no controller: the baseline of the handover). Each round, on a Lease of its own:
//
//   - crash: the leader's manager is cancelled without releasing the lease (it stops
//     renewing at once, as after SIGKILL); measured from the cancel to the moment a
//     watch of the Lease in this process sees the follower hold it;
//   - graceful: the new leader is cancelled with release-on-cancel while a second
//     follower waits, at a random moment of its retry period; measured from the cancel
//     to the moment the watch sees the second follower hold the Lease;
//   - election → first reconcile: in both, from that moment to the first Reconcile
//     call in the new leader's process (negative: the reconcile came first);
//   - follower requests/s (first round): every request of the follower's clients (a
//     WrapTransport counter) over the idle window, caches included.
//
// Once per implementation, the leader's lease client is cut off until its term ends:
// the table says whether the process exited or campaigned again and led again.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/baton-dev/baton/pkg/batontest"
)

const (
	implStock = "cr-stock"
	implBaton = "baton-cr"
	implBare  = "baton-bare"
)

type timings struct{ lease, renew, retry time.Duration }

func benchTimings(b *testing.B) timings {
	tm := timings{15 * time.Second, 10 * time.Second, 2 * time.Second}
	if s := os.Getenv("BATON_BENCH_TIMINGS"); s != "" {
		parts := strings.Split(s, ",")
		if len(parts) != 3 {
			b.Fatalf("BATON_BENCH_TIMINGS=%q: want lease,renew,retry", s)
		}
		ds := make([]time.Duration, 3)
		for i, p := range parts {
			d, err := time.ParseDuration(strings.TrimSpace(p))
			if err != nil {
				b.Fatalf("BATON_BENCH_TIMINGS=%q: %v", s, err)
			}
			ds[i] = d
		}
		tm = timings{ds[0], ds[1], ds[2]}
	}
	return tm
}

func benchInt(b *testing.B, name string, def int) int {
	if s := os.Getenv(name); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive integer", name, s)
		}
		return n
	}
	return def
}

func benchDuration(b *testing.B, name string, def time.Duration) time.Duration {
	if s := os.Getenv(name); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			b.Fatalf("%s=%q: want a positive duration", name, s)
		}
		return d
	}
	return def
}

// result is what one implementation measured.
type result struct {
	graceful, crash, firstReconcile []time.Duration
	requests                        int64
	idle                            time.Duration
	leaseLoss                       string
}

func BenchmarkControllerRuntime(b *testing.B) {
	tm := benchTimings(b)
	rounds := benchInt(b, "BATON_BENCH_ROUNDS", 3)
	idle := benchDuration(b, "BATON_BENCH_IDLE", 20*time.Second)
	h := newHarness(b)
	results := map[string]*result{}
	for _, impl := range []string{implBare, implBaton, implStock} {
		b.Run(impl, func(b *testing.B) {
			b.ReportAllocs()
			res := &result{}
			for range b.N {
				for round := range rounds {
					h.round(b, impl, tm, round, idle, res)
				}
				res.leaseLoss = h.leaseLoss(b, impl, tm)
			}
			results[impl] = res
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(median(res.graceful)), "graceful-median-ms")
			b.ReportMetric(ms(median(res.crash)), "crash-median-ms")
			if len(res.firstReconcile) > 0 {
				b.ReportMetric(ms(median(res.firstReconcile)), "elected-to-reconcile-median-ms")
			}
			b.ReportMetric(res.rps(), "follower-req/s")
		})
	}
	if len(results) == 3 {
		printTable(tm, rounds, results)
	}
}

func (r *result) rps() float64 {
	if r.idle == 0 {
		return 0
	}
	return float64(r.requests) / r.idle.Seconds()
}

// round runs one crash failover and one graceful handover of impl.
func (h *harness) round(b *testing.B, impl string, tm timings, round int, idle time.Duration, res *result) {
	b.Helper()
	lease := fmt.Sprintf("%s-%d-%d", impl, round, rand.Uint32())
	lw := watchLease(b, lease)
	defer lw.close()
	leader := h.candidate(b, impl, "leader", lease, tm, false)
	leader.start(b)
	batontest.WaitFor(b, 2*tm.lease+30*time.Second, "the first leader", func() bool { _, ok := leader.electedAfter(time.Time{}); return ok })
	follower := h.candidate(b, impl, "follower", lease, tm, true)
	follower.start(b)
	settle(follower, tm)
	if round == 0 {
		n0, from := follower.requests(), time.Now()
		time.Sleep(idle)
		res.requests += follower.requests() - n0
		res.idle += time.Since(from)
	}

	// Crash: the leader stops renewing without releasing.
	time.Sleep(rand.N(tm.retry))
	t0 := time.Now()
	leader.stop(b)
	took := waitTaken(b, lw, t0, tm)
	res.crash = append(res.crash, took.Sub(t0))
	if d, ok := follower.reconcileAfter(b, t0, took); ok {
		res.firstReconcile = append(res.firstReconcile, d)
	}

	// Graceful: the new leader releases to a second follower.
	standby := h.candidate(b, impl, "standby", lease, tm, true)
	standby.start(b)
	settle(standby, tm)
	time.Sleep(rand.N(tm.retry))
	t0 = time.Now()
	follower.stop(b)
	took = waitTaken(b, lw, t0, tm)
	res.graceful = append(res.graceful, took.Sub(t0))
	if d, ok := standby.reconcileAfter(b, t0, took); ok {
		res.firstReconcile = append(res.firstReconcile, d)
	}
	standby.stop(b)
}

// settle gives a new follower time to start and see the lease.
func settle(c candidate, tm timings) {
	c.waitWarm()
	time.Sleep(2 * tm.retry)
}

func waitTaken(b *testing.B, lw *leaseWatch, after time.Time, tm timings) time.Time {
	b.Helper()
	var at time.Time
	batontest.WaitFor(b, tm.lease+4*tm.retry+30*time.Second, "the takeover", func() bool {
		var ok bool
		at, ok = lw.takenAfter(after)
		return ok
	})
	return at
}

func waitElected(b *testing.B, c candidate, after time.Time, tm timings) time.Time {
	b.Helper()
	var at time.Time
	batontest.WaitFor(b, tm.lease+4*tm.retry+30*time.Second, "the takeover", func() bool {
		var ok bool
		at, ok = c.electedAfter(after)
		return ok
	})
	return at
}

// leaseLoss cuts the leader's lease client off until its term ends, then reconnects
// it, and reports what the process did.
func (h *harness) leaseLoss(b *testing.B, impl string, tm timings) string {
	b.Helper()
	lease := fmt.Sprintf("%s-loss-%d", impl, rand.Uint32())
	c := h.candidate(b, impl, "lost", lease, tm, true)
	c.start(b)
	first := waitElected(b, c, time.Time{}, tm)
	c.partition().Cut()
	exited := false
	batontest.WaitFor(b, tm.renew+tm.lease+30*time.Second, "the term to end", func() bool {
		if _, done := c.exited(); done {
			exited = true
			return true
		}
		return !c.leading()
	})
	c.partition().Heal()
	defer c.stop(b)
	if err, done := c.exited(); exited || done {
		return fmt.Sprintf("process exits (%v)", err)
	}
	again, ok := time.Time{}, false
	batontest.WaitFor(b, 2*tm.lease+30*time.Second, "a new term in the same process", func() bool {
		again, ok = c.electedAfter(first)
		return ok
	})
	return fmt.Sprintf("re-campaigns, leads again after %v", again.Sub(first).Round(time.Millisecond))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func maxOf(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

func printTable(tm timings, rounds int, rs map[string]*result) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "\ncontroller-runtime side by side, %v/%v/%v, %d rounds\n", tm.lease, tm.renew, tm.retry, rounds)
	fmt.Fprintln(w, "impl\tgraceful median\tgraceful max\tcrash median\tcrash max\telected→reconcile median\tmax\tfollower req/s\ton lease loss")
	for _, impl := range []string{implBare, implBaton, implStock} {
		r := rs[impl]
		rec, recMax := "n/a (no controller)", "n/a"
		if len(r.firstReconcile) > 0 {
			rec, recMax = fmtD(median(r.firstReconcile)), fmtD(maxOf(r.firstReconcile))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%s\n", impl, fmtD(median(r.graceful)), fmtD(maxOf(r.graceful)),
			fmtD(median(r.crash)), fmtD(maxOf(r.crash)), rec, recMax, r.rps(), r.leaseLoss)
	}
	bare, baton := median(rs[implBare].graceful), median(rs[implBaton].graceful)
	if bare > 0 {
		fmt.Fprintf(w, "baton-cr graceful / baton-bare graceful: %.2fx\n", float64(baton)/float64(bare))
	}
	w.Flush()
}

func fmtD(d time.Duration) string {
	if d < 10*time.Millisecond {
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Millisecond).String()
}
