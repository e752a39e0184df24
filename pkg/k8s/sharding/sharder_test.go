package sharding_test

import (
	"context"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// Timing of the sharder tests: short, so histories are short in fake time.
const (
	testLease   = 3 * time.Second
	testRenew   = 2 * time.Second
	testRetry   = 500 * time.Millisecond
	testShards  = 16
	handoverGap = 100 * time.Millisecond // the most a planned move may leave a shard without owner
	memberLag   = 50 * time.Millisecond  // how late each replica sees member Leases change
)

// TestSharderFaults runs 3 replicas on in-memory stores in a synctest bubble, then a
// join, a graceful leave and a crash. It checks that no shard ever has two owners
// (the term of the old one ended before the new one's began), that after each fault
// every shard has one owner and the shares are within one shard, and how long
// shards were without an owner: at most handoverGap on a join or a graceful leave, at
// most LeaseDuration + 2·RetryPeriod after a crash.
func TestSharderFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		stores := sharding.NewMemoryStores(testShards)
		replicas := map[string]*replica{}
		start := func(id string) { replicas[id] = startReplica(t, stores, id, h) }
		defer func() { // also after a Fatal, so that the bubble's goroutines end
			for _, r := range replicas {
				r.stop()
			}
		}()

		for _, id := range []string{"a", "b", "c"} {
			start(id)
		}
		time.Sleep(10 * time.Second)
		h.CheckBalanced(t, "start", "a", "b", "c")

		phase := time.Now()
		start("d")
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "join of d", "a", "b", "c", "d")
		h.CheckGaps(t, "join of d", phase, handoverGap)

		phase = time.Now()
		bLed := len(replicas["b"].sharder.Owned())
		replicas["b"].stop()
		if st := replicas["b"].sharder.Stats(); st.HandOvers < uint64(bLed) || st.HandOverFailures != 0 {
			t.Errorf("b led %d shards when it left; its stats: %+v, want as many hand-overs and no failure", bLed, st)
		}
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "graceful leave of b", "a", "c", "d")
		h.CheckGaps(t, "graceful leave of b", phase, handoverGap)

		phase = time.Now()
		replicas["c"].crash()
		time.Sleep(4 * testLease)
		h.CheckBalanced(t, "crash of c", "a", "d")
		h.CheckGaps(t, "crash of c", phase, testLease+2*testRetry)

		for _, r := range replicas {
			r.stop()
		}
		h.CheckNoOverlap(t)
		h.CheckAllEnded(t)
		for _, r := range replicas {
			if r.err != nil {
				t.Errorf("Run of %s: %v", r.id, r.err)
			}
		}
	})
}

// replica is one Sharder on stores that a crash cuts off.
type replica struct {
	id      string
	sharder *sharding.Sharder
	cancel  context.CancelFunc
	done    chan struct{}
	down    chan struct{} // closed by crash
	err     error
}

func startReplica(t *testing.T, shared sharding.Stores, id string, h *shardingtest.History) *replica {
	t.Helper()
	return startReplicaOf(t, shared, id, testShards, h.OnAcquired(t, id))
}

// startReplicaOf starts replica id of a ring of the given shards, calling onAcquired
// for each of its terms.
func startReplicaOf(t *testing.T, shared sharding.Stores, id string, shards int, onAcquired func(context.Context)) *replica {
	t.Helper()
	return startReplicaTimed(t, shared, id, shards, onAcquired, testLease, testRenew, testRetry)
}

// startReplicaTimed is startReplicaOf with the given LeaseDuration, RenewDeadline and
// RetryPeriod.
func startReplicaTimed(t *testing.T, shared sharding.Stores, id string, shards int, onAcquired func(context.Context),
	lease, renew, retry time.Duration) *replica {
	t.Helper()
	r := &replica{id: id, done: make(chan struct{}), down: make(chan struct{})}
	stores := shardingtest.Cut(shared, r.down, memberLag)
	logger := testLogger(id)
	s, err := sharding.NewWithStores(sharding.Config{
		Identity: id, Name: "ring", Namespace: "default", Shards: shards,
		LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		JitterSource: func(shard int) rand.Source { return rand.NewPCG(idSeed(id), uint64(shard)) },
	}, stores, sharding.Callbacks{
		OnAcquired: onAcquired,
	}, logger)
	if err != nil {
		t.Fatal(err)
	}
	r.sharder = s
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.err = s.Run(ctx)
	}()
	return r
}

// testLogger is replica id's logger: nil (discard) unless BATON_SHARDING_LOG is set,
// then every record at DEBUG and above, on stderr.
func testLogger(id string) *slog.Logger {
	if os.Getenv("BATON_SHARDING_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", id)
}

// idSeed seeds the electors' jitter of replica id, so that a test's timings do not
// depend on the global random source.
func idSeed(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}

// stop ends Run (a graceful leave) and waits for it.
func (r *replica) stop() {
	r.cancel()
	<-r.done
}

// crash cuts the replica off from its stores: every call fails, every watch ends. Its
// terms end by their renew deadline; the others take its shards when its Leases
// expire.
func (r *replica) crash() { close(r.down) }

// TestSharderRollingRestart replaces each of 3 replicas in turn, as a rolling update
// of a Deployment does (the new pod starts, then the old one leaves gracefully): no
// shard is ever without owner for more than handoverGap, none has two owners, and
// the new replicas end balanced.
func TestSharderRollingRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		stores := sharding.NewMemoryStores(testShards)
		var all []*replica
		defer func() {
			for _, r := range all {
				r.stop()
			}
		}()
		for _, id := range []string{"a", "b", "c"} {
			all = append(all, startReplica(t, stores, id, h))
		}
		time.Sleep(10 * time.Second)
		h.CheckBalanced(t, "start", "a", "b", "c")
		roll := time.Now()
		for i, id := range []string{"a2", "b2", "c2"} {
			all = append(all, startReplica(t, stores, id, h))
			time.Sleep(3 * time.Second)
			all[i].stop()
			time.Sleep(3 * time.Second)
		}
		h.CheckBalanced(t, "rolling restart", "a2", "b2", "c2")
		h.CheckGaps(t, "rolling restart", roll, handoverGap)
		for _, r := range all {
			r.stop()
		}
		h.CheckNoOverlap(t)
		h.CheckAllEnded(t)
	})
}

// TestSharderLastMove: LastMove is the last change of a shard's holder or of the
// placement a replica saw, any replica's: it stays put on a quiet ring, and a join
// moves it on every replica, the joiner included.
func TestSharderLastMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		stores := sharding.NewMemoryStores(testShards)
		replicas := map[string]*replica{}
		defer func() {
			for _, r := range replicas {
				r.stop()
			}
		}()
		for _, id := range []string{"a", "b"} {
			replicas[id] = startReplica(t, stores, id, h)
		}
		time.Sleep(10 * time.Second)
		settled := replicas["a"].sharder.LastMove()
		if settled.IsZero() || settled.After(time.Now()) {
			t.Fatalf("a's LastMove after the start = %v, want a time before now (%v)", settled, time.Now())
		}
		time.Sleep(10 * time.Second) // quiet: nothing changes hands
		if got := replicas["a"].sharder.LastMove(); !got.Equal(settled) {
			t.Errorf("a's LastMove on a quiet ring moved from %v to %v", settled, got)
		}
		join := time.Now()
		replicas["c"] = startReplica(t, stores, "c", h)
		time.Sleep(5 * time.Second)
		h.CheckBalanced(t, "join of c", "a", "b", "c")
		for _, id := range []string{"a", "b", "c"} {
			if got := replicas[id].sharder.LastMove(); got.Before(join) {
				t.Errorf("%s's LastMove after c joined = %v, want after the join at %v", id, got, join)
			}
		}
	})
}
