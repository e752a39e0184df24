package events

import (
	"log/slog"
	"sync"
	"sync/atomic"
)

// DefaultCapacity is the number of events held before Start when
// NewEventBus is given a capacity of zero or less.
const DefaultCapacity = 1024

// Bus states, in the only order they can change.
const (
	stateNew int32 = iota
	stateStarted
	stateStopped
)

// EventBus routes events from publishers to subscribers. The zero value is
// not usable; create one with NewEventBus.
type EventBus struct {
	state  atomic.Int32  // stateNew, stateStarted or stateStopped
	seq    atomic.Uint64 // last sequence number handed out by NextSequence
	routes atomic.Pointer[routeTable]

	capacity  int
	logger    *slog.Logger
	startOnce sync.Once

	rejectedNil     atomic.Uint64
	rejectedStopped atomic.Uint64

	// routeLeft, set by this package's tests only, is called with mu held
	// each time routes have left topic t (on Unsubscribe, at the end of a
	// subscription's context, on Stop) and before the counters of their
	// subscriptions are read: a test delivers to t from it, as a publisher
	// that looked t up just before would, to check that a route counts
	// nothing published after it left.
	routeLeft func(t *topic)

	// mu guards the fields below it, and serializes changes to routes and
	// to the routes of every topic.
	mu sync.Mutex
	// pending holds the events published (or republished) before Start,
	// oldest first; see holdLocked.
	pending fifo[pendingEvent]
	// preStartDropped counts, per event type, events held before Start
	// that were dropped because pending was full.
	preStartDropped map[string]uint64
	// subs maps the channel handed to a subscriber to its subscription.
	subs map[any]*subscription
	// nextTopic is the index the next topic gets.
	nextTopic int
	// ended adds up, by subscriber name, the counters of ended subscriptions.
	ended map[string]*SubscriberStats
}

// pendingEvent is an event held before Start.
type pendingEvent struct {
	event  Event
	seq    uint64
	replay bool // held by Republish rather than Publish
}

// routeTable is a snapshot of which event types have a topic, read by
// publishers without a lock. Writers copy it under EventBus.mu and swap it
// in, which happens only when an event type is seen for the first time or
// a subscription to every type comes or goes. A topic is made once per
// event type and kept by every later table, so a subscription to a type
// that has a topic changes only that topic.
type routeTable struct {
	topics map[string]*topic
	// universal lists the subscriptions that want every event type.
	universal []*subscription
}

// clone returns a copy of rt to modify. The copy shares rt's topics.
func (rt *routeTable) clone() *routeTable {
	c := &routeTable{topics: make(map[string]*topic, len(rt.topics)+1), universal: rt.universal}
	for name, t := range rt.topics {
		c.topics[name] = t
	}
	return c
}

// topic routes one event type, for the life of the bus.
type topic struct {
	name  string
	index int // the type's number, for the classes of pending

	replayed atomic.Uint64 // Republish calls for this type

	// latest counts the routes on which the type is LatestValue. It is
	// guarded by EventBus.mu.
	latest int

	// mu serializes the deliveries of this event type, and guards the
	// counters of its routes and the fields below. routes changes with
	// EventBus.mu held too.
	mu sync.Mutex
	// routes lists the routes the type goes to, in the order they were
	// added. A removal replaces the slice rather than editing it, so that
	// a delivery that let go of mu in the middle (see deliverTo) still
	// ranges over the routes it started with; it skips those that have
	// left meanwhile (route.left).
	routes []*route
}

// NewEventBus returns a bus that holds up to capacity events published
// before Start (DefaultCapacity when capacity <= 0). What happens to events
// beyond that is described in the package doc (Before Start and after
// Stop).
//
// The bus logs through slog.Default(); use NewEventBusWithLogger to choose.
func NewEventBus(capacity int) *EventBus {
	return NewEventBusWithLogger(capacity, nil)
}

// NewEventBusWithLogger is NewEventBus with a logger; nil means slog.Default().
func NewEventBusWithLogger(capacity int, logger *slog.Logger) *EventBus {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	if logger == nil {
		logger = slog.Default()
	}
	b := &EventBus{
		capacity:        capacity,
		logger:          logger,
		pending:         newFIFO[pendingEvent](capacity, 1),
		preStartDropped: map[string]uint64{},
		subs:            map[any]*subscription{},
		ended:           map[string]*SubscriberStats{},
	}
	b.routes.Store(&routeTable{topics: map[string]*topic{}})
	return b
}

// Start delivers the events held so far, in order, and from then on
// delivers each event as it is published. Events published or republished
// while Start delivers are held too, behind the ones being delivered, and
// delivered by the same Start. It is idempotent: later calls, and calls
// concurrent with the first, return once the first has finished. Start
// after Stop does nothing.
func (b *EventBus) Start() {
	b.startOnce.Do(func() {
		var batch []pendingEvent
		for {
			b.mu.Lock()
			if b.state.Load() == stateStopped {
				b.mu.Unlock()
				return
			}
			batch = batch[:0]
			for p, ok := b.pending.pop(); ok; p, ok = b.pending.pop() {
				batch = append(batch, p)
			}
			if len(batch) == 0 {
				b.pending = fifo[pendingEvent]{}
				b.state.Store(stateStarted)
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
			// Deliver outside the lock; publishes made meanwhile are held
			// behind this batch and go out on the next round.
			for _, p := range batch {
				b.deliver(p.event, p.seq, p.replay)
			}
			clear(batch)
		}
	})
}

// Started reports whether Start has completed and Stop has not been called.
func (b *EventBus) Started() bool { return b.state.Load() == stateStarted }

// Stopped reports whether Stop has been called.
func (b *EventBus) Stopped() bool { return b.state.Load() == stateStopped }

// Stop closes every subscription channel and makes the bus refuse further
// use: Publish and Republish return 0 and count the event in
// Stats().RejectedStopped, and new subscriptions get a closed channel.
// Events still held from before Start are discarded, counted in
// Stats().PreStartDropped. Stop is idempotent.
func (b *EventBus) Stop() {
	b.mu.Lock()
	if b.state.Load() == stateStopped {
		b.mu.Unlock()
		return
	}
	b.state.Store(stateStopped)
	discarded := b.pending.len()
	for p, ok := b.pending.pop(); ok; p, ok = b.pending.pop() {
		b.preStartDropped[p.event.EventType()]++
	}
	b.pending = fifo[pendingEvent]{}
	old := b.routes.Load()
	b.routes.Store(&routeTable{topics: map[string]*topic{}})
	for _, t := range old.topics {
		t.clearRoutesLocked() // waits for the delivery in progress, if any
		if b.routeLeft != nil {
			b.routeLeft(t)
		}
	}
	for _, s := range b.subs {
		b.endLocked(s)
	}
	clear(b.subs)
	b.mu.Unlock()

	if discarded > 0 {
		b.logger.Warn("event bus stopped before start, discarding held events", "events", discarded)
	}
}

// endLocked closes the sink of s, which no publisher can reach any more,
// and adds its counters to the totals of its name. b.mu must be held, so
// that Stats never sees s neither live nor ended.
func (b *EventBus) endLocked(s *subscription) {
	s.sink.close()
	if s.stopCtx != nil {
		s.stopCtx()
	}
	e := b.ended[s.name]
	if e == nil {
		e = &SubscriberStats{Name: s.name, Delivered: map[string]uint64{}, Dropped: map[string]uint64{}, Skipped: map[string]uint64{}}
		b.ended[s.name] = e
	}
	s.addTo(e)
}
