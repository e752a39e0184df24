package sharding_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// promptly is how soon a shard placed on a replica must be taken when what its
// elector followed lets it: a few in-memory writes, no retry, no LeaseDuration.
const promptly = 10 * time.Millisecond

// acquisitions records when each shard was first acquired. Safe for concurrent use.
type acquisitions struct {
	mu    sync.Mutex
	first map[int]time.Time
}

func (a *acquisitions) onAcquired(ctx context.Context) {
	st, _ := sharding.ShardTermOf(termctx.Get(ctx))
	a.mu.Lock()
	if a.first == nil {
		a.first = map[int]time.Time{}
	}
	if _, ok := a.first[st.Shard]; !ok {
		a.first[st.Shard] = time.Now()
	}
	a.mu.Unlock()
}

func (a *acquisitions) at(shard int) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.first[shard]
	return t, ok
}

// phantom keeps the member Lease of a member that runs no Sharder renewed, so that
// placement gives it shards, until leave.
type phantom struct {
	members sharding.MemberStore
	id      string
	stop    chan struct{}
	done    chan struct{}
}

// startPhantom writes id's member Lease, and renews it until leave (or the end of
// the test).
func startPhantom(t *testing.T, members sharding.MemberStore, id string) *phantom {
	p := &phantom{members: members, id: id, stop: make(chan struct{}), done: make(chan struct{})}
	renew := func() {
		if _, err := members.Renew(context.Background(), sharding.MemberLease{Identity: id, LeaseDuration: testLease}); err != nil {
			t.Errorf("renewing the member lease of %s: %v", id, err)
		}
	}
	renew() // before the test starts a Sharder that must see it
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			case <-time.After(testRetry):
			}
			renew()
		}
	}()
	t.Cleanup(p.halt)
	return p
}

// halt stops renewing.
func (p *phantom) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
}

// leave stops renewing and deletes the member Lease.
func (p *phantom) leave(t *testing.T) {
	p.halt()
	if err := p.members.Leave(context.Background(), p.id); err != nil {
		t.Fatal(err)
	}
}

// runSharder runs a Sharder of identity id on stores until the returned stop.
func runSharder(t *testing.T, stores sharding.Stores, id string, shards int, edit func(*sharding.Config), cb sharding.Callbacks) (*sharding.Sharder, func()) {
	t.Helper()
	cfg := sharding.Config{Identity: id, Name: "ring", Namespace: "default", Shards: shards,
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry}
	if edit != nil {
		edit(&cfg)
	}
	s, err := sharding.NewWithStores(cfg, stores, cb, testLogger(id))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", id, err)
		}
	}()
	return s, func() { cancel(); <-done }
}

// placedOn returns the shards of a ring of shards that placement over members gives
// to id.
func placedOn(t *testing.T, shards int, members []string, id string) []int {
	ring, err := sharding.NewRing(shards)
	if err != nil {
		t.Fatal(err)
	}
	return sharding.Place(ring, members).Shards(id)
}

// TestShardPlacedAfterFollowingAbsentLease: on a fresh ring, b follows the absent
// Leases of the shards placed on member c (which runs no Sharder) for two
// LeaseDurations without writing them; when c leaves, b creates them within
// milliseconds. (When a refused Create made the elector look again, that look
// waited a LeaseDuration.)
func TestShardPlacedAfterFollowingAbsentLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 8
		stores := sharding.NewMemoryStores(shards)
		c := startPhantom(t, stores.Members, "c")
		var got acquisitions
		b, stop := runSharder(t, stores, "b", shards, nil, sharding.Callbacks{OnAcquired: got.onAcquired})
		defer stop()
		time.Sleep(2 * testLease)
		ofC := placedOn(t, shards, []string{"b", "c"}, "c")
		if len(ofC) == 0 {
			t.Fatal("placement gives c no shard")
		}
		for _, shard := range ofC {
			if _, err := stores.Shard(shard).Get(context.Background()); err == nil {
				t.Fatalf("shard %d placed on c was written while c ran nothing", shard)
			}
		}
		if owned := len(b.Owned()); owned != shards-len(ofC) {
			t.Fatalf("b owns %d shards, want %d", owned, shards-len(ofC))
		}
		left := time.Now()
		c.leave(t)
		time.Sleep(testLease)
		for _, shard := range ofC {
			at, ok := got.at(shard)
			if !ok {
				t.Fatalf("b never took shard %d after c left", shard)
			}
			if took := at.Sub(left); took > promptly {
				t.Errorf("b took shard %d %v after c left, want at most %v", shard, took, promptly)
			}
		}
	})
}

// TestShardPlacedAfterFollowingRelease: b follows the Leases of the shards placed on
// member c while c's electors lead them and then release them; b writes none of them,
// and when c's member Lease goes, b takes them within milliseconds (not at its next
// retry after a refused write).
func TestShardPlacedAfterFollowingRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 8
		stores := sharding.NewMemoryStores(shards)
		c := startPhantom(t, stores.Members, "c")
		ofC := placedOn(t, shards, []string{"b", "c"}, "c")
		// c's electors lead c's shards.
		cctx, stopC := context.WithCancel(context.Background())
		var cDone sync.WaitGroup
		defer func() { stopC(); cDone.Wait() }()
		for _, shard := range ofC {
			e, err := leaderelection.NewWithStore(leaderelection.Config{Identity: "c",
				LeaseName: sharding.ShardLeaseName("ring", shard), LeaseNamespace: "default",
				LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry, ReleaseOnCancel: true,
			}, stores.Shard(shard), leaderelection.Callbacks{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			cDone.Go(func() { _ = e.Start(cctx) })
		}
		time.Sleep(time.Second)
		var got acquisitions
		b, stop := runSharder(t, stores, "b", shards, nil, sharding.Callbacks{OnAcquired: got.onAcquired})
		defer stop()
		time.Sleep(time.Second)
		stopC() // c's electors release their shards
		cDone.Wait()
		time.Sleep(2 * testLease)
		for _, shard := range ofC {
			r, err := stores.Shard(shard).Get(context.Background())
			if err != nil || r.HolderIdentity != "" {
				t.Fatalf("shard %d: %+v, %v; want released by c and not written since", shard, r, err)
			}
			if slices.ContainsFunc(b.Owned(), func(st sharding.ShardTerm) bool { return st.Shard == shard }) {
				t.Fatalf("b owns shard %d placed on c", shard)
			}
		}
		left := time.Now()
		c.leave(t)
		time.Sleep(testLease)
		for _, shard := range ofC {
			at, ok := got.at(shard)
			if !ok {
				t.Fatalf("b never took shard %d after c left", shard)
			}
			if took := at.Sub(left); took > promptly {
				t.Errorf("b took shard %d %v after c left, want at most %v", shard, took, promptly)
			}
		}
	})
}
