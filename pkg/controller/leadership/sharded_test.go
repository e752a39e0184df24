package leadership_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/controller/leadership"
)

// shardState is a test state: the shard it belongs to and its version, rising by
// one with every Publish of that shard.
type shardState struct {
	shard, version int
}

// TestShardedReplayerHandsTheNewestStateAtOnce: a watcher made after two publishes
// holds the second at once; a publish to another shard does not reach it; a newer
// state of its shard does; after its context ends the channel is closed, and the
// recorded state stays for the next watcher.
func TestShardedReplayerHandsTheNewestStateAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, err := leadership.NewShardedReplayer[shardState](4)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.Get(2); ok {
			t.Fatal("Get of a shard never published: ok")
		}
		mustPublish(t, r, 2, shardState{2, 1})
		mustPublish(t, r, 2, shardState{2, 2})
		ctx, end := context.WithCancel(context.Background())
		ch, err := r.Watch(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-ch:
			if s.version != 2 {
				t.Fatalf("first state %+v, want version 2", s)
			}
		default:
			t.Fatal("nothing at once from Watch of a shard with state")
		}
		mustPublish(t, r, 1, shardState{1, 1})
		synctest.Wait()
		if len(ch) != 0 {
			t.Fatalf("a publish to shard 1 reached a watcher of shard 2: %+v", <-ch)
		}
		mustPublish(t, r, 2, shardState{2, 3})
		if s := <-ch; s.version != 3 {
			t.Fatalf("next state %+v, want version 3", s)
		}
		end()
		synctest.Wait()
		if _, open := <-ch; open {
			t.Fatal("channel open after its context ended")
		}
		mustPublish(t, r, 2, shardState{2, 4}) // no watcher left: must not block or panic
		if s, ok := r.Get(2); !ok || s.version != 4 {
			t.Fatalf("Get(2) = %+v, %v; want version 4", s, ok)
		}
		ch, _ = r.Watch(t.Context(), 2)
		if s := <-ch; s.version != 4 {
			t.Fatalf("a later watcher's first state %+v, want version 4", s)
		}
	})
}

// TestShardedReplayerWatchBeforeAnyState: a watcher of a shard with no state gets
// nothing until the first publish, then that.
func TestShardedReplayerWatchBeforeAnyState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := leadership.NewShardedReplayer[shardState](1)
		ch, _ := r.Watch(t.Context(), 0)
		synctest.Wait()
		if len(ch) != 0 {
			t.Fatal("a state before any publish")
		}
		mustPublish(t, r, 0, shardState{0, 1})
		if s := <-ch; s.version != 1 {
			t.Fatalf("got %+v, want version 1", s)
		}
	})
}

// TestShardedReplayerSlowReaderSkipsToTheNewest: a watcher that reads nothing while
// three states are published then reads the third, and nothing else.
func TestShardedReplayerSlowReaderSkipsToTheNewest(t *testing.T) {
	r, _ := leadership.NewShardedReplayer[shardState](1)
	ch, _ := r.Watch(t.Context(), 0)
	for v := 1; v <= 3; v++ {
		mustPublish(t, r, 0, shardState{0, v})
	}
	if s := <-ch; s.version != 3 {
		t.Fatalf("got %+v, want version 3", s)
	}
	if len(ch) != 0 {
		t.Fatalf("more than the newest state: %+v", <-ch)
	}
}

// TestShardedReplayerRefusesShardsOutOfRange: each method names the shard and the
// range, wrapping ErrInvalidShard.
func TestShardedReplayerRefusesShardsOutOfRange(t *testing.T) {
	if _, err := leadership.NewShardedReplayer[int](0); !errors.Is(err, leadership.ErrInvalidShard) || !strings.Contains(err.Error(), "0 shards") {
		t.Errorf("NewShardedReplayer(0): %v", err)
	}
	r, _ := leadership.NewShardedReplayer[int](4)
	for _, shard := range []int{-1, 4} {
		want := fmt.Sprintf("shard %d is not from 0 to 3", shard)
		if err := r.Publish(shard, 1); !errors.Is(err, leadership.ErrInvalidShard) || !strings.Contains(err.Error(), want) {
			t.Errorf("Publish(%d): %v, want %q", shard, err, want)
		}
		if ch, err := r.Watch(t.Context(), shard); ch != nil || !errors.Is(err, leadership.ErrInvalidShard) || !strings.Contains(err.Error(), want) {
			t.Errorf("Watch(%d): %v, %v, want no channel and %q", shard, ch, err, want)
		}
		if _, ok := r.Get(shard); ok {
			t.Errorf("Get(%d): ok", shard)
		}
	}
}

func mustPublish(t *testing.T, r *leadership.ShardedReplayer[shardState], shard int, s shardState) {
	t.Helper()
	if err := r.Publish(shard, s); err != nil {
		t.Fatal(err)
	}
}

// TestShardedReplayerRandomized runs seeded random histories against a replayer of
// three shards: one publisher per shard publishes rising versions at a random pace
// while shard works start (Watch) and end (their context) at random moments and read
// at random paces. The checker fails a history in which a work
//   - started while no Publish ran, finds nothing at once in its channel though its
//     shard had state, or finds other than the newest state;
//   - starts with a state older than the one recorded last before its start (its
//     Publish returned before the Watch call);
//   - receives a state of another shard, or an older or equal version after a newer
//     one;
//   - still running when the publishes stop, does not end holding its shard's newest
//     state;
//   - ends without its channel closed.
//
// BATON_SEED=N replays one seed; BATON_REPLAYER_SEEDS=N runs seeds 1 to N (soak).
func TestShardedReplayerRandomized(t *testing.T) {
	seeds := testseed.Seeds(t, 1, 2, 3, 4, 5, 6, 7, 8)
	if n, err := strconv.Atoi(os.Getenv("BATON_REPLAYER_SEEDS")); err == nil && n > 0 {
		seeds = nil
		for s := range n {
			seeds = append(seeds, uint64(s+1))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomReplay(t, seed) })
		})
	}
}

// replayWork is one shard work of a random history.
type replayWork struct {
	id, shard int
	// startedAt is the version of its shard whose Publish returned last before the
	// work's Watch call, 0 for none.
	startedAt int64
	end       context.CancelFunc
	done      chan struct{}

	// mu guards what the work received, in order, and whether it saw its channel
	// closed.
	mu         sync.Mutex
	seen       []shardState
	closedSeen bool
}

func randomReplay(t *testing.T, seed uint64) {
	const (
		shards    = 3
		publishes = 150 // per shard
	)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	r, _ := leadership.NewShardedReplayer[shardState](shards)
	var latest [shards]atomic.Int64 // the version whose Publish returned last, per shard
	var publishGate sync.RWMutex    // held by publishers (read) and by exclusive starts (write)
	var publishers sync.WaitGroup
	for shard := range shards {
		prng := rand.New(rand.NewPCG(seed, uint64(shard)))
		publishers.Go(func() {
			for v := 1; v <= publishes; v++ {
				publishGate.RLock()
				if err := r.Publish(shard, shardState{shard, v}); err != nil {
					t.Error(err)
				}
				latest[shard].Store(int64(v))
				publishGate.RUnlock()
				time.Sleep(time.Duration(prng.IntN(4)) * time.Millisecond)
			}
		})
	}
	publishing := make(chan struct{})
	go func() { publishers.Wait(); close(publishing) }()

	var works, live []*replayWork
	defer func() {
		for _, w := range live {
			w.end()
		}
	}()
	start := func() {
		w := &replayWork{id: len(works), shard: rng.IntN(shards), done: make(chan struct{})}
		ctx, end := context.WithCancel(context.Background())
		w.end = end
		// Half the works start while no Publish runs: their first state must be in
		// the channel at once, and be exactly the newest. The others start amid the
		// publishes, and checkReplayWork holds them to the newest before their start
		// or a newer one.
		exclusive := rng.IntN(2) == 0
		if exclusive {
			publishGate.Lock()
		}
		w.startedAt = latest[w.shard].Load()
		ch, err := r.Watch(ctx, w.shard)
		if err != nil {
			t.Fatal(err)
		}
		if exclusive {
			if w.startedAt != 0 {
				select {
				case s := <-ch:
					w.seen = append(w.seen, s)
					if int64(s.version) != w.startedAt {
						t.Errorf("seed %d: work %d of shard %d started with %+v, want version %d", seed, w.id, w.shard, s, w.startedAt)
					}
				default:
					t.Errorf("seed %d: work %d of shard %d found nothing at once; version %d was recorded", seed, w.id, w.shard, w.startedAt)
				}
			}
			publishGate.Unlock()
		}
		pace := time.Duration(rng.IntN(5)) * time.Millisecond
		go func() {
			defer close(w.done)
			for s := range ch {
				w.mu.Lock()
				w.seen = append(w.seen, s)
				w.mu.Unlock()
				time.Sleep(pace) // a slow reader skips states
			}
			w.mu.Lock()
			w.closedSeen = true
			w.mu.Unlock()
		}()
		works = append(works, w)
		live = append(live, w)
	}
loop:
	for {
		select {
		case <-publishing:
			break loop
		default:
		}
		if a := rng.IntN(3); a < 2 || len(live) == 0 {
			start()
		} else {
			k := rng.IntN(len(live))
			live[k].end()
			live = append(live[:k], live[k+1:]...)
		}
		time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
	}
	time.Sleep(time.Second) // every reader catches up
	synctest.Wait()
	for _, w := range live {
		w.mu.Lock()
		if n := len(w.seen); n == 0 || w.seen[n-1].version != publishes {
			t.Errorf("seed %d: work %d of shard %d ends holding %v, want version %d", seed, w.id, w.shard, w.seen, publishes)
		}
		w.mu.Unlock()
	}
	for _, w := range live {
		w.end()
	}
	live = nil
	for _, w := range works {
		<-w.done
		if !w.closedSeen {
			t.Errorf("seed %d: work %d: channel not closed", seed, w.id)
		}
		checkReplayWork(t, seed, w)
	}
	t.Logf("seed %d: %d works", seed, len(works))
}

// checkReplayWork fails t when w's states are not of its shard, did not start with
// the state recorded last before its start or a newer one, or went back.
func checkReplayWork(t *testing.T, seed uint64, w *replayWork) {
	t.Helper()
	if w.startedAt != 0 && (len(w.seen) == 0 || int64(w.seen[0].version) < w.startedAt) {
		t.Errorf("seed %d: work %d of shard %d started with %v, want version %d or newer first", seed, w.id, w.shard, w.seen, w.startedAt)
	}
	for i, s := range w.seen {
		if s.shard != w.shard {
			t.Errorf("seed %d: work %d of shard %d received %+v", seed, w.id, w.shard, s)
		}
		if i > 0 && s.version <= w.seen[i-1].version {
			t.Errorf("seed %d: work %d of shard %d received version %d after %d", seed, w.id, w.shard, s.version, w.seen[i-1].version)
		}
	}
}
