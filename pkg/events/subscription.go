package events

import "sync"

// subscription is one subscriber's queue and accounting.
type subscription struct {
	name       string
	onDrop     func(Drop) // nil for lossy subscribers
	latest     map[string]bool
	leaderOnly bool
	sink       sink

	// mu guards the fields below, and serializes sends to the sink so that
	// the sequence checks of Republish and the order of delivery agree.
	mu      sync.Mutex
	closed  bool
	slots   []typeSlot // by topic index
	stopCtx func() bool
	// lost and skipped count, by event type, queued events removed to make
	// room for newer state: lost ones were of a type not declared
	// LatestValue, skipped ones were superseded versions of state.
	lost    map[string]uint64
	skipped map[string]uint64
}

// typeSlot is a subscriber's state for one event type.
type typeSlot struct {
	name      string
	lastSeq   uint64 // newest sequence delivered
	delivered uint64
	dropped   uint64
}

// newSubscription returns a subscription delivering to ch, an unbuffered
// channel for LatestValue subscriptions and a buffered one otherwise.
func newSubscription[T Event](name string, cfg subscribeConfig, bufferSize int, ch chan T) *subscription {
	sub := &subscription{name: name, onDrop: cfg.onDrop, leaderOnly: cfg.leaderOnly}
	if len(cfg.latest) == 0 {
		sub.sink = chanSink(ch)
		return sub
	}
	sub.latest = make(map[string]bool, len(cfg.latest))
	for _, t := range cfg.latest {
		sub.latest[t] = true
	}
	sub.sink = newLatestSink(&sub.mu, bufferSize, ch)
	return sub
}

func chanSink[T Event](ch chan T) sink {
	if c, ok := any(ch).(chan Event); ok {
		return eventSink{ch: c}
	}
	return typedSink[T]{ch: ch}
}

func (s *subscription) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	stop := s.stopCtx
	s.sink.close()
	s.mu.Unlock()
	s.sink.wait()
	if stop != nil {
		stop()
	}
}

// slotLocked returns the state for topic t, growing the table.
func (s *subscription) slotLocked(t *topic) *typeSlot {
	if t.index >= len(s.slots) {
		s.slots = append(s.slots, make([]typeSlot, t.index+1-len(s.slots))...)
	}
	sl := &s.slots[t.index]
	if sl.name == "" {
		sl.name = t.name
	}
	return sl
}

// offer hands e to the subscriber. For a replay it first checks that the
// subscriber has nothing of that type stamped at or after seq. It returns
// whether e was queued, and, for a critical subscriber that lost an event,
// the drop to report once the lock is released.
func (s *subscription) offer(e Event, t *topic, seq uint64, replay bool) (queued bool, drop *Drop) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, nil
	}
	sl := s.slotLocked(t)
	if replay && sl.lastSeq >= seq {
		s.mu.Unlock()
		return false, nil
	}
	switch s.sink.trySend(e) {
	case sendOK:
		queued = true
	case sendFull:
		if s.latest[t.name] {
			if victim, superseded, ok := s.sink.evictFor(e, t.name, s.latest); ok {
				queued = true
				if victim == "" {
					// The reader made room meanwhile.
				} else if superseded {
					s.skipped = increment(s.skipped, victim)
				} else {
					n := s.lost[victim] + 1
					s.lost = increment(s.lost, victim)
					if s.onDrop != nil {
						drop = &Drop{Subscriber: s.name, EventType: victim, Total: n}
					}
				}
				break
			}
		}
		sl.dropped++
		if s.onDrop != nil {
			drop = &Drop{Subscriber: s.name, EventType: t.name, Total: sl.dropped}
		}
	case sendMismatch:
		// Another Go type reported this event type; not for this channel.
	}
	if queued {
		sl.delivered++
		sl.lastSeq = max(sl.lastSeq, seq)
	}
	s.mu.Unlock()
	return queued, drop
}

func increment(m map[string]uint64, key string) map[string]uint64 {
	if m == nil {
		m = map[string]uint64{}
	}
	m[key]++
	return m
}
