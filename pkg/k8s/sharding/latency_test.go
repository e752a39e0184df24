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

// writeTime is how long the server of TestSharderHandOverTime takes to apply one
// write of a shard Lease.
const writeTime = 2 * time.Millisecond

// leaseServer applies the writes of a ring's shard Leases one at a time, each taking
// writeTime, as an API server and etcd work through a burst of writes: a write sent
// with k others before it is answered after (k+1)·writeTime. Reads and watches are
// immediate.
type leaseServer struct {
	turn chan struct{} // room for one: the write being applied
}

func newLeaseServer() *leaseServer { return &leaseServer{turn: make(chan struct{}, 1)} }

// apply waits for the server's turn, takes writeTime, and then runs write.
func (v *leaseServer) apply(ctx context.Context, write func() (leaderelection.LeaseRecord, error)) (leaderelection.LeaseRecord, error) {
	select {
	case v.turn <- struct{}{}:
	case <-ctx.Done():
		return leaderelection.LeaseRecord{}, ctx.Err()
	}
	defer func() { <-v.turn }()
	time.Sleep(writeTime)
	return write()
}

// slowLease is a shard Lease store whose writes go through server.
type slowLease struct {
	leaderelection.LeaseStore
	server *leaseServer
}

func (s slowLease) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	return s.server.apply(ctx, func() (leaderelection.LeaseRecord, error) { return s.LeaseStore.Create(ctx, r) })
}

func (s slowLease) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	return s.server.apply(ctx, func() (leaderelection.LeaseRecord, error) { return s.LeaseStore.Update(ctx, r) })
}

// TestSharderHandOverTime: a planned move leaves each shard ownerless for its own
// release and take, not for a burst of the other shards' writes. On shard Leases
// whose server applies writes one at a time (leaseServer), no shard of a join, a
// graceful leave or a rolling replacement is without an owner for more than
// ownerlessLimit, however many shards move, and the joins still balance within
// balanceLimit of the first move. A Sharder that sent all the releases of a rebalance
// at once fails the first: the last shard waited for every release before it
// (checked: a join's 8 shards ownerless up to 16 writes' time).
func TestSharderHandOverTime(t *testing.T) {
	const (
		// Its release and take, each behind a few writes of other shards: the next
		// release of the same replica, the other givers' releases and takes, renewals.
		ownerlessLimit = 12 * writeTime
		// 8 shards from one replica: 8 releases in a row, each take behind the next
		// release, and the other givers' writes between.
		balanceLimit = 25 * writeTime
	)
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		mem := sharding.NewMemoryStores(testShards)
		server := newLeaseServer()
		stores := sharding.Stores{
			Shard:   func(i int) leaderelection.LeaseStore { return slowLease{mem.Shard(i), server} },
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

		// b joins: 8 of a's 16 shards move to it.
		phase := time.Now()
		start("b")
		moveWithin(t, h, "join of b", balanceLimit, "a", "b")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "join of b", "a", "b")
		h.CheckGaps(t, "join of b", phase, ownerlessLimit)

		// c and d join: each takes 4, from a and b.
		phase = time.Now()
		start("c")
		start("d")
		moveWithin(t, h, "join of c and d", balanceLimit, "a", "b", "c", "d")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "join of c and d", "a", "b", "c", "d")
		h.CheckGaps(t, "join of c and d", phase, ownerlessLimit)

		// a leaves gracefully: its 4 shards go to the three others.
		phase = time.Now()
		replicas["a"].stop()
		delete(replicas, "a")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "graceful leave of a", "b", "c", "d")
		h.CheckGaps(t, "graceful leave of a", phase, ownerlessLimit)

		// b is replaced: e starts, then b leaves.
		phase = time.Now()
		start("e")
		time.Sleep(5 * time.Second)
		replicas["b"].stop()
		delete(replicas, "b")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "replacement of b by e", "c", "d", "e")
		h.CheckGaps(t, "replacement of b by e", phase, ownerlessLimit)

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
		t.Errorf("%s: balanced %v after the first shard's term ended, want at most %v", phase, took, limit)
	} else {
		t.Logf("%s: balanced %v after the first shard's term ended", phase, took)
	}
}
