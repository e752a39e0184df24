package shardingtest

import (
	"context"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// Shapes records the shard terms of replicas whose rings may differ in shape (another
// number of shards), to check that no object is owned by two replicas at once: a
// shard name means a different hash range to each shape, so History's per-shard check
// does not see it. Safe for concurrent use.
type Shapes struct {
	mu    sync.Mutex
	terms []shapedTerm
}

type shapedTerm struct {
	replica  string
	ring     sharding.Ring
	shard    int
	from, to time.Time // to is zero while the term runs
}

// OnAcquired returns the Callbacks.OnAcquired of replica id on ring: it records each
// term from its start to the end of its context, by the clock of the test (the fake
// one in a synctest bubble).
func (s *Shapes) OnAcquired(id string, ring sharding.Ring) func(ctx context.Context) {
	return func(ctx context.Context) {
		st, _ := sharding.ShardTermOf(termctx.Get(ctx))
		s.mu.Lock()
		i := len(s.terms)
		s.terms = append(s.terms, shapedTerm{replica: id, ring: ring, shard: st.Shard, from: time.Now()})
		s.mu.Unlock()
		<-ctx.Done()
		s.mu.Lock()
		s.terms[i].to = time.Now()
		s.mu.Unlock()
	}
}

// DoublyOwned returns how many of uids were, at some instant, in a shard term of two
// different replicas (terms still running count until now).
func (s *Shapes) DoublyOwned(uids []string) int {
	s.mu.Lock()
	terms := append([]shapedTerm(nil), s.terms...)
	s.mu.Unlock()
	now := time.Now()
	for i := range terms {
		if terms[i].to.IsZero() {
			terms[i].to = now
		}
	}
	n := 0
	for _, uid := range uids {
		if ownedTwice(terms, uid) {
			n++
		}
	}
	return n
}

func ownedTwice(terms []shapedTerm, uid string) bool {
	for i, a := range terms {
		if a.ring.ShardOf(uid) != a.shard {
			continue
		}
		for _, b := range terms[i+1:] {
			if a.replica != b.replica && b.ring.ShardOf(uid) == b.shard && a.from.Before(b.to) && b.from.Before(a.to) {
				return true
			}
		}
	}
	return false
}

// Terms returns the number of shard terms recorded.
func (s *Shapes) Terms() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.terms)
}
