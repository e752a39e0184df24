package sharding_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// hangingMembers is a MemberStore whose Watch calls hang until their context ends
// while hang is set (a black-holed List), and whose open watches break on cut.
type hangingMembers struct {
	sharding.MemberStore

	// mu guards the fields below.
	mu   sync.Mutex
	hang bool
	cut  chan struct{} // closed to break the open watches
}

func (m *hangingMembers) set(hang bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hang = hang
	if hang {
		close(m.cut)
		m.cut = make(chan struct{})
	}
}

func (m *hangingMembers) Watch(ctx context.Context) (<-chan sharding.MemberEvent, error) {
	m.mu.Lock()
	hang, cut := m.hang, m.cut
	m.mu.Unlock()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(ctx)
	in, err := m.MemberStore.Watch(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	out := make(chan sharding.MemberEvent)
	go func() {
		defer close(out)
		defer func() {
			cancel()
			for range in {
			}
		}()
		for ev := range in {
			select {
			case out <- ev:
			case <-cut:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// TestSharderMemberWatchHangs: a replica whose member Watch call hangs (the List of a
// black-holed API server, with no timeout of its own) gives it up after RenewDeadline
// and tries again, both before it joined and while it runs, so that it keeps renewing
// its member Lease meanwhile. (test/chaos/sharded, seed 6: a call that hung held up
// the replica's loop for good; the others saw its member Lease expire while it kept
// its shards, and the shares stayed 4, 3, 3, 2.)
func TestSharderMemberWatchHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		stores := sharding.NewMemoryStores(testShards)
		var all []*replica
		defer func() {
			for _, r := range all {
				r.stop()
			}
		}()
		all = append(all, startReplica(t, stores, "a", h))
		hung := &hangingMembers{MemberStore: stores.Members, hang: true, cut: make(chan struct{})}
		all = append(all, startReplica(t, sharding.Stores{Shard: stores.Shard, Members: hung}, "b", h))
		time.Sleep(testLease)
		hung.set(false)
		time.Sleep(2 * testLease)
		h.CheckBalanced(t, "a first member watch that hung", "a", "b")

		hung.set(true) // breaks b's watch; its next Watch call hangs
		for range 4 {
			time.Sleep(testLease)
			if got := all[0].sharder.Members(); !slices.Equal(got, []string{"a", "b"}) {
				t.Fatalf("a sees members %v while b's member watch hangs, want [a b]: b stopped renewing", got)
			}
		}
		hung.set(false)
		time.Sleep(2 * testLease)
		h.CheckBalanced(t, "a member watch that hung while running", "a", "b")
		for _, r := range all {
			r.stop()
		}
		h.CheckNoOverlap(t)
		h.CheckAllEnded(t)
	})
}
