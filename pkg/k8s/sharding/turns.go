package sharding

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Turns of the ring's moves.
//
// A hand-over is a Lease write (a hand-off; before hand-offs, two in a row: the
// release, then the new owner's take), and the API server answers writes sent
// together about as slowly as their number: on the loaded 2-core machine of test/sharding's BenchmarkShardMoves one Lease update
// took 1.3 to 2.3ms alone and 5 to 10ms with 8 under way, which is what a join had
// when every old member released its next shard as soon as its last release was
// answered (four releases and four takes at once: hand-overs of 17 to 24ms, nearly
// all of it the two writes waiting behind the others; the moves' own code took
// microseconds). So the members take turns, without talking to each other: every
// member sees every shard's holder (its electors follow every shard Lease) and
// computes the same placement, hence the same list of pending moves, and hands a
// shard over only once fewer than moveTurns of the pending moves come before it. A
// shard waiting for its turn keeps its owner; one move's arrival (the hand-off, or
// the take) is the next one's turn, seen on its watch event, so the ring's hand-over
// writes go out about one at a time.
//
// A pending move is a shard whose holder is not its owner in placement and that a
// hand-over will move: one released and not yet taken (or free), one led by a member
// placement counts, or, while this replica leaves, one it leads. Shards of a member
// that left placement otherwise (it leaves, or died) are not counted: a leaver hands
// its own over, and a dead holder's shards are taken when it expires, which no turn
// should wait for. The moves come in this order: first the released ones and the
// leaver's own (so that a leave is not held up by the moves among the others that it
// sets off, which they start only SettleDelay after they see it leave), then by shard.
//
// A move its holder withholds (to a member it saw only on its first view, until that
// member writes its Lease: docs/design/sharding.md, # Hand-over targets) is not
// pending: a replica knows its own, and guesses the others' from the order of the
// member Lease writes (withholds). Before, such a move was counted, and every
// hand-over behind it waited turnPatience, once or twice in a row: in
// BenchmarkShardMoves' rolling restart, one joiner per roll got its share of 16
// shards over about 1s instead of 60ms (TestRollingRestartNoTurnStalls: 1.45s from
// its start instead of 0.33s). Views may differ for a moment, and a pending move may
// still not progress: a hand-over that waited turnPatience for its turn goes without
// it.
//
// Turns only order hand-overs; they decide no owner, so a wrong turn costs time, never
// safety.

// moveTurns is how many of the ring's pending moves may be under way at once: as
// many as handOverWaves of them would be in a rebalance that moves them all, so that
// a large rebalance still takes about handOverWaves hand-over times.
func moveTurns(pending int) int { return max(1, (pending+handOverWaves-1)/handOverWaves) }

// turnPatience is the longest a hand-over waits for its turn: a quarter of
// RetryPeriod (500ms by default), far above the few milliseconds a move takes, so
// that only moves that do not progress are passed over.
func (s *Sharder) turnPatience() time.Duration { return s.config.RetryPeriod / 4 }

// moveSignal tells the hand-overs waiting for their turn that a shard's holder or
// the placement changed. Safe for concurrent use.
type moveSignal struct {
	// mu guards changed and last.
	mu      sync.Mutex
	changed chan struct{} // closed at the next change
	last    time.Time     // when notify was last called
}

func newMoveSignal() *moveSignal { return &moveSignal{changed: make(chan struct{})} }

// next returns a channel closed at the next change after the call.
func (m *moveSignal) next() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// notify wakes every waiter of next; now is the change's time.
func (m *moveSignal) notify(now time.Time) {
	m.mu.Lock()
	m.last = now
	close(m.changed)
	m.changed = make(chan struct{})
	m.mu.Unlock()
}

// lastChange returns when notify was last called; zero before.
func (m *moveSignal) lastChange() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// myTurn reports whether shard, which this replica leads and placement gives to
// another member, may be handed over now: fewer than moveTurns of the ring's pending
// moves come before it.
func (s *Sharder) myTurn(shard int) bool {
	s.mu.Lock()
	placement, live, unvouched, writes, leaving := s.placement, s.live, s.unvouched, s.writes, s.leaving
	s.mu.Unlock()
	self := s.config.Identity
	// withheld reports whether holder keeps the shard from owner for now: this
	// replica, to a member it has not vouched for, until it leaves; another, by
	// withholds' guess.
	withheld := func(holder, owner string) bool {
		if holder == self {
			return withholdsOwn(unvouched, leaving, owner)
		}
		return withholds(writes, holder, owner)
	}
	// rank is a pending move's place in the order, -1 for a shard that is none.
	rank := func(i int, holder string) int {
		owner := placement.Owner(i)
		_, counted := slices.BinarySearch(live, holder)
		switch {
		case owner == "" || holder == owner:
			return -1
		case holder == "" || holder == self && !counted:
			return i
		case counted && !withheld(holder, owner):
			return len(s.electors) + i
		}
		return -1
	}
	mine := rank(shard, self)
	before, pending := 0, 0
	for i, e := range s.electors {
		if r := rank(i, e.GetLeader()); r >= 0 {
			pending++
			if r < mine {
				before++
			}
		}
	}
	return before < moveTurns(pending)
}

// awaitTurn waits until shard's turn (myTurn), for at most turnPatience, or until
// ctx ends.
func (l *loop) awaitTurn(ctx context.Context, shard int) {
	s := l.s
	patience := s.turnPatience()
	expired := make(chan struct{})
	t := s.clock.AfterFunc(patience, func() { close(expired) })
	defer t.Stop()
	for {
		changed := s.moved.next()
		if s.myTurn(shard) {
			return
		}
		select {
		case <-changed:
		case <-expired:
			s.logger.Debug("handing over without its turn", "shard", shard, "waited", patience)
			return
		case <-ctx.Done():
			return
		}
	}
}
