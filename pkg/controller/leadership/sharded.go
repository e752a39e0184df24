package leadership

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrInvalidShard is wrapped by the errors of a ShardedReplayer given a shard that is
// not from 0 to Shards()-1, and of NewShardedReplayer given fewer than one shard.
var ErrInvalidShard = errors.New("leadership: invalid shard")

// ShardedReplayer keeps the newest state of type T of every shard of a ring, and
// hands each shard's state to that shard's leader-only work: the per-shard
// counterpart of StateReplayer, for sharded leadership (pkg/k8s/sharding), where
// every replica leads some shards and a shard changes owner on its own. Create one
// with NewShardedReplayer.
//
// # Recording
//
// Every replica records every shard's state: its all-replica side computes the
// state of all shards (from what every replica sees, such as the API server's
// objects) and calls Publish for each change, whether or not it leads the shard. So
// whichever replica a shard moves to holds its state already, provided the replica
// recorded every shard's state before it joined the ring (its all-replica side reads
// its synced cache first). What is recorded is
// one slot per shard, the newest state published: a new owner needs the current
// state, not a history.
//
// # Replay
//
// A shard's leader-only work calls Watch(ctx, shard) under its shard term's context
// when it starts. The channel holds the shard's newest recorded state at once, when
// there is one, so the work starts from the current state without waiting for the
// next Publish; then each newer state follows. Receive from it (with ctx.Done() in a
// select): a receive that cannot wait (a select with a default case) may find it
// empty for the instant a concurrent Publish puts a newer state in place of the
// waiting one. Get says whether the shard has a state.
//
// # Ordering
//
// Publish and Watch take one lock, so they have one order: a shard's states are
// ordered by their Publish calls, and a watcher receives them in that order. The
// first state a watcher receives is the one recorded last before its Watch call, or
// a newer one; it never receives a state older than one it received, nor one twice.
// It may not receive every state: the channel holds one, and a newer state replaces
// one the watcher has not read yet, so a slow reader skips to the newest and always
// ends holding it. Publish calls for one shard from several goroutines at once have
// the order in which they took the lock; publish each shard's states from one
// goroutine (or one at a time) when their order matters.
//
// # Shard loss
//
// When the shard's term ends (handed over, lost, the replica leaving) the context
// given to Watch ends, and the channel is closed soon after: a reader stops at
// ctx.Done() or at the close, whichever it sees first, and checks ctx.Err() before
// acting on a state it received. The recorded state stays: the replica keeps
// recording the shard, so that it can take the shard back later with its state.
//
// # Concurrency properties
//
// All methods are safe for concurrent use. Publish never blocks on a watcher: it
// replaces the state waiting in a watcher's channel instead. No callback runs under
// the lock; a watcher whose context ended is removed, and its channel closed, on a
// goroutine of context.AfterFunc's, which ends at once.
type ShardedReplayer[T any] struct {
	// mu guards seq and shards: every shard's slot and its watchers. Publish and the
	// sends to watchers' channels happen under it; those sends never block (see
	// offer).
	mu     sync.Mutex
	seq    uint64 // the number of Publish calls so far
	shards []shardSlot[T]
}

// shardSlot is one shard's newest state and the watchers of the shard.
type shardSlot[T any] struct {
	state    T
	seq      uint64 // the Publish that recorded state; 0 while none did
	watchers map[chan T]struct{}
}

// NewShardedReplayer returns a replayer of a ring of shards shards, from 1 on
// (sharding.Ring.Shards()); it records nothing yet. The error wraps ErrInvalidShard.
func NewShardedReplayer[T any](shards int) (*ShardedReplayer[T], error) {
	if shards < 1 {
		return nil, fmt.Errorf("%w: NewShardedReplayer: %d shards, want at least 1", ErrInvalidShard, shards)
	}
	return &ShardedReplayer[T]{shards: make([]shardSlot[T], shards)}, nil
}

// Shards returns the number of shards of the replayer's ring.
func (r *ShardedReplayer[T]) Shards() int { return len(r.shards) }

// check returns an error wrapping ErrInvalidShard when shard is not in the ring.
func (r *ShardedReplayer[T]) check(op string, shard int) error {
	if shard < 0 || shard >= len(r.shards) {
		return fmt.Errorf("%w: %s: shard %d is not from 0 to %d", ErrInvalidShard, op, shard, len(r.shards)-1)
	}
	return nil
}

// Publish records state as the shard's newest state, replacing the one recorded,
// and hands it to every watcher of the shard. It returns an error wrapping
// ErrInvalidShard, and records nothing, when shard is not in the ring.
func (r *ShardedReplayer[T]) Publish(shard int, state T) error {
	if err := r.check("Publish", shard); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	s := &r.shards[shard]
	s.state, s.seq = state, r.seq
	for ch := range s.watchers {
		offer(ch, state)
	}
	return nil
}

// offer puts state in ch (capacity one), replacing a state waiting there. Only
// Publish and Watch send on ch, under mu, and the reader only takes from it, so
// once it is emptied the send cannot block.
func offer[T any](ch chan T, state T) {
	select {
	case <-ch:
	default:
	}
	ch <- state
}

// Get returns the shard's newest recorded state, and false when none was recorded
// or shard is not in the ring.
func (r *ShardedReplayer[T]) Get(shard int) (T, bool) {
	if r.check("Get", shard) != nil {
		var zero T
		return zero, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &r.shards[shard]
	return s.state, s.seq != 0
}

// Watch returns a channel that holds the shard's newest recorded state at once
// (when one was recorded) and then receives each newer one, never an older one
// (see the type's doc, # Ordering). The replayer closes the channel after ctx ends;
// the reader never closes it. Call it from the shard's work with its term context.
// It returns an error wrapping ErrInvalidShard when shard is not in the ring.
func (r *ShardedReplayer[T]) Watch(ctx context.Context, shard int) (<-chan T, error) {
	if err := r.check("Watch", shard); err != nil {
		return nil, err
	}
	ch := make(chan T, 1)
	r.mu.Lock()
	s := &r.shards[shard]
	if s.seq != 0 {
		ch <- s.state
	}
	if s.watchers == nil {
		s.watchers = map[chan T]struct{}{}
	}
	s.watchers[ch] = struct{}{}
	r.mu.Unlock()
	context.AfterFunc(ctx, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.shards[shard].watchers, ch)
		close(ch)
	})
	return ch, nil
}
