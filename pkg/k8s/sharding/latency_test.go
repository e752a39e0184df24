package sharding_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// writeLatency is how long every write of a shard Lease takes in TestSharderHandOverTime.
const writeLatency = 20 * time.Millisecond

// slowLease is a shard Lease store whose writes (Create, Update) each take
// writeLatency before they land; any number run at once, as on an API server that is
// not saturated. Reads and watches are immediate.
type slowLease struct {
	leaderelection.LeaseStore
}

func (s slowLease) wait(ctx context.Context) error {
	t := time.NewTimer(writeLatency)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s slowLease) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if err := s.wait(ctx); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	return s.LeaseStore.Create(ctx, r)
}

func (s slowLease) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if err := s.wait(ctx); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	return s.LeaseStore.Update(ctx, r)
}

// TestSharderHandOverTime: a planned move costs each shard two Lease writes, its
// release and its take, and the shards of one rebalance move at once. On stores whose
// every write takes writeLatency: no shard of a join, a graceful leave or a rolling
// replacement is without an owner for more than two write latencies plus a little; a
// join is balanced two write latencies after the first moved shard's term ended,
// however many shards move; a leaving replica's Run returns one write latency after
// its context ended. A Sharder that handed its shards over one after another fails
// the last two (checked: join 180ms, leave 90ms); a new owner that waited for a timer
// or for its own view of the members, instead of taking a release to it on its watch
// event, fails the first.
func TestSharderHandOverTime(t *testing.T) {
	// Two writes, and the fake time's scheduling; one more write would exceed it.
	const limit = 2*writeLatency + writeLatency/2
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		mem := sharding.NewMemoryStores(testShards)
		stores := sharding.Stores{
			Shard:   func(i int) leaderelection.LeaseStore { return slowLease{mem.Shard(i)} },
			Members: mem.Members,
		}
		replicas := map[string]*replica{}
		start := func(id string) { replicas[id] = startReplica(t, stores, id, h) }
		defer func() {
			for _, r := range replicas {
				r.stop()
			}
		}()
		start("a")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "start of a", "a")

		// b joins: 8 of a's 16 shards move to it at once.
		phase := time.Now()
		start("b")
		moveWithin(t, h, "join of b", limit, "a", "b")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "join of b", "a", "b")
		if worst := h.CheckGaps(t, "join of b", phase, limit); worst == 0 {
			t.Fatal("join of b: no shard moved")
		}

		// c and d join: each takes 4.
		phase = time.Now()
		start("c")
		start("d")
		moveWithin(t, h, "join of c and d", limit, "a", "b", "c", "d")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "join of c and d", "a", "b", "c", "d")
		h.CheckGaps(t, "join of c and d", phase, limit)

		// a leaves gracefully: its 4 shards go to the three others at once.
		phase = time.Now()
		replicas["a"].stop()
		delete(replicas, "a")
		// Its Run returns once the releases of its shards were written: one write's
		// time if they went out at once.
		if took := time.Since(phase); took > writeLatency+writeLatency/2 {
			t.Errorf("graceful leave of a: Run returned %v after its context ended, want at most %v (one release write)", took, writeLatency+writeLatency/2)
		}
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "graceful leave of a", "b", "c", "d")
		h.CheckGaps(t, "graceful leave of a", phase, limit)

		// b is replaced: e starts, then b leaves.
		phase = time.Now()
		start("e")
		time.Sleep(5 * time.Second)
		replicas["b"].stop()
		delete(replicas, "b")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "replacement of b by e", "c", "d", "e")
		h.CheckGaps(t, "replacement of b by e", phase, limit)

		for _, r := range replicas {
			r.stop()
		}
		h.CheckNoOverlap(t)
		h.CheckAllEnded(t)
	})
}

// moveWithin waits for the first term of a move to end, then until h shows the shards
// balanced over members, and fails t if that took longer than limit, or if nothing
// changed within a second.
func moveWithin(t *testing.T, h *shardingtest.History, phase string, limit time.Duration, members ...string) {
	t.Helper()
	select {
	case <-h.Changed():
	case <-time.After(time.Second):
		t.Fatalf("%s: no shard moved within a second", phase)
	}
	start := time.Now()
	deadline := time.After(time.Second)
	for {
		changed := h.Changed()
		if _, err := h.Balanced(members...); err == nil {
			break
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("%s: not balanced over %v a second after the first shard moved", phase, members)
		}
	}
	if took := time.Since(start); took > limit {
		t.Errorf("%s: balanced %v after the first shard's term ended, want at most %v (a release and a take, at once for every shard)", phase, took, limit)
	} else {
		t.Logf("%s: balanced %v after the first shard's term ended", phase, took)
	}
}
