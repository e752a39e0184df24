package sharding_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// countingStores counts the writes of a ring's Leases: of every shard Lease, and of
// the member Leases. failMembers makes every member renewal of the replica that
// uses these stores fail, while its shard Leases' calls go through.
type countingStores struct {
	shardWrites, memberWrites atomic.Int64
	failMembers               atomic.Bool
}

func (c *countingStores) wrap(shared sharding.Stores) sharding.Stores {
	return sharding.Stores{
		Shard:   func(i int) leaderelection.LeaseStore { return &countingLease{LeaseStore: shared.Shard(i), c: c} },
		Members: &countingMembers{MemberStore: shared.Members, c: c},
	}
}

type countingLease struct {
	leaderelection.LeaseStore
	c *countingStores
}

func (l *countingLease) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	l.c.shardWrites.Add(1)
	return l.LeaseStore.Create(ctx, r)
}

func (l *countingLease) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	l.c.shardWrites.Add(1)
	return l.LeaseStore.Update(ctx, r)
}

var errMemberRenew = errors.New("member renewal failed (injected)")

type countingMembers struct {
	sharding.MemberStore
	c *countingStores
}

func (m *countingMembers) Renew(ctx context.Context, l sharding.MemberLease) (string, error) {
	if m.c.failMembers.Load() {
		return "", errMemberRenew
	}
	m.c.memberWrites.Add(1)
	return m.MemberStore.Renew(ctx, l)
}

// TestQuietRingWritesOnlyMemberLeases: a quiet balanced ring of 3 replicas and 64
// shards writes no shard Lease over 20 RetryPeriods, and each replica its member Lease
// about once per RetryPeriod: at most N+1 Lease writes per RetryPeriod, whatever S
// (docs/design/sharding-renewal.md). Its shard terms keep running all along.
func TestQuietRingWritesOnlyMemberLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, n, periods = 64, 3, 20
		h := shardingtest.NewHistory(shards)
		shared := sharding.NewMemoryStores(shards)
		var counts countingStores
		var stops []func()
		defer func() {
			for _, stop := range stops {
				stop()
			}
		}()
		for _, id := range []string{"a", "b", "c"} {
			_, stop := runSharder(t, counts.wrap(shared), id, shards, nil, sharding.Callbacks{OnAcquired: h.OnAcquired(t, id)})
			stops = append(stops, stop)
		}
		time.Sleep(10 * time.Second)
		h.CheckBalanced(t, "start", "a", "b", "c")
		shardBefore, memberBefore := counts.shardWrites.Load(), counts.memberWrites.Load()
		start := time.Now()
		time.Sleep(periods * testRetry)
		shardW := counts.shardWrites.Load() - shardBefore
		memberW := counts.memberWrites.Load() - memberBefore
		perPeriod := float64(shardW+memberW) / periods
		t.Logf("quiet ring N=%d S=%d: %d shard Lease writes, %d member Lease writes in %d RetryPeriods (%.2f per RetryPeriod)",
			n, shards, shardW, memberW, periods, perPeriod)
		if shardW != 0 {
			t.Errorf("a quiet ring wrote its shard Leases %d times in %d RetryPeriods, want 0", shardW, periods)
		}
		if perPeriod > n+1 {
			t.Errorf("%.2f Lease writes per RetryPeriod, want at most N+1 = %d", perPeriod, n+1)
		}
		h.CheckGaps(t, "quiet ring", start, 0)
		h.CheckBalanced(t, "quiet ring", "a", "b", "c")
	})
}

// TestMemberRenewalsFailWhileShardLeasesStay: a replica whose member Lease renewals
// fail while its shard Leases' calls go through stops leading every shard
// RenewDeadline after its last renewal that succeeded and releases them; the others
// take them once its member Lease expired in their view (placement gives them the
// shards then), within a LeaseDuration and the settle delay; no shard has two
// owners, and once its renewals work again it gets its share back.
func TestMemberRenewalsFailWhileShardLeasesStay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		shared := sharding.NewMemoryStores(testShards)
		var aStores countingStores
		var stops []func()
		defer func() {
			for _, stop := range stops {
				stop()
			}
		}()
		var mu sync.Mutex
		var aEnded []time.Time
		a, stop := runSharder(t, aStores.wrap(shared), "a", testShards, nil, sharding.Callbacks{
			OnAcquired: h.OnAcquired(t, "a"),
			OnLost: func(sharding.ShardTerm) {
				mu.Lock()
				aEnded = append(aEnded, time.Now())
				mu.Unlock()
			},
		})
		stops = append(stops, stop)
		for _, id := range []string{"b", "c"} {
			_, stop := runSharder(t, shared, id, testShards, nil, sharding.Callbacks{OnAcquired: h.OnAcquired(t, id)})
			stops = append(stops, stop)
		}
		time.Sleep(10 * time.Second)
		h.CheckBalanced(t, "start", "a", "b", "c")
		led := len(a.Owned())
		failed := time.Now()
		aStores.failMembers.Store(true)
		time.Sleep(testRenew + testRetry)
		if n := len(a.Owned()); n != 0 {
			t.Fatalf("a still leads %d shards %v after its member renewals failed", n, testRenew+testRetry)
		}
		mu.Lock()
		ended := append([]time.Time(nil), aEnded...)
		mu.Unlock()
		if len(ended) < led {
			t.Fatalf("%d of a's %d terms ended", len(ended), led)
		}
		for _, at := range ended {
			if at.Sub(failed) > testRenew {
				t.Errorf("a's term ended %v after its renewals began to fail, want at most RenewDeadline %v", at.Sub(failed), testRenew)
			}
		}
		time.Sleep(testLease)
		h.CheckBalanced(t, "a's renewals failing", "b", "c")
		h.CheckGaps(t, "a's renewals failing", failed, testLease+2*testRetry)
		aStores.failMembers.Store(false)
		time.Sleep(4 * testLease)
		h.CheckBalanced(t, "a's renewals working again", "a", "b", "c")
		h.CheckNoOverlap(t)
	})
}

// TestRestartWithSameIdentity: a replica's process dies and a new run of the same
// identity (another incarnation, no death signal) starts at once and renews the same
// member Lease. Those renewals keep none of the old run's shards: the others, and the
// new run itself, take them a LeaseDuration after the new run's first write at most,
// no shard has two owners, and the ring ends balanced with the new run.
func TestRestartWithSameIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		shared := sharding.NewMemoryStores(testShards)
		var stops []func()
		defer func() {
			for _, stop := range stops {
				stop()
			}
		}()
		down := make(chan struct{})
		old, stop := runSharder(t, shardingtest.Cut(shared, down, 0), "a", testShards,
			func(c *sharding.Config) { c.Incarnation = "a-1" }, sharding.Callbacks{OnAcquired: h.OnAcquired(t, "a's first run")})
		stops = append(stops, stop)
		for _, id := range []string{"b", "c"} {
			_, stop := runSharder(t, shared, id, testShards, nil, sharding.Callbacks{OnAcquired: h.OnAcquired(t, id)})
			stops = append(stops, stop)
		}
		time.Sleep(10 * time.Second)
		if len(old.Owned()) == 0 {
			t.Fatal("a's first run leads no shard")
		}
		close(down) // the process dies: its work ends, it writes nothing more
		restarted := time.Now()
		_, stop = runSharder(t, shared, "a", testShards, func(c *sharding.Config) { c.Incarnation = "a-2" },
			sharding.Callbacks{OnAcquired: h.OnAcquired(t, "a")})
		stops = append(stops, stop)
		time.Sleep(3 * testLease)
		// From the end of each of the first run's terms (by RenewDeadline after its last
		// renewal) to the next: at most a LeaseDuration after the new run's first write.
		h.CheckGaps(t, "restart of a", restarted, testLease+2*testRetry)
		h.CheckBalanced(t, "restart of a", "a", "b", "c")
		h.CheckNoOverlap(t)
	})
}
