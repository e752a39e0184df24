package sharded

import (
	"context"
	"fmt"
	"log/slog"
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
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// shapes are the numbers of shards of the replicas of a shapes history: one ring's
// Leases, two shapes (a rolling update that changes Shards, or a wrong manifest).
var shapes = [2]int{shards, 8}

// shapesBound is how long after the faults stop the shapes are checked settled: the
// base suite's bound and a LeaseDuration more. A replica cut off past its member
// Lease's RenewDeadline resigns its shards and must be admitted again once back
// (see docs/design/sharding.md, # Ring shape); back, it sees the member Leases afresh and
// counts a member that crashed meanwhile live for a LeaseDuration, and hands it a
// shard that then waits a LeaseDuration for it (seed 248: settled at 43.3s, past
// the base bound's 42s).
const shapesBound = bound + leaseDur

// defaultShapeSeeds are the shapes histories CI runs: 92 is the regression seed of
// a replica whose member Lease's renew deadline passed during a renew held by a
// pause, and which, judging by the time before the renew, stayed admitted and took
// shards of S=12 beside an admitted S=8 replica (667 of 2,000 objects owned twice);
// 867 is the regression seed of a leaving S=12 replica, cut off while it marked its
// member Lease leaving, that took two shards released naming it after its renew
// deadline had passed (Run's loop, which ends the admission, no longer ran) beside
// an admitted S=8 replica (88 objects owned twice; found by a 2000-seed soak at the
// code of one-write hand-overs and after); 3424 is the regression seed of an S=12
// replica, cut off and then paused before its admission, that admitted itself at its
// resume on a view its watch had delayed 3.4s (682 objects owned twice; found by a
// soak of seeds 2001-4000); 248 settles last.
var defaultShapeSeeds = []uint64{1, 2, 3, 4, 5, 6, 92, 248, 867, 3424}

// TestShardedChaosShapes runs seeded histories of one ring whose replicas use two
// shapes, S=12 and S=8, sharing the ring's Leases (issue 25, defect 3): 2 replicas at
// S=12, then for 30s joins of either shape, graceful leaves, crashes, pauses, cuts
// from the store and lagging watches (1 to 5 replicas live), then none. It fails a
// history in which an object (of 2,000 UIDs) was owned by two replicas at any
// instant, or in which, shapesBound after the faults stopped, the live replicas of the
// shape that leads do not lead all its shards, or a replica of the other shape leads
// one. Shard and member Leases are not deleted by hand here: deleting a member Lease
// hides its replica's shape (see docs/design/sharding.md, # Ring shape).
//
// BATON_SEED=N runs seed N alone; BATON_SHARDED_SHAPES_SEEDS=N runs seeds FIRST to
// FIRST+N-1 (BATON_SHARDED_CHAOS_FIRST, default 1) instead of the fixed list (soak).
func TestShardedChaosShapes(t *testing.T) {
	seeds := testseed.Seeds(t, defaultShapeSeeds...)
	if n, err := strconv.Atoi(os.Getenv("BATON_SHARDED_SHAPES_SEEDS")); err == nil && n > 0 {
		first := uint64(1)
		if f, err := strconv.ParseUint(os.Getenv("BATON_SHARDED_CHAOS_FIRST"), 10, 64); err == nil {
			first = f
		}
		seeds = nil
		for i := range uint64(n) {
			seeds = append(seeds, first+i)
		}
	}
	uids := make([]string, 2000)
	urng := rand.New(rand.NewPCG(25, 3))
	for i := range uids {
		uids[i] = fmt.Sprintf("%016x-%d", urng.Uint64(), i)
	}
	var mu sync.Mutex
	var terms, failed int
	var refusals uint64
	t.Cleanup(func() {
		t.Logf("%d shapes histories: %d shard terms, %d refusals to campaign, %d failed", len(seeds), terms, refusals, failed)
	})
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				n, refused, problems := runShapesHistory(t, seed, uids)
				mu.Lock()
				terms, refusals = terms+n, refusals+refused
				if len(problems) > 0 {
					failed++
				}
				mu.Unlock()
				if len(problems) > 0 {
					t.Errorf("seed %d:\n  %s\nreplay: BATON_SEED=%d go test -race -run 'TestShardedChaosShapes$' -v ./test/chaos/sharded",
						seed, strings.Join(problems, "\n  "), seed)
				}
			})
		})
	}
}

// shapeReplica is one replica of a shapes history.
type shapeReplica struct {
	node    *node
	shards  int
	sharder *sharding.Sharder
	cancel  context.CancelFunc
	done    chan struct{}
}

// runShapesHistory runs seed's history and returns its number of shard terms, of
// refusals, and what went wrong (the schedule appended).
func runShapesHistory(t *testing.T, seed uint64, uids []string) (terms int, refusals uint64, problems []string) {
	rng := rand.New(rand.NewPCG(seed, 0x5a9e5))
	begin := time.Now()
	stores := sharding.NewMemoryStores(shards)
	log := &shardingtest.Shapes{}
	var mu sync.Mutex // guards replicas
	replicas := map[string]*shapeReplica{}
	start := func(id string, s int) {
		n := newNode(id, shards, seed)
		ring, _ := sharding.NewRing(s)
		sh, err := sharding.NewWithStores(sharding.Config{
			Identity: id, Name: "ring", Namespace: "default", Shards: s,
			LeaseDuration: leaseDur, RenewDeadline: renewDL, RetryPeriod: retryPeriod,
			JitterSource: func(shard int) rand.Source { return rand.NewPCG(seed, replicaNumber(id)<<16|uint64(shard)) },
		}, n.stores(stores), sharding.Callbacks{OnAcquired: log.OnAcquired(id, ring)}, shapesLogger(id, s))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &shapeReplica{node: n, shards: s, sharder: sh, cancel: cancel, done: make(chan struct{})}
		mu.Lock()
		replicas[id] = r
		mu.Unlock()
		go func() {
			defer close(r.done)
			if err := sh.Run(ctx); err != nil {
				t.Errorf("%s: Run: %v", id, err)
			}
		}()
	}
	get := func(id string) *shapeReplica {
		mu.Lock()
		defer mu.Unlock()
		return replicas[id]
	}
	defer func() {
		mu.Lock()
		all := slices.Collect(func(yield func(*shapeReplica) bool) {
			for _, r := range replicas {
				if !yield(r) {
					return
				}
			}
		})
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
	}()

	events, live, schedule := shapesSchedule(rng, start, get)
	start("r0", shapes[0])
	start("r1", shapes[0])
	for _, ev := range events {
		time.Sleep(time.Until(begin.Add(ev.at)))
		ev.do()
	}
	time.Sleep(time.Until(begin.Add(warmUp + faultPhase + shapesBound)))
	problems = checkShapesSettled(live, get)
	mu.Lock()
	for _, r := range replicas {
		refusals += r.sharder.Stats().ShapeRefusals
	}
	mu.Unlock()
	if n := log.DoublyOwned(uids); n > 0 {
		problems = append(problems, fmt.Sprintf("%d of %d objects owned by two replicas at once", n, len(uids)))
	}
	if len(problems) > 0 {
		problems = append(problems, "schedule:", strings.Join(schedule, "\n  "))
	}
	return log.Terms(), refusals, problems
}

// shapesSchedule draws the faults of a shapes history over a simulation of who is
// live; it returns them in time order, the replicas live at the end and the schedule.
func shapesSchedule(rng *rand.Rand, start func(string, int), get func(string) *shapeReplica) ([]event, []string, []string) {
	var events []event
	live := []string{"r0", "r1"}
	next := 2
	busy := map[string]time.Duration{}
	heal := warmUp + faultPhase
	times := make([]time.Duration, 8+rng.IntN(8))
	for i := range times {
		times[i] = warmUp + time.Duration(rng.Int64N(int64(faultPhase)))
	}
	slices.Sort(times)
	pick := func() string { return live[rng.IntN(len(live))] }
	window := func(at time.Duration, kind, id string, d time.Duration, on, off func()) {
		end := min(at+d, heal)
		if busy[id+kind] > at {
			return
		}
		busy[id+kind] = end
		events = append(events, event{at: at, desc: fmt.Sprintf("%v %s %s for %v", at, kind, id, end-at), do: on},
			event{at: end, desc: fmt.Sprintf("%v end of %s %s", end, kind, id), do: off})
	}
	for _, at := range times {
		switch k := rng.IntN(6); {
		case k <= 1 && len(live) < 5 || len(live) < 2:
			id, s := fmt.Sprintf("r%d", next), shapes[rng.IntN(2)]
			next++
			live = append(live, id)
			events = append(events, event{at: at, desc: fmt.Sprintf("%v join %s at S=%d", at, id, s), do: func() { start(id, s) }})
		case k == 2:
			id := pick()
			live = slices.DeleteFunc(live, func(s string) bool { return s == id })
			events = append(events, event{at: at, desc: fmt.Sprintf("%v leave %s", at, id), do: func() { go get(id).cancel() }})
		case k == 3 && len(live) > 1:
			id := pick()
			live = slices.DeleteFunc(live, func(s string) bool { return s == id })
			events = append(events, event{at: at, desc: fmt.Sprintf("%v crash %s", at, id), do: func() { get(id).node.crash() }})
		case k == 4:
			id, d, hang := pick(), leaseDur/4+time.Duration(rng.Int64N(int64(2*leaseDur))), rng.IntN(2) == 0
			window(at, "cut", id, d, func() { get(id).node.setCut(true, hang) }, func() { get(id).node.setCut(false, false) })
		default:
			id, d := pick(), leaseDur/4+time.Duration(rng.Int64N(int64(2*leaseDur)))
			if rng.IntN(2) == 0 {
				window(at, "pause", id, d, func() { get(id).node.setPaused(true) }, func() { get(id).node.setPaused(false) })
			} else {
				lag := 20*time.Millisecond + time.Duration(rng.Int64N(int64(leaseDur/3)))
				window(at, "watch lag", id, d, func() { get(id).node.setLag(lag) }, func() { get(id).node.setLag(0) })
			}
		}
	}
	slices.SortStableFunc(events, func(a, b event) int { return int(a.at - b.at) })
	schedule := make([]string, len(events))
	for i, ev := range events {
		schedule[i] = ev.desc
	}
	return events, live, schedule
}

// checkShapesSettled checks the live replicas, the bound after the faults stopped:
// those that lead shards are of one shape and lead all its shards between them; the
// others lead none.
func checkShapesSettled(live []string, get func(string) *shapeReplica) []string {
	owned := map[int]int{} // shape -> shards led
	for _, id := range live {
		r := get(id)
		owned[r.shards] += len(r.sharder.Owned())
	}
	var problems []string
	leading := 0
	for s, n := range owned {
		if n == 0 {
			continue
		}
		leading++
		if n != s {
			problems = append(problems, fmt.Sprintf("the live replicas of S=%d lead %d shards, want %d", s, n, s))
		}
	}
	if leading != 1 {
		problems = append(problems, fmt.Sprintf("shards led by shape: %v, want one shape leading", owned))
	}
	return problems
}

// shapesLogger returns replica id's logger: Debug to stderr with
// BATON_SHARDED_CHAOS_LOG set, else nil (discarded).
func shapesLogger(id string, s int) *slog.Logger {
	if os.Getenv("BATON_SHARDED_CHAOS_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", id, "S", s)
}
