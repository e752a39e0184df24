package sharded

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/leaderelection/leaderelectiontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// Timing and size of every history.
const (
	shards      = 12
	leaseDur    = 3 * time.Second
	renewDL     = 2 * time.Second
	retryPeriod = 500 * time.Millisecond
	warmUp      = 5 * time.Second  // before the first fault
	faultPhase  = 30 * time.Second // faults start within it; every window ends by its end
	// bound is how long after the faults stop every shard must have one live owner and
	// the shares be within one: a LeaseDuration for the Leases of a crashed or cut-off
	// owner to expire, another for a shard whose Lease was deleted by hand or whose
	// elector's watch broke meanwhile (it then waits as for an unknown holder, from
	// when it looks again), and two RetryPeriods for the backoff of a broken watch and
	// the settle delay of the hand-overs after it. (150 seeds settled within 5.4s.)
	bound = 2*leaseDur + 2*retryPeriod
)

// defaultSeeds are the histories CI runs: 6 is the regression seed of a member Watch
// call that hung; 1071 overlaps two owners in the elector's cold-start window, so
// that CI sees the checker tell it apart. With the shard terms carried by the member
// Lease (docs/design/sharding-renewal.md): 5 gave two owners when a fresh read of a
// member compared with a sign newer than the one its elector judged; 145 left a shard
// Lease deleted under its live holder without owner (the holder never released it);
// 5211 did so when the holder's term ended unseen while its member Lease stayed
// renewed, before a member Lease claimed the shards it renews.
//
// With the owned objects and shard labels: 38 and 150 kept an object labelled with
// another shard by hand after its relabel patch was refused, before the shard
// informers resynced (TestShardedLabelCacheStrayRelabelRetried). 2222 failed the
// checker, not Baton: two slow label writes of one object, both sent before the heal
// (the second mending a stale-shape label a fault wrote while the first was under
// way), landed after it, and were counted as steady-state writes (checkLabelWrites).
// 3620 left a shard without owner past the bound: a hand-off to a replica that had
// just resigned it waited out the resign's hold-back (leaderelection,
// TestHandOverToResignerTakenAtOnce).
var defaultSeeds = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 38, 145, 150, 1071, 2222, 3620, 5211}

// TestShardedChaos runs seeded random histories of a ring of 12 shards on in-memory
// stores, each in a synctest bubble: 3 replicas, then faults for 30s (joins, graceful
// leaves, crashes, pauses, cuts from the store, shard and member Leases deleted by
// hand, watches lagging; 2 to 5 replicas live), then none. Each replica writes its
// shards' objects to a fenced register. The checker (check) fails a history for two
// owners of a shard at once, shard terms not rising, a fenced register that accepted
// a write of an ended term, and, the bound after the faults stopped, a shard without
// one live owner, shares more than one shard apart, or a move or refused write of an
// owner in the LeaseDuration after.
//
// BATON_SEED=N runs seed N alone; BATON_SHARDED_CHAOS_SEEDS=N runs seeds FIRST to
// FIRST+N-1 (BATON_SHARDED_CHAOS_FIRST, default 1) instead of the fixed list (soak).
// A seed replays exactly (TestShardedChaosReplay): it fixes the schedule of faults,
// the electors' retry jitter (sharding.Config.JitterSource), the shard work's writes
// and the latency of every call of every replica (node), so that no two replicas act
// at one instant of fake time.
func TestShardedChaos(t *testing.T) {
	seeds := testseed.Seeds(t, defaultSeeds...)
	if n, err := strconv.Atoi(os.Getenv("BATON_SHARDED_CHAOS_SEEDS")); err == nil && n > 0 {
		first := uint64(1)
		if f, err := strconv.ParseUint(os.Getenv("BATON_SHARDED_CHAOS_FIRST"), 10, 64); err == nil {
			first = f
		}
		seeds = nil
		for i := range uint64(n) {
			seeds = append(seeds, first+i)
		}
	}
	sum := &summary{faults: map[string]int{}, objStats: map[string]int{}, violations: map[string][]uint64{}}
	t.Cleanup(func() { t.Log(sum) })
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				h := runHistory(t, seed, nil)
				res := check(h.outcome)
				sum.add(seed, h, res)
				if len(res.violations) > 0 {
					var b strings.Builder
					fmt.Fprintf(&b, "seed %d: %d violations\n", seed, len(res.violations))
					for _, v := range res.violations {
						fmt.Fprintf(&b, "  %s: %s\n", v.kind, v.msg)
					}
					fmt.Fprintf(&b, "schedule:\n  %s\n", strings.Join(h.log, "\n  "))
					fmt.Fprintf(&b, "objects:\n  %s\n", strings.Join(h.objLog, "\n  "))
					fmt.Fprintf(&b, "replay: BATON_SEED=%d go test -race -run 'TestShardedChaos$' -v ./test/chaos/sharded", seed)
					t.Error(b.String())
				}
			})
		})
	}
}

// history is one run: what the checker needs and what the summary counts.
type history struct {
	outcome
	log     []string                  // the schedule as run
	faults  map[string]int            // faults injected, by kind
	objLog  []string                  // the objects' schedule as run
	reports []deathReport             // the deaths the kubelet reported
	stats   map[string]sharding.Stats // each replica's counters at stableUntil
}

// deathReport is a replica's death and the kubelet's report of it.
type deathReport struct {
	who            string
	died, reported time.Time
}

// reowned returns, for the shards each reported dead replica led when it died, the
// longest time from the report to the shard's next term, how many shards, and how
// many of them were owned again within promptly of the report (the others met
// another fault meanwhile, e.g. their Lease deleted by hand).
func (h *history) reowned() (longest time.Duration, n, fast int) {
	for _, r := range h.reports {
		for _, s := range h.spans {
			if s.who != r.who || !s.end.Equal(r.died) {
				continue
			}
			var next time.Time
			for _, o := range h.spans {
				if o.shard == s.shard && o.who != r.who && !o.start.Before(r.died) && (next.IsZero() || o.start.Before(next)) {
					next = o.start
				}
			}
			if !next.IsZero() {
				longest, n = max(longest, next.Sub(r.reported)), n+1
				if next.Sub(r.reported) <= promptly {
					fast++
				}
			}
		}
	}
	return longest, n, fast
}

// replica is one Sharder on its node.
type replica struct {
	node        *node
	sharder     *sharding.Sharder
	incarnation string
	cancel      context.CancelFunc
	done        chan struct{}
}

// event is one step of a schedule.
type event struct {
	at   time.Duration
	kind string
	desc string
	do   func()
}

// runHistory runs the history of seed. Every replica's log (Debug) goes to logs when
// it is not nil, else to stderr with BATON_SHARDED_CHAOS_LOG set.
func runHistory(t *testing.T, seed uint64, logs io.Writer) *history {
	rng := rand.New(rand.NewPCG(seed, 0x5ba4dc4a05))
	begin := time.Now()
	stores := sharding.NewMemoryStores(shards)
	rec := &recorder{}
	deaths := newKubelet()
	// Which crashes the kubelet reports, and when, come from a source of their own, so
	// that the schedule of the other faults stays what it was for each seed.
	deathRng := rand.New(rand.NewPCG(seed, 0xdead))
	reg := &register{top: map[int]uint64{}}
	objs := newWorld(seed, begin)
	h := &history{faults: map[string]int{}, stats: map[string]sharding.Stats{}}
	if logs == nil && os.Getenv("BATON_SHARDED_CHAOS_LOG") != "" {
		logs = os.Stderr
	}
	var logger *slog.Logger
	if logs != nil {
		logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	var mu sync.Mutex                 // guards replicas and runs: the schedule starts them, leaves run in goroutines
	replicas := map[string]*replica{} // the current run of each identity
	var runs []*replica               // every run, restarted ones too
	runsOf := map[string]int{}
	var removed sync.Map // identities the schedule crashed, killed or made leave
	remove := func(id string) { removed.Store(id, true) }
	isRemoved := func(id string) bool { _, ok := removed.Load(id); return ok }
	start := func(id string) {
		n := newNode(id, shards, seed)
		mu.Lock()
		runsOf[id]++
		inc := id
		if runsOf[id] > 1 {
			inc = fmt.Sprintf("%s/%d", id, runsOf[id]) // a restart: same identity, new incarnation
		}
		mu.Unlock()
		var lg *slog.Logger
		if logger != nil {
			lg = logger.With("replica", id)
		}
		c := newCtl(inc, n)
		objs.add(c)
		shardWork := work(rec, reg, n, retryPeriod, seed)
		s, err := sharding.NewWithStores(sharding.Config{
			Identity: id, Name: "ring", Namespace: "default", Shards: shards,
			LeaseDuration: leaseDur, RenewDeadline: renewDL, RetryPeriod: retryPeriod,
			JitterSource: func(shard int) rand.Source { return rand.NewPCG(seed, replicaNumber(id)<<16|uint64(shard)) },
			Incarnation:  inc, DeathWatch: deaths.watch(),
		}, n.stores(stores), sharding.Callbacks{OnAcquired: func(ctx context.Context) {
			c.acquired(ctx)
			shardWork(ctx)
		}}, lg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{node: n, sharder: s, incarnation: inc, cancel: cancel, done: make(chan struct{})}
		mu.Lock()
		replicas[id] = r
		runs = append(runs, r)
		mu.Unlock()
		go func() {
			defer close(r.done)
			if err := s.Run(ctx); err != nil {
				t.Errorf("%s: Run: %v", id, err)
			}
		}()
	}
	get := func(id string) *replica {
		mu.Lock()
		defer mu.Unlock()
		return replicas[id]
	}
	stopAll := func() {
		mu.Lock()
		all := slices.Clone(runs)
		mu.Unlock()
		for _, r := range all {
			r.node.setPaused(false)
			r.node.setCut(false, false)
			r.node.setLag(0)
			r.cancel()
		}
		for _, r := range all {
			<-r.done
		}
	}
	defer stopAll() // also after a Fatal, so that the bubble's goroutines end

	// The schedule, drawn in time order over a simulation of who is live, and
	// resolved to replicas as it is drawn, so that a seed fixes it.
	heal := warmUp + faultPhase
	var events []event
	live := []string{"r0", "r1", "r2"}
	next := 3
	busy := map[string]time.Duration{} // node+kind -> end of its window
	nFaults := 8 + rng.IntN(8)
	times := make([]time.Duration, nFaults)
	for i := range times {
		times[i] = warmUp + time.Duration(rng.Int64N(int64(faultPhase)))
	}
	slices.Sort(times)
	pick := func() string { return live[rng.IntN(len(live))] }
	window := func(at time.Duration, kind, id string, d time.Duration, on, off func()) {
		end := min(at+d, heal)
		if busy[id+kind] > at {
			return // one window of a kind per replica at a time
		}
		busy[id+kind] = end
		events = append(events,
			event{at: at, kind: kind, desc: fmt.Sprintf("%s %s for %v", kind, id, end-at), do: on},
			event{at: end, desc: fmt.Sprintf("end of %s %s", kind, id), do: off})
	}
	for _, at := range times {
		switch k := rng.IntN(9); {
		case k == 0 && len(live) < 5 || len(live) < 3:
			id := fmt.Sprintf("r%d", next)
			next++
			live = append(live, id)
			events = append(events, event{at: at, kind: "join", desc: "join " + id, do: func() { start(id) }})
		case k == 1:
			id := pick()
			live = slices.DeleteFunc(live, func(s string) bool { return s == id })
			events = append(events, event{at: at, kind: "leave", desc: "leave " + id, do: func() {
				remove(id)
				go get(id).cancel() // a leave takes its time; the others act meanwhile
			}})
		case k == 2:
			id := pick()
			live = slices.DeleteFunc(live, func(s string) bool { return s == id })
			if deathRng.IntN(2) == 0 {
				events = append(events, event{at: at, kind: "crash", desc: "crash " + id, do: func() { remove(id); get(id).node.crash() }})
				break
			}
			// The process dies; the kubelet reports its container terminated a moment
			// later, and the others take its shards then (the death signal).
			d := min(time.Duration(deathRng.Int64N(int64(time.Second))), heal-at)
			events = append(events,
				event{at: at, kind: "death", desc: "kill " + id, do: func() { remove(id); get(id).node.die() }},
				event{at: at + d, desc: fmt.Sprintf("kubelet reports %s dead after %v", id, d), do: func() {
					deaths.report(get(id).incarnation)
					h.reports = append(h.reports, deathReport{who: id, died: get(id).node.deathTime(), reported: time.Now()})
				}})
		case k == 3:
			id, d := pick(), leaseDur/4+time.Duration(rng.Int64N(int64(2*leaseDur)))
			window(at, "pause", id, d, func() { get(id).node.setPaused(true) }, func() { get(id).node.setPaused(false) })
		case k == 4:
			id, d, hang := pick(), leaseDur/4+time.Duration(rng.Int64N(int64(2*leaseDur))), rng.IntN(2) == 0
			kind := "cut"
			if hang {
				kind = "cut (hanging)"
			}
			window(at, kind, id, d, func() { get(id).node.setCut(true, hang) }, func() { get(id).node.setCut(false, false) })
		case k == 5:
			id, d := pick(), leaseDur/2+time.Duration(rng.Int64N(int64(2*leaseDur)))
			lag := 20*time.Millisecond + time.Duration(rng.Int64N(int64(leaseDur/3)))
			window(at, "watch lag", id, d, func() { get(id).node.setLag(lag) }, func() { get(id).node.setLag(0) })
			events[len(events)-2].desc += fmt.Sprintf(" (%v)", lag)
		case k == 6 || k == 7:
			var which []int
			for range 1 + rng.IntN(3) {
				which = append(which, rng.IntN(shards))
			}
			events = append(events, event{at: at, kind: "shard lease deleted", desc: fmt.Sprint("delete shard leases ", which), do: func() {
				for _, s := range which {
					leaderelectiontest.Delete(stores.Shard(s).(*leaderelection.MemoryStore))
				}
			}})
		default:
			id := pick()
			events = append(events, event{at: at, kind: "member lease deleted", desc: "delete member lease of " + id, do: func() {
				if err := stores.Members.Leave(context.Background(), id); err != nil {
					t.Errorf("deleting the member lease of %s: %v", id, err)
				}
			}})
		}
	}
	applied := func(kind string) { h.faults[kind]++ } // on the schedule's goroutine
	events = append(events, renewalFaults(seed, get, start, isRemoved, applied, deaths)...)
	slices.SortStableFunc(events, func(a, b event) int { return int(a.at - b.at) })

	objsDone := make(chan struct{})
	go objs.run(objs.schedule(), begin.Add(heal+bound), begin.Add(heal+bound+leaseDur), objsDone)
	defer func() { <-objsDone }()
	for _, id := range []string{"r0", "r1", "r2"} {
		start(id)
	}
	for _, ev := range events {
		time.Sleep(time.Until(begin.Add(ev.at)))
		h.log = append(h.log, fmt.Sprintf("%v %s", ev.at, ev.desc))
		if ev.kind != "" {
			h.faults[ev.kind]++
		}
		ev.do()
	}
	time.Sleep(time.Until(begin.Add(heal)))
	h.begin, h.shards, h.live = begin, shards, slices.Sorted(slices.Values(live))
	h.heal = time.Now()
	h.checkAt = h.heal.Add(bound)
	h.stableUntil = h.checkAt.Add(leaseDur)
	time.Sleep(time.Until(h.stableUntil))
	h.spans, h.ops = rec.snapshot()
	<-objsDone
	h.objs, h.objLog = objs.out, objs.log
	for k, n := range objs.faults {
		h.faults[k] += n
	}
	mu.Lock()
	for id, r := range replicas {
		h.stats[id] = r.sharder.Stats()
	}
	mu.Unlock()
	stopAll()
	return h
}

// renewalFaults are the faults of the member Lease that carries the shard terms
// (docs/design/sharding-renewal.md), drawn from a source of their own so that the
// other faults of a seed stay as they were: a window in which one of r0 to r2 cannot
// renew its member Lease while its shard Leases are untouched, and a restart of one
// of them with the same identity (its process dies, a new run with another
// incarnation starts 0 to 1s later; half of the time the kubelet reports the old run
// dead as the new one starts). Each applies only to a replica still running its
// first run, not left, crashed or cut off, and is counted (applied) only then.
func renewalFaults(seed uint64, get func(string) *replica, start func(string), removed func(string) bool, applied func(kind string),
	deaths *kubelet) []event {
	rng := rand.New(rand.NewPCG(seed, 0x11fe))
	at := func() time.Duration { return warmUp + time.Duration(rng.Int64N(int64(faultPhase))) }
	first := func(id string) bool { r := get(id); return r.incarnation == id && !removed(id) && !r.node.stopped() }
	failID, failAt := fmt.Sprint("r", rng.IntN(3)), at()
	d := min(leaseDur/4+time.Duration(rng.Int64N(int64(2*leaseDur))), warmUp+faultPhase-failAt)
	restartID, restartAt := fmt.Sprint("r", rng.IntN(3)), at()
	delay, report := time.Duration(rng.Int64N(int64(time.Second))), rng.IntN(2) == 0
	var failing *node
	return []event{
		{at: failAt, desc: fmt.Sprintf("member renewals of %s fail for %v", failID, d), do: func() {
			if first(failID) {
				applied("member renewals fail")
				failing = get(failID).node
				failing.setMemberFail(true)
			}
		}},
		{at: failAt + d, desc: "end of member renewals failing of " + failID, do: func() {
			if failing != nil {
				failing.setMemberFail(false)
			}
		}},
		{at: restartAt, desc: fmt.Sprintf("restart %s after %v (reported: %v)", restartID, delay, report), do: func() {
			if first(restartID) {
				applied("restart")
				get(restartID).node.die()
				time.AfterFunc(delay, func() {
					if removed(restartID) {
						return // the schedule crashed it or made it leave meanwhile
					}
					if report {
						deaths.report(get(restartID).incarnation)
					}
					start(restartID)
				})
			}
		}},
	}
}

// promptly is how soon after the kubelet's report a dead replica's shard is owned
// again when no other fault intervenes: a few in-memory writes.
const promptly = 10 * time.Millisecond

// replicaNumber is N of replica "rN".
func replicaNumber(id string) uint64 {
	n, err := strconv.ParseUint(strings.TrimPrefix(id, "r"), 10, 64)
	if err != nil {
		panic("replica " + id + " is not named rN")
	}
	return n
}

// summary adds up the histories of a run. Safe for concurrent use.
type summary struct {
	// mu guards the fields below.
	mu                             sync.Mutex
	histories, terms, writes, late int
	refused, coldOverlaps          int
	handedOff                      int // shard terms started on a hand-off, without a write
	coldLongest, settledMax        time.Duration
	settledSeed                    uint64
	reowned, reownedFast           int           // shards of replicas reported dead; of them, owned again promptly
	reownedMax                     time.Duration // the longest from a report to such a shard's next term
	reownedSeed                    uint64
	coldSeeds                      []uint64
	faults                         map[string]int
	objStats                       map[string]int // the objects' counters
	violations                     map[string][]uint64
}

func (s *summary) add(seed uint64, h *history, r *result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.histories++
	s.terms += len(h.spans)
	for _, st := range h.stats {
		s.handedOff += int(st.HandedOff)
	}
	s.writes += len(h.ops)
	s.late += r.late
	s.refused += r.refused
	s.coldOverlaps += r.coldOverlaps
	s.coldLongest = max(s.coldLongest, r.coldLongest)
	longest, n, fast := h.reowned()
	s.reowned, s.reownedFast = s.reowned+n, s.reownedFast+fast
	if n > 0 && longest >= s.reownedMax {
		s.reownedMax, s.reownedSeed = longest, seed
	}
	if r.coldOverlaps > 0 {
		s.coldSeeds = append(s.coldSeeds, seed)
	}
	if r.settled >= s.settledMax {
		s.settledMax, s.settledSeed = r.settled, seed
	}
	for k, n := range h.faults {
		s.faults[k] += n
	}
	s.addObjects(h)
	for _, v := range r.violations {
		if seeds := s.violations[v.kind]; len(seeds) == 0 || seeds[len(seeds)-1] != seed {
			s.violations[v.kind] = append(seeds, seed)
		}
	}
}

func (s *summary) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%d histories: %d shard terms (%d on a one-write hand-off), %d fenced writes (%d refused, %d accepted late: after their term ended, before a newer term wrote)\n",
		s.histories, s.terms, s.handedOff, s.writes, s.refused, s.late)
	fmt.Fprintf(&b, "faults: %v\n", s.faults)
	fmt.Fprintf(&b, "overlaps in the elector's cold-start window (tolerated): %d, longest %v, seeds %v\n", s.coldOverlaps, s.coldLongest, s.coldSeeds)
	fmt.Fprintf(&b, "shards of replicas the kubelet reported dead: %d, %d owned again within %v of the report, the longest after %v (seed %d)\n",
		s.reowned, s.reownedFast, promptly, s.reownedMax, s.reownedSeed)
	fmt.Fprintf(&b, "objects: %v\n", s.objStats)
	fmt.Fprintf(&b, "slowest to settle after the faults stopped: %v (seed %d; bound %v)\n", s.settledMax, s.settledSeed, bound)
	if len(s.violations) == 0 {
		b.WriteString("violations: none")
	}
	for _, k := range slices.Sorted(maps.Keys(s.violations)) {
		fmt.Fprintf(&b, "violations: %s: %d histories, seeds %v\n", k, len(s.violations[k]), s.violations[k])
	}
	return b.String()
}
