package events

import (
	"slices"
	"sync/atomic"
)

// subscription is one subscriber: its sink and its identity. Its per-type
// accounting lives in its routes, one per event type it receives.
type subscription struct {
	// cfg is the configuration the subscription was made with, read where
	// it matters: onDrop (nil for lossy subscribers), leaderOnly, and
	// latest, the LatestValue types (a type's key in sink is its index).
	cfg subscribeConfig

	name string
	sink sink
	// ch is the channel of a plain subscription on chan Event, which
	// publishers send to without going through sink; nil otherwise.
	ch chan Event
	// stopCtx unregisters the context.AfterFunc that ends a Subscribe[T]
	// subscription. It is set once under EventBus.mu.
	stopCtx func() bool

	// routes lists the routes to this subscription; guarded by EventBus.mu.
	// The first inlineRoutes of them live in routeBuf and ptrBuf, so that
	// a subscription to a few types is one allocation.
	routes []*route
	ptrBuf [inlineRoutes]*route
	// routeBuf is never reused: a route's closed flag must stay set for
	// deliveries that may still hold it.
	routeBuf [inlineRoutes]route
}

// inlineRoutes is the number of routes a subscription holds without
// allocating them one by one: six covers the subscriptions of the
// reference components (the config publisher's has five types), so a
// scoped subscription's next period allocates no route.
const inlineRoutes = 6

// route is one subscription's state for one event type. Its counters are
// guarded by the mutex of the topic it belongs to.
type route struct {
	// closed is set, under EventBus.mu, when the subscription ends, before
	// the route leaves its topic's routes. offerLocked checks it, so that a
	// delivery that let go of the topic lock offers nothing to a route
	// removed meanwhile (see topic.routes).
	closed atomic.Bool
	sub    *subscription
	topic  *topic
	key    int32 // LatestValue key of the type in sub, or -1

	// lastSeq is the newest sequence number queued, but for deliveries
	// stamped at or below topic.seqFloor, which is at most lastSeq.
	lastSeq uint64
	// base is topic.published when the route was added, and extra what
	// the events queued differ by from those published since (modulo
	// 2^64: deliveries of published events not queued count -1, replays
	// queued +1); see deliveredLocked. Once the route has left its topic,
	// gone is set and delivered holds the final count.
	base, extra uint64
	delivered   uint64
	gone        bool
	dropped     uint64 // refused by a full buffer
	lastDrop    Drop   // the drop offerLocked asked to report
}

// deliveredLocked returns how many events r queued. Its topic's lock must
// be held.
func (r *route) deliveredLocked() uint64 {
	if r.gone {
		return r.delivered
	}
	return r.topic.published - r.base + r.extra
}

// leaveLocked freezes the counters of r as it leaves its topic, whose lock
// must be held.
func (r *route) leaveLocked() {
	r.delivered, r.gone = r.deliveredLocked(), true
}

// initSubscription readies s, made by newSubscribeConfig and resolved, to
// be routed to ch.
func initSubscription[T Event](s *subscription, name string, ch chan T) {
	cfg := &s.cfg
	s.name = name
	s.routes = s.ptrBuf[:0]
	if len(cfg.latest) > 0 {
		s.sink = newLatestSink(ch, cfg.buffer, cfg.latest)
		return
	}
	if c, ok := any(ch).(chan Event); ok {
		s.ch = c
		s.sink = eventSink{ch: c}
		return
	}
	s.sink = typedSink[T]{ch: ch}
}

// newRoute makes the route of s for topic ts. EventBus.mu must be held.
func (s *subscription) newRouteLocked(t *topic) *route {
	var r *route
	if n := len(s.routes); n < inlineRoutes {
		r = &s.routeBuf[n]
	} else {
		r = new(route)
	}
	r.sub, r.topic, r.key = s, t, int32(slices.Index(s.cfg.latest, t.name))
	s.routes = append(s.routes, r)
	return r
}

// offerLocked hands e to r's subscriber, under r's topic lock, and keeps
// lastSeq; the caller counts it delivered (see deliver). For a replay
// it first checks that the subscriber has been given nothing of that type
// stamped at or after seq. It reports whether e was queued, and whether a
// critical subscriber lost an event, described then in r.lastDrop, to be
// reported once the lock is released.
func (r *route) offerLocked(e Event, seq uint64, replay bool) (queued, report bool) {
	if r.closed.Load() || replay && r.lastSeq >= seq {
		return false, false
	}
	s := r.sub
	res, ev := s.sink.send(e, r.key)
	switch res {
	case sendOK:
		r.lastSeq = max(r.lastSeq, seq)
		if ev.victim != "" && !ev.superseded && s.cfg.onDrop != nil {
			r.lastDrop = Drop{Subscriber: s.name, EventType: ev.victim, Total: ev.total}
			return true, true
		}
		return true, false
	case sendFull:
		return false, r.refusedLocked()
	}
	return false, false // sendMismatch: another Go type reported this event type
}

// refusedLocked counts an event refused by a full buffer, and reports
// whether it is to be reported (see offerLocked).
func (r *route) refusedLocked() bool {
	r.dropped++
	if r.sub.cfg.onDrop == nil {
		return false
	}
	r.lastDrop = Drop{Subscriber: r.sub.name, EventType: r.topic.name, Total: r.dropped}
	return true
}

// closeRoutesLocked marks every route of s closed, so that no publisher
// offers to s any more once each of their topic locks has been taken.
// EventBus.mu must be held.
func (s *subscription) closeRoutesLocked() {
	for _, r := range s.routes {
		r.closed.Store(true)
	}
}
