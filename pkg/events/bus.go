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

	// mu guards the fields below it, and serializes changes to routes.
	mu sync.Mutex
	// pending holds events published before Start, oldest first.
	pending []pendingEvent
	// preStartDropped counts, per event type, events that overflowed pending.
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

type pendingEvent struct {
	event Event
	seq   uint64
}

// retireLocked adds the counters of s, which has ended, to the totals of
// its name. b.mu must be held.
func (b *EventBus) retireLocked(s *subscription) {
	st := s.stats()
	if e := b.ended[st.Name]; e != nil {
		e.add(st)
		return
	}
	c := st.clone()
	b.ended[st.Name] = &c
}

// routeTable is a snapshot of who wants which event type. Writers copy it
// under EventBus.mu and swap it in atomically; only its lookup cache changes
// afterwards.
type routeTable struct {
	topics map[string]*topic
	// universal lists the subscriptions that want every event type.
	universal []*subscription
	// cache maps the address of an event type string to its topic, in front
	// of the map: EventType methods return the same constant string every
	// time, and comparing an address is cheaper than hashing the string. An
	// entry holds the string, so its memory cannot be reused for another
	// while cached.
	cache [topicCacheSize]atomic.Pointer[cachedTopic]
}

const topicCacheSize = 64 // a power of two

type cachedTopic struct {
	name  string
	topic *topic
}

// clone returns a copy of rt to modify, with an empty lookup cache.
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
	if c := slot.Load(); c != nil && unsafe.StringData(c.name) == p && len(c.name) == len(name) {
		return c.topic
	}
	t := rt.topics[name]
	if t != nil {
		slot.Store(&cachedTopic{name: name, topic: t})
	}
	return t
}

// topic is the route for one event type.
type topic struct {
	name  string
	index int // slot index in each subscription's per-type state
	subs  []*subscription
	// replayed counts Republish calls for this type; copies of the topic
	// share it.
	replayed *atomic.Uint64
}

// NewEventBus returns a bus that holds up to capacity events published
// before Start (DefaultCapacity when capacity <= 0). Events beyond that are
// dropped, counted in Stats().PreStartDropped and logged.
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
		preStartDropped: map[string]uint64{},
		subs:            map[any]*subscription{},
		ended:           map[string]*SubscriberStats{},
		waiters:         map[string]*waiter{},
	}
	b.routes.Store(&routeTable{topics: map[string]*topic{}})
	return b
}

// Start delivers the events published so far, in order, and from then on
// delivers each event as it is published. It is idempotent: later calls, and
// calls concurrent with the first, return once the first has finished. Start
// after Stop does nothing.
func (b *EventBus) Start() {
	b.startOnce.Do(func() {
		for {
			b.mu.Lock()
			if b.state.Load() == stateStopped {
				b.mu.Unlock()
				return
			}
			batch := b.pending
			b.pending = nil
			if len(batch) == 0 {
				b.state.Store(stateStarted)
				b.mu.Unlock()
				return
			}
			b.mu.Unlock()
			// Deliver outside the lock; publishes made meanwhile queue behind
			// this batch and go out on the next round.
			for _, p := range batch {
				b.deliver(p.event, p.seq, false)
			}
		}
	})
}

// Started reports whether Start has completed and Stop has not been called.
func (b *EventBus) Started() bool { return b.state.Load() == stateStarted }

// Stop closes every subscription channel and makes the bus refuse further
// use: Publish returns 0, new subscriptions get a closed channel, Request
// returns ErrStopped. Events still held from before Start are discarded.
// Stop is idempotent.
func (b *EventBus) Stop() {
	b.mu.Lock()
	if b.state.Load() == stateStopped {
		b.mu.Unlock()
		return
	}
	b.state.Store(stateStopped)
	discarded := len(b.pending)
	b.pending = nil
	b.routes.Store(&routeTable{topics: map[string]*topic{}})
	for _, s := range b.subs {
		s.close() // under mu, as in remove
		b.retireLocked(s)
	}
	clear(b.subs)
	b.mu.Unlock()

	if discarded > 0 {
		b.logger.Warn("event bus stopped before start, discarding held events", "events", discarded)
	}
}
