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
	types := slices.Clip(append([]string{first}, more...))
	return func(c *subscribeConfig) {
		if c.types == nil {
			c.types = types // clipped: an append to it copies; nothing writes it
			return
		}
		c.types = append(c.types, types...)
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

// LeaderOnly marks the subscription as made by a leader-only component: it
// is made after Start and gets the state it needs through replays, so it is
// not warned about. A subscription made with a context from WithLeaderOnly
// is leader-only without it.
func LeaderOnly() SubscribeOption {
	return func(c *subscribeConfig) { c.leaderOnly = true }
}

type leaderOnlyKey struct{}

// WithLeaderOnly returns a context under which every subscription is
// leader-only, as with the LeaderOnly option. The lifecycle Manager gives
// such a context to the components it runs as leader-only, so that they
// need not remember the option.
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
// A subscription made with a context from WithLeaderOnly is leader-only
// (see LeaderOnly).
//
// Invalid arguments (an empty name, a buffer below 1, a LatestValue type
// the subscription does not receive) are programming errors: Subscribe
// panics with an error that wraps ErrInvalidSubscription and names the
// argument.
func Subscribe[T Event](ctx context.Context, b *EventBus, name string, bufferSize int, opts ...SubscribeOption) <-chan T {
	if ctx == nil {
		panic(fmt.Errorf("%w: %q: nil context", ErrInvalidSubscription, name))
	}
	if sc, _ := ctx.Value(scopeKey{}).(*Scope); sc != nil && sc.b == b {
		if ch, ok := subscribeScoped[T](ctx, sc, name, bufferSize, opts); ok {
			return ch
		}
	}
	return subscribe[T](ctx, b, name, newSubscribeConfig(bufferSize, opts))
}

// subscribe is Subscribe with its options applied to s.cfg.
func subscribe[T Event](ctx context.Context, b *EventBus, name string, s *subscription) <-chan T {
	var own [1]string
	types, err := resolveTypes[T](ctx, name, s, own[:0])
	if err != nil {
		panic(err)
	}
	ch := make(chan T, s.cfg.buffer)
	initSubscription(s, name, ch)
	key := (<-chan T)(ch)
	if !b.add(key, s, types) || ctx.Done() == nil {
		return ch // a context that is never done needs no watch
	}
	stop := context.AfterFunc(ctx, func() { b.remove(key) })
	b.mu.Lock()
	if b.subs[key] == s {
		s.stopCtx = stop
		stop = nil
	}
	b.mu.Unlock()
	if stop != nil {
		stop()
	}
	return ch
}

// resolveTypes settles the configuration of s, a subscription of name on
// a chan T made under ctx, and returns the types it is routed (nil: every
// type; T's own is appended to own), or an error naming what no
// subscription can have.
func resolveTypes[T Event](ctx context.Context, name string, s *subscription, own []string) ([]string, error) {
	cfg := &s.cfg
	if IsLeaderOnly(ctx) {
		cfg.leaderOnly = true
	}
	types := cfg.types
	if types == nil {
		if t, ok := eventTypeOf[T](); ok {
			types = append(own, t)
		}
	}
	return types, cfg.resolve(name, types)
}

// Unsubscribe ends a subscription made by Subscribe[T] and closes ch.
// Calling it again, or with a channel the bus did not hand out, does
// nothing.
func Unsubscribe[T Event](b *EventBus, ch <-chan T) { b.remove(ch) }

// Subscribe is Subscribe[Event] with no context: a channel of every event,
// ended by Unsubscribe or Stop. It is kept for the call sites that predate
// Subscribe[T].
//
// Deprecated: use Subscribe[T], for example
// Subscribe[Event](ctx, b, name, bufferSize, opts...).
func (b *EventBus) Subscribe(name string, bufferSize int, opts ...SubscribeOption) <-chan Event {
	return Subscribe[Event](context.Background(), b, name, bufferSize, opts...)
}

// SubscribeTypes is Subscribe[Event] with Types(eventTypes...) and no
// context, ended by Unsubscribe or Stop. eventTypes must not be empty. It
// is kept for the call sites that predate Subscribe[T].
//
// Deprecated: use Subscribe[T] with a concrete event type, or
// Subscribe[Event] with the Types option.
func (b *EventBus) SubscribeTypes(name string, bufferSize int, eventTypes []string, opts ...SubscribeOption) <-chan Event {
	return b.subscribeList(name, bufferSize, eventTypes, false, opts)
}

// SubscribeLeaderOnly is SubscribeTypes with LeaderOnly: the subscription
// of a leader-only component, made after Start once leadership is acquired.
// eventTypes must not be empty.
//
// Deprecated: use Subscribe[T] under the context the lifecycle Manager
// gives a leader-only component, which makes the subscription leader-only;
// outside the Manager, add the LeaderOnly option.
func (b *EventBus) SubscribeLeaderOnly(name string, bufferSize int, eventTypes []string, opts ...SubscribeOption) <-chan Event {
	return b.subscribeList(name, bufferSize, eventTypes, true, opts)
}

func (b *EventBus) subscribeList(name string, bufferSize int, eventTypes []string, leaderOnly bool, opts []SubscribeOption) <-chan Event {
	if len(eventTypes) == 0 {
		panic(fmt.Errorf("%w: %q: empty event type list (use Subscribe for every type)", ErrInvalidSubscription, name))
	}
	s := newSubscribeConfig(bufferSize, opts)
	cfg := &s.cfg
	if cfg.types == nil {
		cfg.types = eventTypes // read only
	} else {
		cfg.types = slices.Concat(cfg.types, eventTypes)
	}
	cfg.leaderOnly = cfg.leaderOnly || leaderOnly
	return subscribe[Event](context.Background(), b, name, s)
}

// Unsubscribe ends the subscription whose channel is ch and closes ch. Calling
// it again, or with a channel the bus did not hand out, does nothing.
//
// Deprecated: use Unsubscribe[T], the counterpart of Subscribe[T].
func (b *EventBus) Unsubscribe(ch <-chan Event) { b.remove(ch) }

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

// newSubscribeConfig returns a subscription to be made, with opts applied
// to its cfg. The options see a field of the subscription, so that they
// cost no allocation of their own.
func newSubscribeConfig(bufferSize int, opts []SubscribeOption) *subscription {
	s := &subscription{cfg: subscribeConfig{buffer: bufferSize}}
	for _, o := range opts {
		if o != nil {
			o(&s.cfg)
		}
	}
	return s
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
	state := b.addQuiet(key, s, eventTypes)
	b.warnAdded(s, state)
	return state != stateStopped
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
		b.logger.Warn("all-replica subscription made after the event bus started may have missed events; leader-only components should subscribe under busevents.WithLeaderOnly or with LeaderOnly",
			"subscriber", s.name, "caller", caller())
	}
}

// addQuiet is add without the warnings: it returns the state of the bus it
// found, and closes s if that is stateStopped.
func (b *EventBus) addQuiet(key any, s *subscription, eventTypes []string) int32 {
	b.mu.Lock()
	state := b.state.Load()
	if state == stateStopped {
		b.mu.Unlock()
		s.sink.close() // never routed
		return state
	}
	b.subs[key] = s
	old := b.routes.Load()
	var rt *routeTable // a copy of old, made only if it must change
	if eventTypes == nil {
		rt = old.clone()
		rt.universal = append(slices.Clip(old.universal), s)
		for _, t := range rt.topics {
			t.addRouteLocked(s.newRouteLocked(t))
		}
	} else {
		for _, name := range eventTypes {
			t := old.topics[name]
			if t == nil && rt != nil {
				t = rt.topics[name]
			}
			if t == nil {
				if rt == nil {
					rt = old.clone()
				}
				t = b.newTopicLocked(name, old.universal)
				rt.topics[name] = t
			}
			if !t.routesTo(s) {
				t.addRouteLocked(s.newRouteLocked(t))
			}
		}
	}
	if rt != nil {
		b.routes.Store(rt)
	}
	b.mu.Unlock()
	return state
}

// newTopicLocked makes the topic of an event type nobody routed yet.
// b.mu must be held.
func (b *EventBus) newTopicLocked(name string, universal []*subscription) *topic {
	t := &topic{name: name, index: b.nextTopic}
	b.nextTopic++
	for _, u := range universal {
		t.addRouteLocked(u.newRouteLocked(t))
	}
	return t
}

// routesTo reports whether t routes to s. EventBus.mu or t.mu must be held.
func (t *topic) routesTo(s *subscription) bool {
	for _, r := range t.routes {
		if r.sub == s {
			return true
		}
	}
	return false
}

// addRouteLocked makes t route to r. EventBus.mu must be held; it takes
// t.mu. An append never changes the part of the arrays that a delivery in
// progress ranges over.
func (t *topic) addRouteLocked(r *route) {
	t.mu.Lock()
	r.base = t.published
	t.routes = append(t.routes, r)
	var typed sink
	if r.sub.ch == nil && len(r.sub.cfg.latest) == 0 {
		typed = r.sub.sink // a typedSink: it takes direct sends (see topic.routes)
	}
	t.chans = append(t.chans, r.sub.ch)
	t.typed = append(t.typed, typed)
	t.seqFloor = 0 // r.lastSeq is 0
	if r.key >= 0 {
		t.latest++
	}
	t.mu.Unlock()
}

// removeRouteLocked makes t stop routing to r, which must be closed.
// EventBus.mu must be held; it takes t.mu, so that once it returns no
// delivery of t is offering to r, and any that let go of t.mu meanwhile
// sees r closed before offering to it (see topic.routes).
func (t *topic) removeRouteLocked(r *route) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := slices.Index(t.routes, r)
	if i < 0 {
		return
	}
	r.leaveLocked()
	if r.key >= 0 {
		t.latest--
	}
	if t.iterating == 0 {
		t.routes = slices.Delete(t.routes, i, i+1)
		t.chans = slices.Delete(t.chans, i, i+1)
		t.typed = slices.Delete(t.typed, i, i+1)
		return
	}
	// A delivery that let go of t.mu still ranges over the current arrays.
	t.routes = slices.Concat(t.routes[:i], t.routes[i+1:])
	t.chans = slices.Concat(t.chans[:i], t.chans[i+1:])
	t.typed = slices.Concat(t.typed[:i], t.typed[i+1:])
}

// clearRoutesLocked makes t route to nobody, on Stop, once every route has
// been closed. EventBus.mu must be held; it takes t.mu, and so waits for
// the delivery in progress, if any.
func (t *topic) clearRoutesLocked() {
	t.mu.Lock()
	for _, r := range t.routes {
		r.leaveLocked()
	}
	t.routes, t.chans, t.typed, t.latest = nil, nil, nil, 0
	t.mu.Unlock()
}

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
	b.unrouteLocked(s)
	b.endLocked(s)
}

// unrouteLocked takes every route of s out of its topic after setting their
// closed flags: a delivery sends only to the routes its topic lists while it
// holds the topic's lock, and checks the closed flags once it has let go of
// it, so once each route has left its topic after the flags were set, no
// publisher is left offering to s. b.mu must be held.
func (b *EventBus) unrouteLocked(s *subscription) {
	s.closeRoutesLocked()
	for _, r := range s.routes {
		r.topic.removeRouteLocked(r)
		if b.routeLeft != nil {
			b.routeLeft(r.topic)
		}
	}
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
