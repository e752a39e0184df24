package events

import (
	"fmt"
	"runtime"
	"sync"
)

// Kept is a subscription that is paused and resumed rather than ended and
// made again: a component that subscribes at the start of every period of
// work (a leader-only component, once per term) keeps one channel and one
// subscription, and a period costs no allocation for them. Create one with
// Keep; it starts paused.
//
// While paused, the subscription is not routed: publishes skip it, and it
// is not listed among the live subscribers of Stats (its counters so far
// are in Totals, under its name, as an ended subscription's). Resume first
// discards whatever the previous period left unread in the channel, then
// routes the subscription afresh, as a new one: the subscriber receives
// only what is published (or replayed) from then on, and a replay reaches
// it as it would reach a subscription just made, since it has been given
// nothing yet. So nothing published while it was paused, and nothing left
// from an earlier period, is ever read after Resume.
//
// Pause, Resume and Close are safe for concurrent use. The channel has one
// reader at a time, which must not read while Resume runs (Resume empties
// the channel). The bus closes the channel exactly once: on Close, on Stop
// if the subscription is routed then, or on a Resume after Stop.
type Kept[T Event] struct {
	b     *EventBus
	s     *subscription
	ch    chan T
	key   <-chan T
	types []string

	// mu serializes Resume, Pause and Close, and guards the fields below;
	// it is taken before EventBus.mu.
	mu sync.Mutex
	// routes is how many routes the subscription had when it was last
	// paused.
	routes int
	routed bool
	closed bool
}

// Keep returns a paused subscription of the events of Go type T, made as
// Subscribe[T] makes one, without a context: it lasts until Close or Stop
// (or an Unsubscribe[T] of its channel, after which Resume reports false).
// A LatestValue subscription can be kept: Resume also discards the events
// waiting in its queue. A subscription to every type cannot (it is routed
// to topics made while it is paused); Keep returns an error wrapping
// ErrInvalidSubscription for it and for the arguments Subscribe panics on.
func Keep[T Event](b *EventBus, name string, bufferSize int, opts ...SubscribeOption) (*Kept[T], error) {
	s := newSubscribeConfig(bufferSize, opts)
	types := s.cfg.types
	if types == nil {
		if t, ok := eventTypeOf[T](); ok {
			types = []string{t}
		}
	}
	if err := s.cfg.resolve(name, types); err != nil {
		return nil, err
	}
	switch {
	case types == nil:
		return nil, fmt.Errorf("%w: %q: a subscription to every type cannot be kept", ErrInvalidSubscription, name)
	case b == nil:
		return nil, fmt.Errorf("%w: %q: nil bus", ErrInvalidSubscription, name)
	}
	ch := make(chan T, s.cfg.buffer)
	initSubscription(s, name, ch)
	return &Kept[T]{b: b, s: s, ch: ch, key: ch, types: types}, nil
}

// C returns the subscription's channel, the same for the life of k.
func (k *Kept[T]) C() <-chan T { return k.ch }

// Resume empties the channel and routes the subscription again (see
// Kept). It reports false, with the channel closed, once the bus is
// stopped, k closed or its channel unsubscribed. Resuming a routed
// subscription does nothing else.
func (k *Kept[T]) Resume() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false
	}
	b := k.b
	if k.routed {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.subs[k.key] != k.s { // ended by Stop or an Unsubscribe
			k.routed, k.closed = false, true
			return false
		}
		return true
	}
	k.empty() // no lock of the bus needed: nothing is routed to k
	b.mu.Lock()
	k.renewRoutesLocked()
	b.mu.Unlock()
	if !b.add(k.key, k.s, k.types) {
		k.closed = true // the bus stopped: add closed the channel
		return false
	}
	k.routed = true
	return true
}

// empty discards what the channel, and a LatestValue sink's queue, hold.
// No publisher offers to the paused subscription; a LatestValue sink's
// mover may still hold an event it took from the queue, which it sends
// once there is room: empty drains until the mover is idle with nothing
// queued.
func (k *Kept[T]) empty() {
	ls, _ := k.s.sink.(*latestSink[T])
	for {
		for drained := false; !drained; {
			select {
			case <-k.ch:
			default:
				drained = true
			}
		}
		if ls == nil || ls.discardIdle() {
			return
		}
		runtime.Gosched() // the mover sends what it holds
	}
}

// discardIdle empties the queue and reports whether the mover is idle:
// it has nothing more to send. No publisher may be in send.
func (s *latestSink[T]) discardIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ok := s.overflow.pop(); ok; _, ok = s.overflow.pop() {
	}
	return !s.moving.Load()
}

// resetEvictions zeroes the eviction counters, once addEvictions has
// counted them as an ended subscription's.
func (s *latestSink[T]) resetEvictions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.skipped)
	clear(s.lost)
}

// renewRoutesLocked readies k.s to be given new routes. The routes of its
// last period left their topics on Pause, but a delivery of one of those
// topics that let go of the topic's lock (to report a drop) may still hold
// one of them; their memory is reused only when no delivery of their
// topics is in progress, and otherwise k takes a new subscription record
// for the same channel. k.mu and EventBus.mu must be held.
func (k *Kept[T]) renewRoutesLocked() {
	s := k.s
	n := min(k.routes, inlineRoutes)
	k.routes = 0
	for i := range n {
		t := s.routeBuf[i].topic
		t.mu.Lock()
		busy := t.iterating > 0
		t.mu.Unlock()
		if busy {
			fresh := &subscription{cfg: s.cfg}
			initSubscription(fresh, s.name, k.ch)
			fresh.sink = s.sink // the channel's: a LatestValue one keeps its mover
			k.s = fresh
			return
		}
	}
	for i := range n {
		s.routeBuf[i] = route{}
	}
	s.routes = s.ptrBuf[:0]
}

// Pause stops routing events to the subscription; what is in its channel
// stays there until read or until Resume empties it. Pausing a paused or
// closed subscription does nothing.
func (k *Kept[T]) Pause() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.routed || k.closed {
		return
	}
	k.routed = false
	b, s := k.b, k.s
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.subs[k.key] != s {
		// Stop, or an Unsubscribe of the channel, ended the subscription
		// and closed its channel.
		k.closed = true
		return
	}
	delete(b.subs, k.key)
	b.unrouteLocked(s)
	b.countEndedLocked(s)
	if ls, ok := s.sink.(*latestSink[T]); ok {
		ls.resetEvictions() // counted: the next period counts from zero
	}
	k.routes = len(s.routes)
	s.routes = s.ptrBuf[:0] // counted: Close must not count them again
}

// Close ends the subscription and closes its channel, paused or not.
// Calling it again does nothing.
func (k *Kept[T]) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return
	}
	k.closed = true
	if k.routed {
		k.routed = false
		k.b.remove(k.key) // nothing if Stop ended it already
		return
	}
	k.b.mu.Lock()
	k.b.endLocked(k.s) // not routed: only the channel to close
	k.b.mu.Unlock()
}
