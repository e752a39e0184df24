package sharding

import (
	"context"
	"sync"
	"time"
)

// Turns of the ring's moves.
//
// A hand-over is two Lease writes in a row (the release, then the new owner's take),
// and the API server answers writes sent together about as slowly as their number:
// on the loaded 2-core machine of test/sharding's BenchmarkShardMoves one Lease update
// took 1.3 to 2.3ms alone and 5 to 10ms with 8 under way, which is what a join had
// when every old member released its next shard as soon as its last release was
// answered (four releases and four takes at once: hand-overs of 17 to 24ms, nearly
// all of it the two writes waiting behind the others; the moves' own code took
// microseconds). So the members take turns, without talking to each other: every
// member sees every shard's holder (its electors follow every shard Lease) and
// computes the same placement, hence the same list of pending moves (shards whose
// holder is not their owner in placement, released ones included), and hands a shard
// over only once fewer than moveTurns of the pending moves come before it in shard
// order. A shard waiting for its turn keeps its owner; one move's take is the next
// one's turn, seen on the take's watch event, so the ring's hand-over writes go out
// about one at a time.
//
// Views may differ for a moment, and a pending move may not progress (its holder
// withholds it, or its owner is dead): a member that sees no move end for
// turnPatience hands its shard over without its turn. Turns only order hand-overs;
// they decide no owner, so a wrong turn costs time, never safety.

// moveTurns is how many of the ring's pending moves may be under way at once: as
// many as handOverWaves of them would be in a rebalance that moves them all, so that
// a large rebalance still takes about handOverWaves hand-over times.
func moveTurns(pending int) int { return max(1, (pending+handOverWaves-1)/handOverWaves) }

// turnPatience is how long a hand-over waits for its turn while no move of the ring
// ends: a quarter of RetryPeriod (500ms by default), far above the few milliseconds
// a move takes, so that only a move that does not progress is passed over.
func (s *Sharder) turnPatience() time.Duration { return s.config.RetryPeriod / 4 }

// moveSignal tells the hand-overs waiting for their turn that a shard's holder or
// the placement changed. Safe for concurrent use.
type moveSignal struct {
	// mu guards changed.
	mu      sync.Mutex
	changed chan struct{} // closed at the next change
}

func newMoveSignal() *moveSignal { return &moveSignal{changed: make(chan struct{})} }

// next returns a channel closed at the next change after the call.
func (m *moveSignal) next() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// notify wakes every waiter of next.
func (m *moveSignal) notify() {
	m.mu.Lock()
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// myTurn reports whether shard, which this replica leads and placement gives to
// another member, may be handed over now: fewer than moveTurns of the ring's pending
// moves come before it in shard order.
func (s *Sharder) myTurn(shard int) bool {
	s.mu.Lock()
	placement := s.placement
	s.mu.Unlock()
	before, pending := 0, 0
	for i, e := range s.electors {
		if owner := placement.Owner(i); owner != "" && e.GetLeader() != owner {
			pending++
			if i < shard {
				before++
			}
		}
	}
	return before < moveTurns(pending)
}

// awaitTurn waits until shard's turn (myTurn), until no move of the ring has ended
// for turnPatience, or until ctx ends.
func (l *loop) awaitTurn(ctx context.Context, shard int) {
	s := l.s
	patience := s.turnPatience()
	deadline := s.clock.Now().Add(patience)
	for {
		changed := s.moved.next()
		if s.myTurn(shard) {
			return
		}
		now := s.clock.Now()
		if !now.Before(deadline) {
			s.logger.Debug("handing over without its turn: no move ended", "shard", shard, "for", patience)
			return
		}
		expired := make(chan struct{})
		t := s.clock.AfterFunc(deadline.Sub(now), func() { close(expired) })
		select {
		case <-changed:
			deadline = s.clock.Now().Add(patience)
		case <-expired:
		case <-ctx.Done():
			t.Stop()
			return
		}
		t.Stop()
	}
}
