package sharding_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestMovesTakeTurns: a ring of 16 shards on a, b, c and d, whose shard Lease writes
// each take 1ms, as on an API server; e joins, and a, b, c and d hand it its share;
// then e leaves. The members hand each shard over in its turn (turns.go): at no time
// are two shards released to a new owner and not yet taken, no shard goes without
// owner for more than handoverGap, and the ring ends balanced. A one-write hand-over
// (leaderelection.HandOffs) is under way from its send until it lands, a release
// from its landing until its take lands. A write lands just before the store shows
// it: the other members act on it at once, and counted when its call returned, a
// hand-off seemed to overlap the next one, begun by another member at the same
// instant on seeing it (4 runs of 300 failed so). (Before turns, the old members
// sent their first releases at the same instant: 3 hand-overs under way at once on
// the join, 2 on the leave, whose writes an API server answers about as many times
// as slowly.)
func TestMovesTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 16
		mem := sharding.NewMemoryStores(shards)
		open := &openHandOvers{released: map[int]bool{}}
		stores := sharding.Stores{Members: mem.Members, Shard: func(i int) leaderelection.LeaseStore {
			return &slowWrites{LeaseStore: mem.Shard(i), shard: i, open: open}
		}}
		h := shardingtest.NewHistory(shards)
		ids := []string{"a", "b", "c", "d", "e"}
		for _, id := range ids[:4] {
			_, stop := runSharder(t, stores, id, shards, nil, sharding.Callbacks{OnAcquired: h.OnAcquired(t, id)})
			defer stop()
		}
		time.Sleep(2 * testLease)
		h.CheckBalanced(t, "start", ids[:4]...)
		open.reset()
		from := time.Now()
		_, stop := runSharder(t, stores, "e", shards, nil, sharding.Callbacks{OnAcquired: h.OnAcquired(t, "e")})
		defer stop()
		time.Sleep(2 * testLease)
		h.CheckBalanced(t, "e's join", ids...)
		h.CheckGaps(t, "e's join", from, handoverGap)
		if most, moves := open.result(); moves == 0 || most > 1 {
			t.Errorf("e's join: %d hand-overs, at most %d under way at once; want some, one at a time", moves, most)
		}
		open.reset()
		from = time.Now()
		stop()
		time.Sleep(2 * testLease)
		h.CheckBalanced(t, "e's leave", ids[:4]...)
		h.CheckGaps(t, "e's leave", from, handoverGap)
		if most, moves := open.result(); moves == 0 || most > 1 {
			t.Errorf("e's leave: %d hand-overs, at most %d under way at once; want some, one at a time", moves, most)
		}
	})
}

// slowWrites is a shard's LeaseStore whose writes take a millisecond each, and
// which records the hand-overs under way in open.
type slowWrites struct {
	leaderelection.LeaseStore
	shard int
	open  *openHandOvers
}

func (s *slowWrites) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if r.HolderIdentity != "" && strings.HasPrefix(r.Marker, "handoff:") {
		s.open.begin(s.shard)
	}
	time.Sleep(time.Millisecond)
	s.open.landing(s.shard, r)
	out, err := s.LeaseStore.Update(ctx, r)
	if err == nil {
		s.open.landed(s.shard, r)
	}
	return out, err
}

func (s *slowWrites) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	time.Sleep(time.Millisecond)
	s.open.landing(s.shard, r)
	out, err := s.LeaseStore.Create(ctx, r)
	if err == nil {
		s.open.landed(s.shard, r)
	}
	return out, err
}

// openHandOvers counts the shards released to a new owner and not yet taken, and
// the most at once. Safe for concurrent use.
type openHandOvers struct {
	// mu guards the fields below.
	mu       sync.Mutex
	released map[int]bool
	most     int
	moves    int
}

// landing records that a write of shard, r, lands now: a write that names a holder
// (a hand-off, or the take after a release) ends the shard's hand-over. It is
// called before the store has the write, since the other members may act on it (and
// begin the next hand-over) before the write's call returns.
func (o *openHandOvers) landing(shard int, r leaderelection.LeaseRecord) {
	if r.HolderIdentity != "" {
		o.end(shard)
	}
}

// landed records a write of shard, r, that the store took: a release to a new owner
// begins a hand-over, under way until the take.
func (o *openHandOvers) landed(shard int, r leaderelection.LeaseRecord) {
	if r.HolderIdentity == "" && r.PreferredHolder != "" {
		o.begin(shard)
	}
}

// begin records a hand-over of shard under way; end, that it is over.
func (o *openHandOvers) begin(shard int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released[shard] = true
	o.moves++
	o.most = max(o.most, len(o.released))
}

func (o *openHandOvers) end(shard int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.released, shard)
}

func (o *openHandOvers) reset() {
	o.mu.Lock()
	defer o.mu.Unlock()
	clear(o.released)
	o.most, o.moves = 0, 0
}

func (o *openHandOvers) result() (most, moves int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.most, o.moves
}
