package events

import (
	"context"
	"fmt"
	"reflect"
	"sync"
)

// Scope makes Subscribe[T] cheap for a component that subscribes afresh in
// every period of its work, as a leader-only component does at the top of
// every term: the subscriptions it makes in one period are remembered by
// name, and the next period's calls reuse their records, so a period costs
// one channel per subscription and nothing else (no subscription record,
// route, option or context watch is made again).
//
// A scope changes nothing in what the component sees. Under the period's
// context, Subscribe[T] returns a new channel, routed from the call on and
// reached by replays as any new subscription is, and the period's end
// closes it, as a done context closes the channel of Subscribe[T]. So the
// component has one way to subscribe, Subscribe[T] with the context it is
// given, and can read the channel with range or a select on ctx.Done().
//
// A runtime owns the scope, not the component: it calls Begin with the
// context it hands the period's run, arranges that the scope is its value
// for the scope key (WithScope does, or a context type of the runtime's own
// whose Value answers a key for which IsScopeKey is true), and calls End
// once that context is done or the run has returned.
// The lifecycle Manager does all of this for its leader-only components.
//
// Only calls made with the period's context itself are kept: a call with a
// context derived from it, a call after End, a second call for one name in
// a period, and a call for a name the scope holds with another T or buffer
// make an ordinary subscription, ended with its context. Options are those
// of a name's first call.
//
// A Scope is safe for concurrent use.
type Scope struct {
	b *EventBus

	// mu guards the fields below. It is taken before EventBus.mu.
	mu sync.Mutex
	// ctx is the current period's context; nil between periods.
	ctx context.Context
	// named holds, by name, the subscriptions the scope reuses.
	named map[string]scopedSub
	// live lists those routed in the current period.
	live   []scopedSub
	closed bool
}

// IsScopeKey reports whether k is the context key under which Subscribe[T]
// looks for a Scope: a context whose Value returns a *Scope for it makes
// Subscribe[T] keep its subscriptions in that scope (see Scope). A context
// type of a runtime's own answers it instead of wrapping a parent with
// WithScope, and asks its parent for any other key.
func IsScopeKey(k any) bool {
	_, ok := k.(scopeKey)
	return ok
}

// scopeKey is the context key of a Scope.
type scopeKey struct{}

// WithScope returns a context under which Subscribe[T] keeps its
// subscriptions in s (see Scope); pass it to Begin. A runtime whose run
// contexts are its own type can answer the key instead (see IsScopeKey).
func WithScope(parent context.Context, s *Scope) context.Context {
	return context.WithValue(parent, scopeKey{}, s)
}

// NewScope returns a scope for subscriptions to b.
func NewScope(b *EventBus) *Scope {
	return &Scope{b: b, named: map[string]scopedSub{}}
}

// Begin starts a period whose subscriptions are made with ctx, which must
// be of a comparable type (every context of the context package is). It
// ends the previous period first, if End has not. A ctx already done, or a
// closed scope, starts no period: calls under ctx get ordinary
// subscriptions. End tells periods apart by their contexts only: a late
// End cannot end a later period begun with another context, but can end
// one begun again with the same.
func (s *Scope) Begin(ctx context.Context) {
	if ctx == nil || !reflect.TypeOf(ctx).Comparable() {
		panic(fmt.Errorf("%w: scope period needs a context of a comparable type", ErrInvalidSubscription))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked()
	if s.closed || ctx.Err() != nil {
		return
	}
	s.ctx = ctx
}

// End ends the period begun with ctx, if it is the current one: the
// subscriptions made in it end, and their channels are closed. It does
// nothing otherwise, so that a late End of an earlier period cannot end a
// later one.
func (s *Scope) End(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx != nil && s.ctx == ctx {
		s.endLocked()
	}
}

// Close ends the current period, if any, and forgets every subscription;
// later periods start none. Calling it again does nothing.
func (s *Scope) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endLocked()
	s.closed = true
	clear(s.named)
}

func (s *Scope) endLocked() {
	s.ctx = nil
	for i, k := range s.live {
		k.end()
		s.live[i] = nil
	}
	s.live = s.live[:0]
}

// scopedSub is a subscription a Scope reuses, whatever its T.
type scopedSub interface {
	// end ends the period's subscription, if it is routed.
	end()
}

// scoped is the record a Scope keeps for one name.
type scoped[T Event] struct {
	b      *EventBus
	s      *subscription
	types  []string // routed types; nil: every type
	buffer int      // as asked, to tell a later call for the name apart
	// key is the current period's channel; nil while the subscription is
	// not routed.
	key chan T
}

// subscribeScoped returns a channel of s's current period for name, or
// false when the call is not one s keeps (see Scope). s.mu is held while
// the subscription is routed, so that End and a later period find it
// routed or not, never half made; the warnings of the bus are logged once
// it is let go.
func subscribeScoped[T Event](ctx context.Context, s *Scope, name string, bufferSize int, opts []SubscribeOption) (<-chan T, bool) {
	s.mu.Lock()
	if s.ctx == nil || s.ctx != ctx {
		s.mu.Unlock()
		return nil, false
	}
	var k *scoped[T]
	if found, ok := s.named[name]; ok {
		k, ok = found.(*scoped[T])
		if !ok || k.buffer != bufferSize || k.key != nil {
			s.mu.Unlock()
			return nil, false // another T or buffer, or a second call
		}
	} else {
		sub := newSubscribeConfig(bufferSize, opts)
		types, err := resolveTypes[T](ctx, name, sub, nil)
		if err != nil {
			s.mu.Unlock()
			return nil, false // Subscribe panics with err
		}
		k = &scoped[T]{b: s.b, s: sub, types: types, buffer: bufferSize}
		s.named[name] = k
	}
	ch := k.renew(name)
	state := s.b.addQuiet((<-chan T)(ch), k.s, k.types)
	if state != stateStopped {
		k.key = ch
		s.live = append(s.live, k)
	}
	sub := k.s
	s.mu.Unlock()
	s.b.warnAdded(sub, state)
	return ch, true
}

// renew readies k's record for a new channel and returns it. The routes of
// the last period left their topics at its end, but a delivery of one of
// those topics that let go of the topic's lock (to report a drop) may still
// hold one of them: their memory is reused only when no delivery of their
// topics is in progress, and otherwise k takes a new record.
func (k *scoped[T]) renew(name string) chan T {
	old := k.s
	ch := make(chan T, old.cfg.buffer)
	if len(old.routes) == 0 && old.sink == nil {
		initSubscription(old, name, ch) // first period
		return ch
	}
	k.b.mu.Lock()
	busy := false
	for _, r := range old.routes[:min(len(old.routes), inlineRoutes)] {
		t := r.topic
		t.mu.Lock()
		busy = busy || t.iterating > 0
		t.mu.Unlock()
	}
	k.b.mu.Unlock()
	if busy {
		fresh := &subscription{cfg: old.cfg}
		initSubscription(fresh, name, ch)
		k.s = fresh
		return ch
	}
	for i := range old.routeBuf {
		old.routeBuf[i] = route{}
	}
	old.routes = old.ptrBuf[:0]
	if ls, ok := old.sink.(*latestSink[T]); ok {
		ls.reset(ch)
		return ch
	}
	initSubscription(old, name, ch)
	return ch
}

func (k *scoped[T]) end() {
	if k.key != nil {
		k.b.remove((<-chan T)(k.key)) // nothing if Unsubscribe or Stop ended it
		k.key = nil
	}
}
