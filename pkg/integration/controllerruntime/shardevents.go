package controllerruntime

import (
	"fmt"
	"sync"
	"time"

	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// shardEvents records the Events of a sharded controller's shard Leases on this
// replica, with the reasons shardReasons: one leaseEvents per shard, made when the
// shard is first led here, all recorded through one eventPacer.
type shardEvents struct {
	s     *Sharded
	pacer *eventPacer

	// mu guards byShard.
	mu      sync.Mutex
	byShard map[int]*leaseEvents
}

func newShardEvents(s *Sharded) *shardEvents {
	return &shardEvents{
		s:       s,
		pacer:   newEventPacer(eventQuiet, eventLateness, lastMoveOf(s)),
		byShard: map[int]*leaseEvents{},
	}
}

// lastMoveOf returns the pacer's view of the ring's moves (Sharder.LastMove; s.sharder
// is made after the pacer, before any Event), or nil when the ring runs on a clock of
// its own (sharding.Config.Clock), whose times do not compare with time.Now's.
func lastMoveOf(s *Sharded) func() time.Time {
	if s.config.Clock != nil {
		return nil
	}
	return func() time.Time { return s.sharder.LastMove() }
}

// of returns the recorder of shard's Lease.
func (e *shardEvents) of(shard int) *leaseEvents {
	e.mu.Lock()
	defer e.mu.Unlock()
	if le := e.byShard[shard]; le != nil {
		return le
	}
	le := &leaseEvents{
		cs: e.s.clientset, identity: e.s.config.Identity,
		namespace: e.s.config.Namespace, name: sharding.ShardLeaseName(e.s.config.Name, shard),
		// Run releases the shard Leases it leads when its context ends.
		release:  true,
		stopping: func() bool { return e.s.r.baseContext().Err() != nil },
		stats: func() k8sle.Stats {
			st, _ := e.s.sharder.ShardStats(shard)
			return st
		},
		reasons: shardReasons, what: fmt.Sprintf("owner of shard %d", shard),
		pace: e.pacer.add,
	}
	e.byShard[shard] = le
	return le
}

// lost records the Event of the end of t.
func (e *shardEvents) lost(t sharding.ShardTerm) { e.of(t.Shard).stopped() }

// wait records the Events the pacer holds and waits for those being recorded.
func (e *shardEvents) wait() {
	e.pacer.flush()
	e.mu.Lock()
	all := make([]*leaseEvents, 0, len(e.byShard))
	for _, le := range e.byShard {
		all = append(all, le)
	}
	e.mu.Unlock()
	for _, le := range all {
		le.wg.Wait()
	}
}
