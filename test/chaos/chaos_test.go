package chaos

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// Environment knobs (see doc.go).
const (
	envSeed      = "BATON_CHAOS_SEED"
	envHistories = "BATON_CHAOS_HISTORIES"
	envFirst     = "BATON_CHAOS_FIRST"
	envRepeat    = "BATON_CHAOS_REPEAT"
	// envSkew=0 turns the clock skew windows of the in-memory histories off; unset or
	// 1 leaves them on (rates within the elector's tolerance, see doc.go).
	envSkew = "BATON_CHAOS_SKEW"
	// envSkewRate sets the rate of every skew window (a demonstration knob: a rate
	// beyond the tolerance must give two leaders; CI leaves it unset).
	envSkewRate = "BATON_CHAOS_SKEW_RATE"
)

// skewMode is how the in-memory histories skew the candidates' clocks.
type skewMode struct {
	on bool
	// rate, when above 0, is the rate of every skew window; 0 draws each window's
	// rate within the elector's tolerance (leaderelection.Config.ClockTolerance).
	rate float64
}

// env is the part of the replay command that sets m (empty for the default).
func (m skewMode) env() string {
	switch {
	case !m.on:
		return envSkew + "=0 "
	case m.rate > 0:
		return fmt.Sprintf("%s=%g ", envSkewRate, m.rate)
	}
	return ""
}

// skewFromEnv reads BATON_CHAOS_SKEW and BATON_CHAOS_SKEW_RATE.
func skewFromEnv() (skewMode, error) {
	m := skewMode{on: true}
	switch s := os.Getenv(envSkew); s {
	case "", "1":
	case "0":
		m.on = false
	default:
		return m, fmt.Errorf("%s=%q: want 0 (off) or 1 (on, the default)", envSkew, s)
	}
	s := os.Getenv(envSkewRate)
	if s == "" {
		return m, nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return m, fmt.Errorf("%s=%q: not a positive rate", envSkewRate, s)
	}
	if !m.on {
		return m, fmt.Errorf("%s=%q with %s=0: a rate needs skew on", envSkewRate, s, envSkew)
	}
	m.rate = v
	return m, nil
}

// defaultHistories is how many seeded histories TestChaos runs in CI.
const defaultHistories = 500

// seeds returns the seeds to run: BATON_CHAOS_SEED, BATON_CHAOS_REPEAT times (default
// 20), or BATON_CHAOS_HISTORIES seeds from BATON_CHAOS_FIRST (default 1).
func seeds(t *testing.T) []int64 { return seedsOr(t, defaultHistories) }

// seedsOr is seeds with def histories by default.
func seedsOr(t *testing.T, def int64) []int64 {
	num := func(name string, def int64) int64 {
		s := os.Getenv(name)
		if s == "" {
			return def
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: not a number: %v", name, s, err)
		}
		return v
	}
	if s := num(envSeed, 0); s != 0 {
		out := make([]int64, num(envRepeat, 20))
		for i := range out {
			out[i] = s
		}
		return out
	}
	n, first := num(envHistories, def), num(envFirst, 1)
	out := make([]int64, n)
	for i := range out {
		out[i] = first + int64(i)
	}
	return out
}

// summary aggregates the results of many histories. Safe for concurrent use.
type summary struct {
	mu         sync.Mutex
	histories  int
	faults     *counters
	terms      int
	writes     int
	refused    int
	late       int
	violations map[string][]int64 // kind -> seeds
	defects    map[string][]int64 // issue 9 defect pattern -> seeds
	notes      int
	maxRecover [2]time.Duration // slowest recovery: [0] plain histories, [1] with a delete or restore
	minGap     time.Duration
	windows    int
	window     time.Duration
	// The kubelet model's (kubelet_test.go).
	kube           bool
	proofs         int
	deathTakeovers int
	finalCrashes   int
	finalDelay     time.Duration // the longest
}

func newSummary() *summary {
	return &summary{faults: newCounters(), violations: make(map[string][]int64), defects: make(map[string][]int64), minGap: -1}
}

func (s *summary) add(h *history, r *result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.histories++
	s.faults.addAll(h.count)
	s.terms += r.terms
	s.writes += r.writes
	s.refused += r.refused
	s.late += r.late
	s.notes += len(r.notes)
	seen := map[string]bool{}
	for _, v := range r.violations {
		if !seen[v.kind] {
			seen[v.kind] = true
			s.violations[v.kind] = append(s.violations[v.kind], h.seed)
		}
		if d := "defect " + v.defect; v.defect != "" && !seen[d] {
			seen[d] = true
			s.defects[d] = append(s.defects[d], h.seed)
		}
	}
	class := 0
	if r.unknown {
		class = 1
	}
	s.maxRecover[class] = max(s.maxRecover[class], r.recovery)
	s.windows += r.windows
	s.window = max(s.window, r.window)
	s.kube = s.kube || h.kube != nil
	s.proofs += r.proofs
	s.deathTakeovers += r.deathTakeovers
	s.finalCrashes += r.finalCrashes
	s.finalDelay = max(s.finalDelay, r.finalDelay)
	if r.minGap >= 0 && (s.minGap < 0 || r.minGap < s.minGap) {
		s.minGap = r.minGap
	}
}

func (s *summary) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%d histories, %d terms, %d fenced writes (%d refused, %d accepted after their term ended)\n",
		s.histories, s.terms, s.writes, s.refused, s.late)
	fmt.Fprintf(&b, "faults injected: %d\n%s", s.faults.total(), s.faults)
	fmt.Fprintf(&b, "slowest recovery after the faults stopped: %v (%v in histories with a delete or restore); smallest gap between two leaders' terms: %v; notes: %d\n",
		s.maxRecover[0], s.maxRecover[1], s.minGap, s.notes)
	fmt.Fprintf(&b, "cold-start fenced windows (a deleted lease re-created by a candidate that never saw it): %d, longest %v\n",
		s.windows, s.window)
	if s.kube {
		fmt.Fprintf(&b, "kubelet model: %d proofs of death delivered, %d takeovers earlier than the lease rules allow (on a death proof); final crashes %d, slowest takeover after the report %v (bound %v)\n",
			s.proofs, s.deathTakeovers, s.finalCrashes, s.finalDelay, deathBound)
	}
	kinds := make([]string, 0, len(s.violations))
	for k := range s.violations {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	total := 0
	for _, k := range kinds {
		seeds := slices.Clone(s.violations[k])
		slices.Sort(seeds)
		total += len(seeds)
		shown := seeds[:min(len(seeds), 20)]
		fmt.Fprintf(&b, "  violation %q in %d histories, seeds %v\n", k, len(seeds), shown)
	}
	fmt.Fprintf(&b, "histories with violations (by kind): %d\n", total)
	ds := make([]string, 0, len(s.defects))
	for d := range s.defects {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	for _, d := range ds {
		seeds := slices.Clone(s.defects[d])
		slices.Sort(seeds)
		fmt.Fprintf(&b, "  issue 9 %s pattern in %d histories, seeds %v\n", d, len(seeds), seeds[:min(len(seeds), 30)])
	}
	return b.String()
}

// TestChaos runs seeded random fault histories of 3 to 5 electors on the in-memory
// store, each in a synctest bubble, and checks every history (see doc.go).
func TestChaos(t *testing.T) {
	skew, err := skewFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sum := newSummary()
	list := seeds(t)
	if os.Getenv(envSeed) == "" && os.Getenv(envHistories) == "" && os.Getenv(envFirst) == "" {
		list = append(list, chaosSeeds...)
	}
	t.Run("history", func(t *testing.T) {
		for i, seed := range list {
			name := strconv.FormatInt(seed, 10)
			if os.Getenv(envSeed) != "" {
				name += "/" + strconv.Itoa(i)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				h := runMemory(t, seed, skew)
				res := check(h)
				sum.add(h, res)
				if len(res.violations) > 0 {
					t.Error(report(h, res))
				} else if os.Getenv(envSeed) != "" && i == 0 {
					t.Log(report(h, res))
				}
			})
		}
	})
	t.Logf("chaos summary (wall %v):\n%s", time.Since(start).Round(time.Millisecond), sum)
}

// chaosSeeds are seeds found by soaks of TestChaos outside the default range, which CI
// runs after it. Seed 20509 (the one failure in seeds 20001 to 21000) gave two leaders
// for 1.57ms: c0's watch was down for 2.9s while c1 renewed; an etcd restore put back,
// 23ms before c0's expiry wait for it ran out, exactly the state of c1's that c0 had
// seen last, at its resourceVersion, and c0's compare-and-swap on it matched while c1
// still led (leaderelection.TestBlindFollowerAfterRestore). Seed 34712 (one of seeds
// 30301 to 35300) gave two leaders for 6.8s: c0 led term 17, was cut off, and the
// Lease was deleted by hand; c2, restarted, found it absent on its first look and
// created it; the Create's reply was lost, c2 saw its own record on its watch and took
// it back at once (term 22), as a recent write of its own, while c0's term ran on. The
// elector now waits out the record of a Create whose answer never came
// (leaderelection.TestLostReplyCreateAfterWatchedHolder), and the checker no longer
// takes an incarnation's own record for a sight of the lease
// (TestFaultStoreOwnWritesAreNotSeeing): it had counted the overlap as defect 1
// rather than as the cold-start window. Seed 59596 (10000-history soak) gave two
// leaders for 534ms: c1, paused, sent an acquiring write that hung 1.4s; its watch had
// broken meanwhile, but the loop read the close only after the write returned, so the
// gap in its watching looked 40ms long, and it took at once a listed release that an
// etcd restore had put back over c2's acquisition
// (leaderelection.TestBusyFollowerMissesClose). Seed 68089 (10000-history soak) gave
// two leaders for 566µs: c0 was paused for 15.7s, its watch events held; its expiry
// wait on c1's state ran out inside the pause, and its compare-and-swap on that state,
// held until the resume, matched because an etcd restore had put the state back over
// c1's later renewals, while c1's term ran on. The term started on the answer, before
// the held events arrived; it now starts only once the watch has delivered the
// write's own event and everything before it
// (leaderelection.TestStalledWatchAcquireAfterRestore).
var chaosSeeds = []int64{20509, 34712, 59596, 68089}

// TestChaosCreateRace runs the create-race histories (createRaceOpts): hand deletes,
// often right after a Create, lagging watches and slow requests against three
// candidates, the class in which a Create answered before the watch showed the states
// around it gave two leaders. CI runs the seeds below (the first found that history);
// BATON_CHAOS_HISTORIES and BATON_CHAOS_FIRST soak, BATON_CHAOS_SEED replays one.
func TestChaosCreateRace(t *testing.T) {
	list := createRaceSeeds
	if os.Getenv(envSeed) != "" || os.Getenv(envHistories) != "" {
		list = seeds(t)
	}
	sum := newSummary()
	t.Run("history", func(t *testing.T) {
		for i, seed := range list {
			t.Run(strconv.Itoa(i)+"/"+strconv.FormatInt(seed, 10), func(t *testing.T) {
				t.Parallel()
				h := runWith(t, seed, createRaceOpts)
				res := check(h)
				sum.add(h, res)
				if len(res.violations) > 0 {
					t.Error(report(h, res))
				}
			})
		}
	})
	t.Logf("create-race summary:\n%s", sum)
}

// createRaceSeeds are the create-race seeds CI runs. Seed 206 gives two leaders on an
// elector that leads on a Create's answer before its watch showed the Create (issue
// 19): c2 created and led, the lease was deleted 43ms later, and c0's delayed Create,
// sent on the same absence, landed on the absent lease; c0's lagging watch had shown
// neither, and c0 led beside c2 for 74ms. Seeds 663, 972, 1428 and 1675 are the
// other histories of seeds 1 to 3000 that gave two leaders on that elector.
var createRaceSeeds = []int64{206, 663, 972, 1428, 1675, 1, 2, 3}

// defaultKubeletHistories is how many kubelet histories TestChaosKubelet runs in CI.
const defaultKubeletHistories = 60

// TestChaosKubelet runs the kubelet model's histories (kubelet_test.go): the
// in-memory server's faults, with each candidate a container whose incarnations the
// kubelet reports terminated only after they stopped (at once, late, never, without
// the incarnation's line), stale statuses of older incarnations, pods force-deleted
// while their process runs, pod watches that lag and break; each history ends with a
// crash of the settled leader, reported within a second. The checker adds to the
// others: no takeover earlier than the lease rules allow but on a proof of the
// holder's incarnation's death delivered to the taker, with that process stopped; no
// proof of a live incarnation; the final crash taken over within deathBound of its
// report. A crashed candidate's container restarts, in half the crashes, as a client-go
// build of the same identity for its down time (clientGoRenew): it renews the lease
// keeping the dead incarnation's acquireTime and annotations, and no takeover earlier
// than the lease rules allow may replace one of its writes. CI runs seeds 1 to 60; BATON_CHAOS_HISTORIES and BATON_CHAOS_FIRST soak,
// BATON_CHAOS_SEED replays one.
func TestChaosKubelet(t *testing.T) {
	skew, err := skewFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	sum := newSummary()
	t.Run("history", func(t *testing.T) {
		for i, seed := range seedsOr(t, defaultKubeletHistories) {
			name := strconv.FormatInt(seed, 10)
			if os.Getenv(envSeed) != "" {
				name += "/" + strconv.Itoa(i)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				h := runKubelet(t, seed, skew)
				res := check(h)
				sum.add(h, res)
				if len(res.violations) > 0 {
					t.Error(report(h, res))
				} else if os.Getenv(envSeed) != "" && i == 0 {
					t.Log(report(h, res))
				}
			})
		}
	})
	t.Logf("kubelet summary (wall %v):\n%s", time.Since(start).Round(time.Millisecond), sum)
	if os.Getenv(envSeed) == "" && (sum.deathTakeovers == 0 || sum.finalCrashes == 0) {
		t.Errorf("%d takeovers on a death proof, %d final crashes: the death signal was not exercised", sum.deathTakeovers, sum.finalCrashes)
	}
	if os.Getenv(envSeed) == "" && (sum.faults.get(fClientGoRenew) == 0 || sum.faults.get(fWatchSkipped) == 0) {
		t.Errorf("%d same-identity client-go renews, %d watch events after skipped states: the shapes were not exercised",
			sum.faults.get(fClientGoRenew), sum.faults.get(fWatchSkipped))
	}
}

// runKubelet runs the kubelet history of seed, with clock skew as skew says, on a
// fresh in-memory server in a synctest bubble.
func runKubelet(t *testing.T, seed int64, skew skewMode) *history {
	var h *history
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x6b75))
		opts := kubeletOpts
		opts.skew = skew
		sched := newSchedule(rng, opts)
		srv := newMemServer("chaos")
		h = runHistory(seed, sched, world{
			srv: srv, mem: srv, lease: "chaos", test: "TestChaosKubelet", kube: true,
			view: func(who string) leaderelection.LeaseStore { return srv.as(who) },
		})
	})
	return h
}

// runWith runs the history of seed drawn with opts (clock skew off) on a fresh
// in-memory server in a synctest bubble.
func runWith(t *testing.T, seed int64, opts scheduleOpts) *history {
	var h *history
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(seed), 0xc4ea))
		sched := newSchedule(rng, opts)
		srv := newMemServer("chaos")
		h = runHistory(seed, sched, world{
			srv: srv, mem: srv, lease: "chaos", test: "TestChaosCreateRace",
			view: func(who string) leaderelection.LeaseStore { return srv.as(who) },
		})
	})
	return h
}

// runMemory runs the history of seed, with clock skew as skew says, on a fresh
// in-memory server in a synctest bubble.
func runMemory(t *testing.T, seed int64, skew skewMode) *history {
	var h *history
	synctest.Test(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(uint64(seed), 0xba70))
		opts := memoryOpts
		opts.skew = skew
		sched := newSchedule(rng, opts)
		srv := newMemServer("chaos")
		h = runHistory(seed, sched, world{
			srv: srv, mem: srv, lease: "chaos", test: "TestChaos",
			view: func(who string) leaderelection.LeaseStore { return srv.as(who) },
		})
	})
	return h
}
