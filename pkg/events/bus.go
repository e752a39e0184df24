package events

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"unsafe"
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
	// requests counts the Request calls in flight, so that Publish looks for
	// responses only while someone waits for one.
	requests atomic.Int32

	capacity  int
	logger    *slog.Logger
	startOnce sync.Once

	rejectedNil     atomic.Uint64
	rejectedStopped atomic.Uint64

	// routeLeft, set by this package's tests only, is called with mu held
	// each time routes have left topic t (on Unsubscribe, at the end of a
	// subscription's context, on Stop, at the end of a Scope's period) and
	// before the counters of their subscriptions are read: a test delivers
	// to t from it, as a publisher that looked t up just before would, to
	// check that a route counts nothing published after it left.
	routeLeft func(t *topic)

	// mu guards the fields below it, and serializes changes to routes.
	mu sync.Mutex
	// pending holds the events published (or republished) before Start,
	// oldest first; see hold.
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

	waitersMu sync.Mutex
	waiters   map[string]*waiter // by request ID
}

// pendingEvent is an event held before Start.
type pendingEvent struct {
	event  Event
	seq    uint64
	replay bool // held by Republish rather than Publish
}

// routeTable is a snapshot of which event types have a topic. Writers copy
// it under EventBus.mu and swap it in atomically, which happens only when
// an event type is seen for the first time or a subscription to every type
// comes or goes; only its lookup cache changes afterwards. A topic is made
// once per event type and kept by every later table, so a subscription to
// a type that has a topic changes only that topic's routes, under its lock,
// and copies nothing.
type routeTable struct {
	topics map[string]*topic
	// universal lists the subscriptions that want every event type.
	universal []*subscription
	// cache maps the address of an event type string to its topic, in front
	// of the map: EventType methods return the same constant string every
	// time, and comparing an address is cheaper than hashing the string. A
	// slot is filled once; a type whose slot another type took is looked up
	// in the map, which costs a hash and no allocation. An entry holds the
	// string, so its memory cannot be reused for another while cached.
	cache [topicCacheSize]atomic.Pointer[cachedTopic]
}

const topicCacheSize = 64 // a power of two

type cachedTopic struct {
	name  string
	topic *topic
}

// topic routes one event type, for the life of the bus.
type topic struct {
	name  string
	index int // the type's number, for the classes of pending

	replayed atomic.Uint64 // Republish calls for this type

	// mu serializes the deliveries of this event type, and guards the
	// counters of its routes and the fields below. routes, chans, typed
	// and latest change with EventBus.mu held too, so that they may be
	// read under either.
	mu sync.Mutex
	// routes lists the routes the type goes to. chans and typed hold, index
	// for index, what a delivery sends to directly: the channel of each
	// that is a plain subscription on chan Event, and the sink of each that
	// is a Subscribe[T] channel of another T and not LatestValue (nil for
	// the others), so that a delivery to those reads no route; consecutive
	// sinks of one T take a run of sends with one assertion of the event's
	// Go type, and a LatestValue route, nil in both, the direct send its
	// sink makes while it keeps up (see sink.sendRun). A route leaves
	// routes, chans and typed (under mu) before its subscription's channel
	// is closed, so a delivery that holds mu and has not let go of it since
	// it read them can send to every channel there without checking
	// route.closed. When a delivery lets go of mu in the middle (to report
	// a drop) it counts itself in iterating, checks route.closed from then
	// on, and while any does, a removal copies the slices instead of
	// editing them in place (appends never touch what an older slice header
	// covers).
	routes    []*route
	chans     []chan Event
	typed     []sink
	iterating int
	latest    int // routes on which the type is LatestValue
	// published counts the deliveries of published (not replayed) events
	// of the type; a route's delivered count is derived from it (see
	// route.deliveredLocked), so that a delivery writes nothing per route
	// while every subscriber takes the event.
	published uint64
	// seqFloor is at most the lastSeq of every route in routes: a delivery
	// stamped at or below it need not update any route's lastSeq.
	seqFloor uint64
}

// clone returns a copy of rt to modify, with an empty lookup cache. The
// copy shares rt's topics.
func (rt *routeTable) clone() *routeTable {
	c := &routeTable{topics: make(map[string]*topic, len(rt.topics)+1), universal: rt.universal}
	for name, t := range rt.topics {
		c.topics[name] = t
	}
	return c
}

// lookup returns the topic for name, or nil.
func (rt *routeTable) lookup(name string) *topic {
	p := unsafe.StringData(name)
	slot := &rt.cache[(uintptr(unsafe.Pointer(p))>>3)&(topicCacheSize-1)]
	c := slot.Load()
	if c != nil && unsafe.StringData(c.name) == p && len(c.name) == len(name) {
		return c.topic
	}
	t := rt.topics[name]
	if t != nil && c == nil {
		slot.CompareAndSwap(nil, &cachedTopic{name: name, topic: t})
	}
	return t
}

// NewEventBus returns a bus that holds up to capacity events published
// before Start (DefaultCapacity when capacity <= 0). What happens to events
// beyond that is described in the package doc (Usage).
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
		waiters:         map[string]*waiter{},
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
// Stats().RejectedStopped, new subscriptions get a closed channel, Request
// returns ErrStopped. Events still held from before Start are discarded,
// counted in Stats().PreStartDropped. Stop is idempotent.
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
	for _, s := range b.subs {
		s.closeRoutesLocked()
	}
	for _, t := range old.topics {
		t.clearRoutesLocked() // waits for deliveries in progress
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
// that Stats never sees s neither live nor ended. Once a name has ended
// once, this allocates nothing for the types it has counted before.
func (b *EventBus) endLocked(s *subscription) {
	s.sink.close()
	if s.stopCtx != nil {
		s.stopCtx()
	}
	b.countEndedLocked(s)
}

// countEndedLocked adds the counters of s to the totals of its name. b.mu
// must be held.
func (b *EventBus) countEndedLocked(s *subscription) {
	e := b.ended[s.name]
	if e == nil {
		e = &SubscriberStats{Name: s.name, Delivered: map[string]uint64{}, Dropped: map[string]uint64{}, Skipped: map[string]uint64{}}
		b.ended[s.name] = e
	}
	s.addTo(e)
}
