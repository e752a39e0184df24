package sharding_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestShardWorkReplayRandomized runs seeded random histories of replicas joining,
// leaving gracefully and crashing (2 to 4 live) while a publisher records random
// shards' states on every replica's leadership.ShardedReplayer, as every replica's
// all-replica side would. Each replica runs one sharding.Work per shard it leads,
// which watches its shard on its replica's replayer. The checker fails a history in
// which a shard's work
//   - does not find, at once, the state recorded last before it started;
//   - receives a state of another shard, or a version older than or equal to one it
//     received;
//   - starts with a state older than one the shard's work of an earlier term
//     received (state going back across owners);
//   - still runs when its replica's Run returned.
//
// BATON_SEED=N replays one seed; BATON_SHARDING_SEEDS=N runs seeds 1 to N (soak).
func TestShardWorkReplayRandomized(t *testing.T) {
	seeds := testseed.Seeds(t, 1, 2, 3, 4)
	if n, err := strconv.Atoi(os.Getenv("BATON_SHARDING_SEEDS")); err == nil && n > 0 {
		seeds = nil
		for s := range n {
			seeds = append(seeds, uint64(s+1))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomWorkReplay(t, seed) })
		})
	}
}

// shardVersion is the state of the history: a shard and its version, rising by one
// with every publish of that shard.
type shardVersion struct{ shard, version int }

// replayModel is the history's recording: the newest version of each shard, the
// replicas' replayers it is published to, and every run of a shard's work.
type replayModel struct {
	// mu guards the fields below; a work takes it around its Watch, so the version
	// it starts from is exact.
	mu        sync.Mutex
	versions  [testShards]int
	replayers map[string]*leadership.ShardedReplayer[shardVersion]
	runs      []*replayRun
}

// replayRun is one run of a shard's work.
type replayRun struct {
	replica   string
	t         sharding.ShardTerm
	startedAt int // the shard's version when it started, 0 for none
	atOnce    bool
	seen      []shardVersion // guarded by replayModel.mu
	ended     bool           // guarded by replayModel.mu
}

func (m *replayModel) publish(shard int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.versions[shard]++
	for _, r := range m.replayers {
		_ = r.Publish(shard, shardVersion{shard, m.versions[shard]})
	}
}

// work returns the shard work of replica id.
func (m *replayModel) work(id string, r *leadership.ShardedReplayer[shardVersion]) sharding.Work {
	return sharding.Work{Name: "replay", Run: func(ctx context.Context, t sharding.ShardTerm) error {
		run := &replayRun{replica: id, t: t}
		m.mu.Lock()
		run.startedAt = m.versions[t.Shard]
		states, err := r.Watch(ctx, t.Shard)
		m.runs = append(m.runs, run)
		m.mu.Unlock()
		if err != nil {
			return err
		}
		if run.startedAt == 0 {
			run.atOnce = true
		} else {
			select {
			case s := <-states:
				run.atOnce = true
				m.record(run, s)
			default:
			}
		}
		for s := range states {
			m.record(run, s)
		}
		m.mu.Lock()
		run.ended = true
		m.mu.Unlock()
		return ctx.Err()
	}}
}

func (m *replayModel) record(run *replayRun, s shardVersion) {
	m.mu.Lock()
	defer m.mu.Unlock()
	run.seen = append(run.seen, s)
}

// replayReplica is one replica of the history: a Sharder with Workers, on stores
// that a crash cuts off.
type replayReplica struct {
	id     string
	cancel context.CancelFunc
	done   chan struct{}
	down   chan struct{}
}

func (r *replayReplica) stop() { r.cancel(); <-r.done }

func randomWorkReplay(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x7e91a))
	stores := sharding.NewMemoryStores(testShards)
	m := &replayModel{replayers: map[string]*leadership.ShardedReplayer[shardVersion]{}}
	var all []*replayReplica
	var live []string
	defer func() {
		for _, r := range all {
			r.stop()
		}
	}()
	next := 0
	join := func() {
		id := fmt.Sprintf("r%d", next)
		next++
		replayer, err := leadership.NewShardedReplayer[shardVersion](testShards)
		if err != nil {
			t.Fatal(err)
		}
		// Its all-replica side records every shard's current state before the replica
		// joins the ring (as one that reads a synced cache first does); from then on,
		// every publish.
		m.mu.Lock()
		for shard, v := range m.versions {
			if v != 0 {
				_ = replayer.Publish(shard, shardVersion{shard, v})
			}
		}
		m.replayers[id] = replayer
		m.mu.Unlock()
		workers, err := sharding.NewWorkers(sharding.WorkConfig{Works: []sharding.Work{m.work(id, replayer)}})
		if err != nil {
			t.Fatal(err)
		}
		r := &replayReplica{id: id, done: make(chan struct{}), down: make(chan struct{})}
		s, err := sharding.NewWithStores(sharding.Config{
			Identity: id, Name: "ring", Namespace: "default", Shards: testShards,
			LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
		}, shardingtest.Cut(stores, r.down, memberLag), sharding.Callbacks{OnAcquired: workers.RunShard}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() {
			defer close(r.done)
			if err := s.Run(ctx); err != nil {
				t.Errorf("Run of %s: %v", id, err)
			}
		}()
		all = append(all, r)
		live = append(live, id)
	}
	find := func(id string) *replayReplica {
		for _, r := range all {
			if r.id == id {
				return r
			}
		}
		return nil
	}

	// The publisher: a random shard's state every few milliseconds, on every replica.
	pubCtx, stopPublishing := context.WithCancel(context.Background())
	published := make(chan struct{})
	go func() {
		defer close(published)
		prng := rand.New(rand.NewPCG(seed, 1))
		for pubCtx.Err() == nil {
			m.publish(prng.IntN(testShards))
			time.Sleep(time.Duration(1+prng.IntN(20)) * time.Millisecond)
		}
	}()
	defer func() { stopPublishing(); <-published }()

	for range 3 {
		join()
	}
	var log []string
	for range 6 {
		switch a := rng.IntN(3); {
		case a == 0 && len(live) < 4 || len(live) <= 2:
			join()
			log = append(log, "join "+live[len(live)-1])
		default:
			k := rng.IntN(len(live))
			id := live[k]
			live = slices.Delete(live, k, k+1)
			if a == 1 {
				log = append(log, "leave "+id)
				go find(id).stop()
			} else {
				log = append(log, "crash "+id)
				close(find(id).down)
			}
		}
		pause := time.Duration(rng.IntN(int(2 * testLease)))
		log[len(log)-1] += fmt.Sprintf(", then %v", pause)
		time.Sleep(pause)
	}
	time.Sleep(2 * testLease)
	stopPublishing()
	<-published
	for _, r := range all {
		r.stop()
	}
	t.Logf("seed %d: %v; %d shard works", seed, log, len(m.runs))
	checkReplayRuns(t, seed, m)
}

// checkReplayRuns fails t for every run of m that breaks the rules of
// TestShardWorkReplayRandomized.
func checkReplayRuns(t *testing.T, seed uint64, m *replayModel) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	last := map[int]*replayRun{} // per shard, the run of the latest term checked
	runs := slices.Clone(m.runs)
	slices.SortStableFunc(runs, func(a, b *replayRun) int { return int(a.t.Term) - int(b.t.Term) })
	for _, run := range runs {
		name := fmt.Sprintf("seed %d: %s's work of %v", seed, run.replica, run.t)
		if !run.ended {
			t.Errorf("%s: still running after Run returned", name)
		}
		if !run.atOnce {
			t.Errorf("%s: found nothing at once; version %d was recorded", name, run.startedAt)
		}
		if run.startedAt != 0 && (len(run.seen) == 0 || run.seen[0].version != run.startedAt) {
			t.Errorf("%s: started with %v, want version %d first", name, run.seen, run.startedAt)
		}
		for i, s := range run.seen {
			if s.shard != run.t.Shard {
				t.Errorf("%s: received %+v", name, s)
			}
			if i > 0 && s.version <= run.seen[i-1].version {
				t.Errorf("%s: received version %d after %d", name, s.version, run.seen[i-1].version)
			}
		}
		if prev := last[run.t.Shard]; prev != nil && len(prev.seen) > 0 && len(run.seen) > 0 {
			if p, f := prev.seen[len(prev.seen)-1], run.seen[0]; f.version < p.version {
				t.Errorf("%s: started with version %d, older than %d that %s's work of %v received", name, f.version, p.version, prev.replica, prev.t)
			}
		}
		last[run.t.Shard] = run
	}
}
