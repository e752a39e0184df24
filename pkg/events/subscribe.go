package events

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
)

// Drop describes an event a subscriber's full buffer could not take. It is
// passed to the callback of a Critical subscription.
type Drop struct {
	Subscriber string // the subscription's name
	EventType  string // the type of the event lost
	Total      uint64 // events of that type this subscriber has lost so far
}

// SubscribeOption changes how a subscription is served. The zero set of
// options is a lossy subscription that receives every event of its Go
// type; see Subscribe.
type SubscribeOption func(*subscribeConfig)

type subscribeConfig struct {
	buffer     int
	types      []string
	onDrop     func(Drop)
	latest     []string
	latestAll  bool // LatestValue with no type: every type routed
	leaderOnly bool
}

// Types narrows a subscription to the given event types: the bus routes
// only those to it, so it costs nothing to publishes of other types. A
// subscription on a concrete event type (Subscribe[*SomeEvent]) is routed
// by that type's EventType without it; use Types with an interface type
// such as Event to receive several types on one channel. At least one type
// must be named.
func Types(first string, more ...string) SubscribeOption {
	return func(c *subscribeConfig) {
		c.types = append(append(c.types, first), more...)
	}
}

// Critical marks the subscription as one that must not lose events: each
// drop is logged as a warning and reported to onDrop (which may be nil), on
// the publishing goroutine, with no lock of the bus held; onDrop must not
// block.
func Critical(onDrop func(Drop)) SubscribeOption {
	return func(c *subscribeConfig) {
		if onDrop == nil {
			onDrop = func(Drop) {}
		}
		c.onDrop = onDrop
	}
}

// LatestValue declares state event types for which this subscriber must
// always get the newest event: when it falls behind, intermediate versions
// may be skipped, but the newest one is kept, at the expense of an older
// event of another type. With no type named, every type the subscription
// is routed (its Go type's, or those of Types) is LatestValue; a
// subscription to every type must name them. A named type must be one the
// subscription receives. The buffer is raised to the number of
// LatestValue types plus one if smaller, so that there is always something
// to give way.
//
// While the subscriber keeps up, delivery costs about what a plain
// subscription's does; events that find its buffer full wait inside the
// bus, where superseded state can be removed, and a goroutine owned by the
// subscription hands them over in order as the subscriber reads. Events
// already in the channel's buffer are delivered as they are, so a
// subscriber that falls behind may read up to the buffer's size of older
// versions before the newest: a small buffer keeps less stale state in
// front of it, a large one absorbs bursts of other types.
func LatestValue(eventTypes ...string) SubscribeOption {
	return func(c *subscribeConfig) {
		if len(eventTypes) == 0 {
			c.latestAll = true
		}
		c.latest = append(c.latest, eventTypes...)
	}
}

type leaderOnlyKey struct{}

// WithLeaderOnly returns a context under which every subscription is
// leader-only: made after Start by a component that gets the state it
// needs through replays, so the bus does not warn that it may have missed
// events, and Stats marks it LeaderOnly. The lifecycle Manager gives such
// a context to the components it runs as leader-only.
func WithLeaderOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, leaderOnlyKey{}, true)
}

// IsLeaderOnly reports whether ctx comes from WithLeaderOnly.
func IsLeaderOnly(ctx context.Context) bool {
	v, _ := ctx.Value(leaderOnlyKey{}).(bool)
	return v
}

// Subscribe is the way to subscribe: it returns a channel of the events
// whose Go type is T, for example *events.ConfigValidatedEvent, or, for an
// interface type T such as Event, of every event that implements T
// (narrowed with Types). bufferSize (at least 1) is how many events may
// wait for the subscriber; beyond that they are dropped for it, counted,
// unless LatestValue says otherwise. name (not empty) names the subscriber
// in drop accounting and logs.
//
// The subscription ends, and the bus closes the channel, when ctx is done,
// on Unsubscribe[T] or on Stop; no goroutine waits on ctx meanwhile. After
// Stop the channel is returned closed. Read it with range, or in a select
// as v, ok := <-ch: once ctx is done, the closed channel and ctx.Done()
// may both be ready, and a receive without ok then yields T's zero value.
// A subscription made with a context from WithLeaderOnly is leader-only.
//
// Invalid arguments (an empty name, a buffer below 1, a LatestValue type
// the subscription does not receive) are programming errors: Subscribe
// panics with an error that wraps ErrInvalidSubscription and names the
// argument.
func Subscribe[T Event](ctx context.Context, b *EventBus, name string, bufferSize int, opts ...SubscribeOption) <-chan T {
	if ctx == nil {
		panic(fmt.Errorf("%w: %q: nil context", ErrInvalidSubscription, name))
	}
	s := &subscription{name: name, cfg: subscribeConfig{buffer: bufferSize, leaderOnly: IsLeaderOnly(ctx)}}
	for _, o := range opts {
		if o != nil {
			o(&s.cfg)
		}
	}
	types := s.cfg.types // nil: every type
	if types == nil {
		if t, ok := eventTypeOf[T](); ok {
			types = []string{t}
		}
	}
	if err := s.cfg.resolve(name, types); err != nil {
		panic(err)
	}
	ch := make(chan T, s.cfg.buffer)
	key := (<-chan T)(ch) // what Unsubscribe[T] is given
	s.sink = newSink(ch, s.cfg)
	if !b.add(key, s, types) || ctx.Done() == nil {
		return ch // a context that is never done needs no watch
	}
	stop := context.AfterFunc(ctx, func() { b.remove(key) })
	b.mu.Lock()
	if b.subs[key] == s { // else it has ended already
		s.stopCtx = stop
		stop = nil
	}
	b.mu.Unlock()
	if stop != nil {
		stop()
	}
	return ch
}

// Unsubscribe ends a subscription made by Subscribe[T] and closes ch.
// Calling it again, or with a channel the bus did not hand out, does
// nothing.
func Unsubscribe[T Event](b *EventBus, ch <-chan T) { b.remove(ch) }

// eventTypeOf returns the EventType of T's zero value, if T is a concrete
// type whose zero value answers it.
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

// resolve checks the configuration of subscription name, routed types
// (nil: every type), and settles its LatestValue types and buffer.
func (c *subscribeConfig) resolve(name string, types []string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty subscriber name", ErrInvalidSubscription)
	case c.buffer < 1:
		return fmt.Errorf("%w: %q: buffer size %d is below 1", ErrInvalidSubscription, name, c.buffer)
	case slices.Contains(types, ""):
		return fmt.Errorf("%w: %q: empty event type", ErrInvalidSubscription, name)
	}
	if c.latestAll {
		if types == nil {
			return fmt.Errorf("%w: %q: LatestValue without types on a subscription to every type", ErrInvalidSubscription, name)
		}
		c.latest = append(c.latest, types...)
	}
	latest := c.latest[:0] // c.latest is the config's own: options copy
	for _, t := range c.latest {
		if types != nil && !slices.Contains(types, t) {
			return fmt.Errorf("%w: %q: LatestValue type %q is not one the subscription receives", ErrInvalidSubscription, name, t)
		}
		if !slices.Contains(latest, t) {
			latest = append(latest, t)
		}
	}
	c.latest = latest
	if len(latest) > 0 {
		c.buffer = max(c.buffer, len(latest)+1)
	}
	return nil
}

// add registers s under key, routes eventTypes (nil: all) to it and warns
// of what is wrong with it. It reports false, closing s, when the bus is
// stopped.
func (b *EventBus) add(key any, s *subscription, eventTypes []string) bool {
	b.mu.Lock()
	state := b.state.Load()
	if state != stateStopped {
		b.subs[key] = s
		b.routeLocked(s, eventTypes)
	}
	b.mu.Unlock()
	if state == stateStopped {
		s.sink.close() // never routed
	}
	b.warnAdded(s, state)
	return state != stateStopped
}

// routeLocked routes eventTypes (nil: all) to s. b.mu must be held.
func (b *EventBus) routeLocked(s *subscription, eventTypes []string) {
	old := b.routes.Load()
	if eventTypes == nil {
		rt := old.clone()
		rt.universal = append(slices.Clip(old.universal), s)
		for _, t := range rt.topics {
			t.addRouteLocked(s.newRouteLocked(t))
		}
		b.routes.Store(rt)
		return
	}
	for _, name := range eventTypes {
		t := b.routes.Load().topics[name]
		if t == nil {
			t = b.addTopicLocked(name)
		}
		if !t.routesTo(s) {
			t.addRouteLocked(s.newRouteLocked(t))
		}
	}
}

// warnAdded warns of a subscription s that add found the bus in state:
// stopped (its channel is closed), or started when s is not leader-only.
// It is called with no lock held.
func (b *EventBus) warnAdded(s *subscription, state int32) {
	switch {
	case !b.warns():
	case state == stateStopped:
		b.logger.Warn("subscription made after the event bus stopped; its channel is closed",
			"subscriber", s.name, "caller", caller())
	case state == stateStarted && !s.cfg.leaderOnly:
		b.logger.Warn("all-replica subscription made after the event bus started may have missed events; leader-only components should subscribe under busevents.WithLeaderOnly",
			"subscriber", s.name, "caller", caller())
	}
}

// routesTo reports whether t routes to s. EventBus.mu must be held.
func (t *topic) routesTo(s *subscription) bool {
	for _, r := range t.routes {
		if r.sub == s {
			return true
		}
	}
	return false
}

// addRouteLocked makes t route to r. EventBus.mu must be held; it takes
// t.mu.
func (t *topic) addRouteLocked(r *route) {
	if r.key >= 0 {
		t.latest++
	}
	t.mu.Lock()
	t.routes = append(t.routes, r) // writes past the end of every older slice
	t.mu.Unlock()
}

// removeRouteLocked makes t stop routing to r. EventBus.mu must be held;
// it takes t.mu, so that once it returns no delivery of t is offering to
// r, and any that let go of t.mu meanwhile sees that r left.
func (t *topic) removeRouteLocked(r *route) {
	i := slices.Index(t.routes, r)
	if i < 0 {
		return
	}
	if r.key >= 0 {
		t.latest--
	}
	t.mu.Lock()
	r.left = true
	t.routes = slices.Delete(slices.Clone(t.routes), i, i+1) // a copy (see topic.routes)
	t.mu.Unlock()
}

// clearRoutesLocked makes t route to nobody, on Stop. EventBus.mu must be
// held; it takes t.mu, and so waits for the delivery in progress, if any.
func (t *topic) clearRoutesLocked() {
	t.latest = 0
	t.mu.Lock()
	for _, r := range t.routes {
		r.left = true
	}
	t.routes = nil
	t.mu.Unlock()
}

// remove ends the subscription registered under key, if any: its routes
// leave their topics, then its channel is closed, once no publisher can
// be offering to it.
func (b *EventBus) remove(key any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.subs[key]
	if !ok {
		return
	}
	delete(b.subs, key)
	if old := b.routes.Load(); slices.Contains(old.universal, s) {
		rt := old.clone()
		rt.universal = nil
		for _, u := range old.universal {
			if u != s {
				rt.universal = append(rt.universal, u)
			}
		}
		b.routes.Store(rt)
	}
	for _, r := range s.routes {
		r.topic.removeRouteLocked(r)
		if b.routeLeft != nil {
			b.routeLeft(r.topic)
		}
	}
	b.endLocked(s)
}

// warns reports whether the bus's logger takes warnings, so that the
// stack is walked for caller only when its name will be logged.
func (b *EventBus) warns() bool { return b.logger.Enabled(context.Background(), slog.LevelWarn) }

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
