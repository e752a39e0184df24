package events

import "sort"

// Stats is a snapshot of the bus's counters.
type Stats struct {
	// RejectedNil counts nil and typed-nil events refused by Publish.
	RejectedNil uint64
	// RejectedStopped counts events published after Stop.
	RejectedStopped uint64
	// PreStartDropped counts, per event type, events published before Start
	// that did not fit in the bus's capacity.
	PreStartDropped map[string]uint64
	// Replayed counts Republish calls per event type.
	Replayed map[string]uint64
	// Subscribers lists the live subscriptions, sorted by name.
	Subscribers []SubscriberStats
	// Totals has one entry per subscriber name, sorted, adding up every
	// subscription of that name, live or ended: its counters never go down,
	// which is what a metrics exporter needs when leader-only subscriptions
	// come and go with the terms.
	Totals []SubscriberStats
}

// SubscriberStats is one subscription's accounting, per event type.
type SubscriberStats struct {
	Name       string
	Critical   bool
	LeaderOnly bool
	// Delivered counts events queued for the subscriber.
	Delivered map[string]uint64
	// Dropped counts events the subscriber lost: refused by a full buffer,
	// or removed from it to make room for newer state.
	Dropped map[string]uint64
	// Skipped counts superseded versions of LatestValue state removed from
	// a full buffer in favour of a newer version.
	Skipped map[string]uint64
}

// Stats returns a snapshot of the counters.
func (b *EventBus) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := Stats{
		RejectedNil:     b.rejectedNil.Load(),
		RejectedStopped: b.rejectedStopped.Load(),
		PreStartDropped: make(map[string]uint64, len(b.preStartDropped)),
		Replayed:        map[string]uint64{},
	}
	for k, v := range b.preStartDropped {
		st.PreStartDropped[k] = v
	}
	for name, t := range b.routes.Load().topics {
		if n := t.replayed.Load(); n > 0 {
			st.Replayed[name] = n
		}
	}
	totals := make(map[string]*SubscriberStats, len(b.ended))
	for name, e := range b.ended {
		c := e.clone()
		totals[name] = &c
	}
	for _, s := range b.subs {
		ss := s.stats()
		st.Subscribers = append(st.Subscribers, ss)
		if t := totals[ss.Name]; t != nil {
			t.add(ss)
		} else {
			c := ss.clone()
			totals[ss.Name] = &c
		}
	}
	for _, t := range totals {
		st.Totals = append(st.Totals, *t)
	}
	sort.Slice(st.Subscribers, func(i, j int) bool { return st.Subscribers[i].Name < st.Subscribers[j].Name })
	sort.Slice(st.Totals, func(i, j int) bool { return st.Totals[i].Name < st.Totals[j].Name })
	return st
}

func (s SubscriberStats) clone() SubscriberStats {
	c := s
	c.Delivered, c.Dropped, c.Skipped = map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	c.add(s)
	return c
}

// add adds o's counters to s's; s's maps must be its own.
func (s *SubscriberStats) add(o SubscriberStats) {
	s.Critical = s.Critical || o.Critical
	s.LeaderOnly = s.LeaderOnly || o.LeaderOnly
	for k, v := range o.Delivered {
		s.Delivered[k] += v
	}
	for k, v := range o.Dropped {
		s.Dropped[k] += v
	}
	for k, v := range o.Skipped {
		s.Skipped[k] += v
	}
}

// stats reads the counters of s. EventBus.mu must be held (it guards
// s.routes); it takes each route's topic lock in turn.
func (s *subscription) stats() SubscriberStats {
	st := SubscriberStats{Name: s.name, Delivered: map[string]uint64{}, Dropped: map[string]uint64{}, Skipped: map[string]uint64{}}
	s.addTo(&st)
	return st
}

// addTo adds the counters of s to st, whose maps must be its own.
// EventBus.mu must be held, as for stats.
func (s *subscription) addTo(st *SubscriberStats) {
	st.Critical = st.Critical || s.cfg.onDrop != nil
	st.LeaderOnly = st.LeaderOnly || s.cfg.leaderOnly
	for _, r := range s.routes {
		r.topic.mu.Lock()
		delivered, dropped := r.delivered, r.dropped
		r.topic.mu.Unlock()
		if delivered > 0 {
			st.Delivered[r.topic.name] += delivered
		}
		if dropped > 0 {
			st.Dropped[r.topic.name] += dropped
		}
	}
	s.sink.addEvictions(st.Dropped, st.Skipped)
}
