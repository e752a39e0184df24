package election

// BenchmarkFailover compares Baton's elector with client-go's stock elector
// (tools/leaderelection with a resourcelock.LeaseLock) on the same real
// kube-apiserver, in one run:
//
//	export KUBEBUILDER_ASSETS=$(hack/testenv.sh | tail -n 1)
//	go test -run '^$' -bench BenchmarkFailover -benchtime 1x -timeout 30m ./test/election/
//
// It takes about 5 minutes at the default timings. Knobs (environment):
//
//	BATON_BENCH_TIMINGS=15s,10s,2s  LeaseDuration, RenewDeadline, RetryPeriod
//	BATON_BENCH_ROUNDS=5            rounds per elector
//	BATON_BENCH_IDLE=20s            window over which the idle follower's requests are counted
//
// e.g. BATON_BENCH_TIMINGS=3s,2s,400ms BATON_BENCH_ROUNDS=2 BATON_BENCH_IDLE=5s for a
// quick run. Each round, on a Lease of its own, for each elector:
//
//   - crash failover: a leader in a subprocess is killed with SIGKILL while an
//     in-process follower watches or polls; measured from the moment the lease's
//     last renew by the killed leader was seen (a watch of the Lease in this
//     process; a renew in flight at the kill counts if it landed) to the
//     follower's OnStartedLeading.
//   - graceful handover: the follower, now leader, is cancelled with
//     ReleaseOnCancel while a second in-process follower waits; measured from the
//     send time of the release to the second follower's OnStartedLeading. The
//     release comes at a random moment of the followers' retry period.
//   - follower requests per second (first round only): every request of the
//     follower's client (a rest.Config WrapTransport counter) over the idle window
//     while the subprocess leader renews.
//
// It reports, per elector, graceful-median-ms, graceful-max-ms, crash-median-ms,
// crash-max-ms and follower-req/s with b.ReportMetric, and prints a table of both.
// The safety monitor of the tests runs here too.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchFollower is an in-process candidate of either implementation.
type benchFollower interface {
	// leadAfter returns when the first leadership that started after at started.
	leadAfter(at mtime) (mtime, bool)
	identity() string
	leader() string
	requests() int64
	lastWrite() (leaseWrite, bool)
	stop(t testing.TB)
}

func (c *batonCandidate) leadAfter(at mtime) (mtime, bool) {
	r, _, ok := firstTermAfter([]*batonCandidate{c}, at)
	return r.started, ok
}
func (c *batonCandidate) identity() string { return c.who }
func (c *batonCandidate) leader() string   { return c.el.GetLeader() }
func (c *batonCandidate) requests() int64  { return c.log.requests.Load() }
func (c *batonCandidate) lastWrite() (leaseWrite, bool) {
	return c.log.lastWrite()
}

func (c *clientGoCandidate) leadAfter(at mtime) (mtime, bool) {
	for _, r := range c.startedRuns() {
		if r.started > at {
			return r.started, true
		}
	}
	return 0, false
}
func (c *clientGoCandidate) identity() string { return c.who }
func (c *clientGoCandidate) leader() string   { return c.getLeader() }
func (c *clientGoCandidate) requests() int64  { return c.log.requests.Load() }
func (c *clientGoCandidate) lastWrite() (leaseWrite, bool) {
	return c.log.lastWrite()
}

func (h *harness) follower(impl, who, lease string, o candidateOptions) benchFollower {
	if impl == implBaton {
		return h.baton(who, lease, o)
	}
	return h.clientGo(who, lease, o)
}

// benchResult is what one elector measured.
type benchResult struct {
	graceful, crash []time.Duration
	requests        int64
	idle            time.Duration
}

func (r benchResult) rps() float64 { return float64(r.requests) / r.idle.Seconds() }

func BenchmarkFailover(b *testing.B) {
	tm := benchTimings(b)
	rounds := benchInt(b, "BATON_BENCH_ROUNDS", 5)
	idle := benchDuration(b, "BATON_BENCH_IDLE", 20*time.Second)
	results := map[string]*benchResult{}
	for _, impl := range []string{implBaton, implClientGo} {
		b.Run(impl, func(b *testing.B) {
			b.ReportAllocs()
			res := &benchResult{}
			for range b.N {
				failoverRounds(b, impl, tm, rounds, idle, res)
			}
			results[impl] = res
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(ms(median(res.graceful)), "graceful-median-ms")
			b.ReportMetric(ms(maxOf(res.graceful)), "graceful-max-ms")
			b.ReportMetric(ms(median(res.crash)), "crash-median-ms")
			b.ReportMetric(ms(maxOf(res.crash)), "crash-max-ms")
			b.ReportMetric(res.rps(), "follower-req/s")
		})
	}
	if len(results) == 2 {
		printFailoverTable(tm, rounds, results)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// failoverRounds runs rounds of crash failover and graceful handover for impl,
// measuring the idle follower in the first.
func failoverRounds(b *testing.B, impl string, tm timings, rounds int, idle time.Duration, res *benchResult) {
	b.Helper()
	h := newHarness(b, shared)
	for round := range rounds {
		lease := leaseName(b)
		hist := recordHistory(b, shared.Clientset(), namespace, lease)
		// A subprocess leader, and a follower in this process.
		leader := h.spawn(candidateConfig{
			Impl: impl, Lease: lease, Identity: fmt.Sprintf("%s-leader-%d", impl, round),
			LeaseDuration: tm.lease, RenewDeadline: tm.renew, RetryPeriod: tm.retry,
		})
		leader.await(b, 30*time.Second, "became-leader", isEv(evBecameLeader))
		f := h.follower(impl, fmt.Sprintf("%s-follower-%d", impl, round), lease, candidateOptions{timings: tm, release: true})
		waitFor(b, 2*tm.lease+10*time.Second, "the follower to see the leader", func() bool { return f.leader() == leader.who })
		joined := now()

		if round == 0 {
			n0, from := f.requests(), now()
			time.Sleep(idle)
			n1, to := f.requests(), now()
			renews := leader.all(func(e event) bool { return e.Ev == evWrite && e.Sent > from && e.T < to })
			if len(renews) == 0 {
				b.Fatalf("the leader did not renew during the %v idle window", idle)
			}
			res.requests += n1 - n0
			res.idle += to.sub(from)
		}

		// Crash: SIGKILL at a random moment after a renew the follower saw.
		leader.await(b, 2*tm.retry+10*time.Second, "a renew after the follower joined", func(e event) bool {
			return e.Ev == evWrite && e.Sent > joined
		})
		time.Sleep(time.Duration(rand.Int64N(int64(tm.retry))))
		leader.signal(b, syscall.SIGKILL)
		killed := now()
		_ = leader.waitExit(b, 10*time.Second)
		var took mtime
		var ok bool
		waitFor(b, tm.lease+4*tm.retry+10*time.Second, "the follower to take over from the killed leader", func() bool {
			took, ok = f.leadAfter(killed)
			return ok
		})
		var lastRenew mtime
		waitFor(b, 10*time.Second, "the history to show the takeover", func() bool {
			states, _ := hist.snapshot()
			lastRenew = 0
			for _, st := range states {
				switch st.holder {
				case leader.who:
					lastRenew = st.seen
				case f.identity():
					return lastRenew != 0
				}
			}
			return false
		})
		res.crash = append(res.crash, took.sub(lastRenew))

		// Graceful: the follower, now leader, releases to a second follower.
		g := h.follower(impl, fmt.Sprintf("%s-standby-%d", impl, round), lease, candidateOptions{timings: tm, release: true})
		waitFor(b, 2*tm.lease+10*time.Second, "the standby to see the new leader", func() bool {
			return g.leader() == fmt.Sprintf("%s-follower-%d", impl, round)
		})
		time.Sleep(time.Duration(rand.Int64N(int64(1.2 * float64(tm.retry)))))
		f.stop(b)
		rel, ok := f.lastWrite()
		if !ok {
			b.Fatal("follower made no lease write")
		}
		waitFor(b, tm.lease+4*tm.retry+10*time.Second, "the standby to take the released lease", func() bool {
			took, ok = g.leadAfter(rel.Sent)
			return ok
		})
		res.graceful = append(res.graceful, took.sub(rel.Sent))
		g.stop(b)
		b.Logf("%s round %d: crash failover %v, graceful handover %v", impl, round+1,
			res.crash[len(res.crash)-1], res.graceful[len(res.graceful)-1])
	}
}

func printFailoverTable(tm timings, rounds int, results map[string]*benchResult) {
	var sb strings.Builder
	fmt.Fprintf(&sb, "\nFailover against a real kube-apiserver, LeaseDuration/RenewDeadline/RetryPeriod %v, %d rounds\n", tm, rounds)
	fmt.Fprintf(&sb, "%-10s  %16s  %13s  %13s  %10s  %14s\n", "elector", "graceful median", "graceful max", "crash median", "crash max", "follower req/s")
	for _, impl := range []string{implBaton, implClientGo} {
		r := results[impl]
		fmt.Fprintf(&sb, "%-10s  %16v  %13v  %13v  %10v  %14.2f\n", impl,
			median(r.graceful).Round(time.Millisecond), maxOf(r.graceful).Round(time.Millisecond),
			median(r.crash).Round(time.Millisecond), maxOf(r.crash).Round(time.Millisecond), r.rps())
	}
	fmt.Fprint(os.Stdout, sb.String())
}

func benchTimings(b *testing.B) timings {
	v := os.Getenv("BATON_BENCH_TIMINGS")
	if v == "" {
		return timings{lease: 15 * time.Second, renew: 10 * time.Second, retry: 2 * time.Second}
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
	return timings{lease: ds[0], renew: ds[1], retry: ds[2]}
}

func benchInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func benchDuration(b *testing.B, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		b.Fatalf("%s=%q: want a positive duration", name, v)
	}
	return d
}
