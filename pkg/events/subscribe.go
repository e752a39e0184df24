package events

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
)

// Drop describes an event a subscriber's full buffer could not take. It is
// passed to the callback of a Critical subscription.
type Drop struct {
	Subscriber string // the subscription's name
	EventType  string // the type of the event lost
	Total      uint64 // events of that type this subscriber has lost so far
}

// SubscribeOption changes how a subscription is served.
type SubscribeOption func(*subscribeConfig)

type subscribeConfig struct {
	onDrop     func(Drop)
	latest     []string
	leaderOnly bool
}

// Critical marks the subscription as one that must not lose events: each
// drop is logged as a warning and reported to onDrop (which may be nil), on
// the publishing goroutine; onDrop must not block.
func Critical(onDrop func(Drop)) SubscribeOption {
	return func(c *subscribeConfig) {
		if onDrop == nil {
			onDrop = func(Drop) {}
		}
		c.onDrop = onDrop
	}
}

// LatestValue declares state event types for which this subscriber must
// always get the newest event: when its buffer is full, intermediate
// versions may be skipped but the newest one is kept, at the expense of an
// older event already queued. The buffer is raised to len(eventTypes)+1 if
// smaller, so that there is always something to give way.
//
// Such a subscription queues inside the bus, where queued events can be
// removed, and hands them over on an unbuffered channel through a goroutine
// of its own, which ends when the subscription does. Each delivery costs a
// goroutine hand-off, which suits state events; keep high-rate streams on
// plain subscriptions.
func LatestValue(eventTypes ...string) SubscribeOption {
	return func(c *subscribeConfig) { c.latest = append(c.latest, eventTypes...) }
}

// LeaderOnly marks the subscription as made by a leader-only component, after
// Start, so that it is not warned about. SubscribeLeaderOnly implies it.
func LeaderOnly() SubscribeOption {
	return func(c *subscribeConfig) { c.leaderOnly = true }
}

// Subscribe returns a channel that receives every event published on the
// bus. bufferSize below 1 is taken as 1. The bus closes the channel on
// Unsubscribe or Stop. A subscription made after Start by a component that
// is not leader-only may already have missed events; it is allowed but
// logged as a warning naming the caller.
func (b *EventBus) Subscribe(name string, bufferSize int, opts ...SubscribeOption) <-chan Event {
	return b.subscribeEvents(name, bufferSize, nil, false, opts)
}

// SubscribeTypes is Subscribe for the given event types only; the bus
// filters, so the subscriber costs nothing to publishes of other types. An
// empty list receives nothing.
func (b *EventBus) SubscribeTypes(name string, bufferSize int, eventTypes []string, opts ...SubscribeOption) <-chan Event {
	if eventTypes == nil {
		eventTypes = []string{}
	}
	return b.subscribeEvents(name, bufferSize, eventTypes, false, opts)
}

// SubscribeLeaderOnly is the subscription of a leader-only component, made
// after Start once leadership is acquired; eventTypes nil means every type.
// Such a component receives the state it needs through replays.
func (b *EventBus) SubscribeLeaderOnly(name string, bufferSize int, eventTypes []string, opts ...SubscribeOption) <-chan Event {
	return b.subscribeEvents(name, bufferSize, eventTypes, true, opts)
}

func (b *EventBus) subscribeEvents(name string, bufferSize int, eventTypes []string, leaderOnly bool, opts []SubscribeOption) <-chan Event {
	cfg := newSubscribeConfig(leaderOnly, opts)
	n := cfg.buffer(bufferSize)
	ch := make(chan Event, cfg.chanBuffer(n))
	s := newSubscription(name, cfg, n, ch)
	b.add((<-chan Event)(ch), s, eventTypes)
	return ch
}

// Unsubscribe ends the subscription whose channel is ch and closes ch. Calling
// it again, or with a channel the bus did not hand out, does nothing.
func (b *EventBus) Unsubscribe(ch <-chan Event) { b.remove(ch) }

// Subscribe returns a channel of the events whose Go type is T, for example
// *events.ConfigValidatedEvent. The bus routes by the event type that T's
// EventType method reports on its zero value; if that cannot be called (a
// method that dereferences a nil pointer) the subscription sees every event
// and keeps those of type T. The subscription ends, and the bus closes the
// channel, when ctx is done, on Unsubscribe[T] or on Stop; no goroutine waits
// on ctx meanwhile.
func Subscribe[T Event](ctx context.Context, b *EventBus, name string, bufferSize int, opts ...SubscribeOption) <-chan T {
	cfg := newSubscribeConfig(false, opts)
	n := cfg.buffer(bufferSize)
	ch := make(chan T, cfg.chanBuffer(n))
	s := newSubscription(name, cfg, n, ch)
	var types []string
	if t, ok := eventTypeOf[T](); ok {
		types = []string{t}
	}
	if b.add((<-chan T)(ch), s, types) {
		stop := context.AfterFunc(ctx, func() { b.remove((<-chan T)(ch)) })
		s.mu.Lock()
		s.stopCtx = stop
		s.mu.Unlock()
	}
	return ch
}

// Unsubscribe ends a subscription made by Subscribe[T] and closes ch. Calling
// it again does nothing.
func Unsubscribe[T Event](b *EventBus, ch <-chan T) { b.remove(ch) }

func eventTypeOf[T Event]() (t string, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	var zero T
	if any(zero) == nil { // T is an interface type
		return "", false
	}
	t = zero.EventType()
	return t, t != ""
}

func newSubscribeConfig(leaderOnly bool, opts []SubscribeOption) subscribeConfig {
	cfg := subscribeConfig{leaderOnly: leaderOnly}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

// chanBuffer is the buffer of the channel handed out: LatestValue
// subscriptions queue inside the bus, where superseded state can be removed.
func (c subscribeConfig) chanBuffer(n int) int {
	if len(c.latest) > 0 {
		return 0
	}
	return n
}

func (c subscribeConfig) buffer(n int) int {
	n = max(n, 1)
	if len(c.latest) > 0 {
		n = max(n, len(c.latest)+1)
	}
	return n
}

// add registers s under key and routes eventTypes (nil: all) to it. It
// reports false, closing s, when the bus is stopped.
func (b *EventBus) add(key any, s *subscription, eventTypes []string) bool {
	b.mu.Lock()
	state := b.state.Load()
	if state == stateStopped {
		b.mu.Unlock()
		s.close()
		b.logger.Warn("subscription made after the event bus stopped; its channel is closed",
			"subscriber", s.name, "caller", caller())
		return false
	}
	b.subs[key] = s
	old := b.routes.Load()
	rt := old.clone()
	if eventTypes == nil {
		rt.universal = append(slices.Clip(old.universal), s)
		for name, t := range rt.topics {
			rt.topics[name] = t.with(s)
		}
	} else {
		for _, name := range eventTypes {
			t, ok := rt.topics[name]
			if !ok {
				t = b.newTopicLocked(name, rt.universal)
			}
			if !slices.Contains(t.subs, s) {
				rt.topics[name] = t.with(s)
			}
		}
	}
	b.routes.Store(rt)
	b.mu.Unlock()

	if state == stateStarted && !s.leaderOnly {
		b.logger.Warn("all-replica subscription made after the event bus started may have missed events; leader-only components should use SubscribeLeaderOnly",
			"subscriber", s.name, "caller", caller())
	}
	return true
}

// newTopicLocked makes a topic for an event type nobody routed yet.
// b.mu must be held.
func (b *EventBus) newTopicLocked(name string, universal []*subscription) *topic {
	t := &topic{name: name, index: b.nextTopic, subs: slices.Clone(universal), replayed: new(atomic.Uint64)}
	b.nextTopic++
	return t
}

// with returns a copy of t that also routes to s. The copy shares t's
// counters, so it must replace t.
func (t *topic) with(s *subscription) *topic {
	return &topic{name: t.name, index: t.index, subs: append(slices.Clip(t.subs), s), replayed: t.replayed}
}

func (b *EventBus) remove(key any) {
	b.mu.Lock()
	s, ok := b.subs[key]
	if !ok {
		b.mu.Unlock()
		return
	}
	delete(b.subs, key)
	old := b.routes.Load()
	rt := &routeTable{topics: make(map[string]*topic, len(old.topics))}
	for _, u := range old.universal {
		if u != s {
			rt.universal = append(rt.universal, u)
		}
	}
	for name, t := range old.topics {
		if !slices.Contains(t.subs, s) {
			rt.topics[name] = t
			continue
		}
		n := &topic{name: t.name, index: t.index, replayed: t.replayed}
		for _, o := range t.subs {
			if o != s {
				n.subs = append(n.subs, o)
			}
		}
		rt.topics[name] = n
	}
	b.routes.Store(rt)
	// Closing under mu (it only waits for the subscription's own pump, which
	// never takes mu) lets the totals take s over with no moment in between
	// where Stats would miss it.
	s.close()
	b.retireLocked(s)
	b.mu.Unlock()
}

// caller names the first function outside this package on the stack, the
// one whose call is being warned about.
func caller() string {
	var pcs [16]uintptr
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs[:])])
	for {
		f, more := frames.Next()
		if !strings.HasPrefix(f.Function, thisPackage) || strings.HasPrefix(f.Function, thisPackage+"_test.") {
			return fmt.Sprintf("%s (%s:%d)", f.Function, f.File, f.Line)
		}
		if !more {
			return "unknown"
		}
	}
}

// thisPackage prefixes the names of this package's functions.
const thisPackage = "github.com/baton-dev/baton/pkg/events."
