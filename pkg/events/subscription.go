package events

import "slices"

// subscription is one subscriber: its sink and its identity. Its per-type
// accounting lives in its routes, one per event type it receives.
type subscription struct {
	name string
	// cfg is the configuration the subscription was made with, read where
	// it matters: onDrop (nil for lossy subscribers), leaderOnly, and
	// latest, the LatestValue types (a type's key in sink is its index).
	cfg  subscribeConfig
	sink sink
	// stopCtx unregisters the context.AfterFunc that ends a subscription
	// made under a context that can be done. It is set once under
	// EventBus.mu.
	stopCtx func() bool

	// routes lists the routes to this subscription; guarded by EventBus.mu.
	routes []*route
}

// newSink returns the sink of a subscription on ch configured by cfg.
func newSink[T Event](ch chan T, cfg subscribeConfig) sink {
	if len(cfg.latest) > 0 {
		return newLatestSink(ch, cfg.buffer, cfg.latest)
	}
	if c, ok := any(ch).(chan Event); ok {
		return eventSink{ch: c}
	}
	return typedSink[T]{ch: ch}
}

// route is one subscription's state for one event type. Its fields are
// guarded by the mutex of its topic; those a delivery reads come first.
type route struct {
	// ch is the channel of a plain subscription on chan Event (an eventSink),
	// which a delivery sends to directly, without the call through sink;
	// nil for any other sink.
	ch   chan Event
	sink sink  // the subscription's
	key  int32 // LatestValue key of the type in sub, or -1
	// left is set when the route leaves its topic: a delivery that let go
	// of the topic's lock in the middle offers nothing to a route that
	// left meanwhile (see topic.routes).
	left bool
	// lastSeq is the newest sequence number queued (see Republish).
	lastSeq   uint64
	delivered uint64 // events queued
	dropped   uint64 // events refused by a full buffer

	sub   *subscription
	topic *topic
}

// newRouteLocked makes the route of s for topic t. EventBus.mu must be
// held.
func (s *subscription) newRouteLocked(t *topic) *route {
	r := &route{sink: s.sink, key: int32(slices.Index(s.cfg.latest, t.name)), sub: s, topic: t}
	if plain, ok := s.sink.(eventSink); ok {
		r.ch = plain.ch
	}
	s.routes = append(s.routes, r)
	return r
}

// drop counts what a send to r that did not simply queue its event cost
// the subscriber, and returns the Drop to report if the subscriber is
// Critical: the event itself, refused by a full buffer, or an older event
// of another type, lost to make room for it (see LatestValue).
func (r *route) drop(res sendResult, ev eviction) (d Drop, report bool) {
	switch {
	case res == sendFull:
		r.dropped++
		d = Drop{Subscriber: r.sub.name, EventType: r.topic.name, Total: r.dropped}
	case ev.victim != "":
		d = Drop{Subscriber: r.sub.name, EventType: ev.victim, Total: ev.total}
	default:
		return Drop{}, false // sendMismatch: another Go type reported this event type
	}
	return d, r.sub.cfg.onDrop != nil
}
