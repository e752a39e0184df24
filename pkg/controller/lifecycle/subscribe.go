package lifecycle

import (
	"context"
	"sync"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// Subscribe is busevents.Subscribe[T] for a leader-only component, made to
// be called at the top of every Start: under the context the Manager gives
// a leader-only run, the first call for a name makes a subscription that
// the Manager keeps across terms (busevents.Kept), and each later term's
// call for that name resumes it and returns the same channel, so a term
// costs no new channel, subscription or context watch.
//
// What the component reads is what a subscription made afresh would give
// it: the subscription is routed from the call on, in the term of the run
// only; the Manager pauses it when the term ends (and when the run
// returns), and the next term's call empties the channel before routing it
// again, so nothing published between terms, and nothing left unread from
// an earlier term, is ever read; the term's replays reach it as they reach
// a new subscription. It is leader-only, as every subscription under the
// run's context is. Unlike a per-term subscription, the channel is not
// closed when the term ends: the run selects on ctx.Done() to see that.
// Options apply as the first term's call gave them; the subscription ends,
// closing the channel, when Run returns or the bus stops.
//
// Anything else gets busevents.Subscribe[T](ctx, bus, name, bufferSize,
// opts...), ended with ctx: a context not from a leader-only run of a
// Manager on bus, a run whose term is over, a second call for one name in
// one run (the first keeps the name), a name used before with another T,
// and subscriptions a kept one cannot be (to every type). The channel must
// not be read by anyone but the run: a kept channel outlives it, and a
// later run shares it. End it with this package's Unsubscribe, or leave
// it to the Manager, which pauses it when the run returns or the term ends
// and ends it when Run returns (busevents.Unsubscribe ends the kept
// subscription, and the next term makes it again).
func Subscribe[T busevents.Event](ctx context.Context, bus *busevents.EventBus, name string, bufferSize int, opts ...busevents.SubscribeOption) <-chan T {
	tok := tokenFrom(ctx)
	if tok == nil || tok.t == nil || tok.m.bus != bus || bus == nil {
		return busevents.Subscribe[T](ctx, bus, name, bufferSize, opts...)
	}
	if ch, ok := keptChannel[T](tok, name, bufferSize, opts); ok {
		return ch
	}
	return busevents.Subscribe[T](ctx, bus, name, bufferSize, opts...)
}

// Unsubscribe ends, for the run of ctx, a subscription made by Subscribe
// with ctx: a kept subscription is paused (the next term's Subscribe
// resumes it), any other is ended with busevents.Unsubscribe[T], closing
// its channel. A component may defer it right after Subscribe whatever the
// subscription turned out to be; the Manager pauses kept subscriptions at
// the end of the run anyway.
func Unsubscribe[T busevents.Event](ctx context.Context, bus *busevents.EventBus, ch <-chan T) {
	if tok := tokenFrom(ctx); tok != nil && tok.t != nil && tok.m.bus == bus {
		m := tok.m
		m.mu.Lock()
		list := tok.u.keptList
		m.mu.Unlock()
		for _, ks := range list {
			if ks.pauseChan(ch, tok.t.term) {
				return
			}
		}
	}
	busevents.Unsubscribe(bus, ch)
}

// keeper is a kept subscription of a leader-only unit, seen by the
// Manager: it pauses it at the end of a term and closes it when Run ends.
type keeper interface {
	pauseTerm(term uint64)
	// pauseChan pauses the subscription for term if ch is its channel,
	// and reports whether it is.
	pauseChan(ch any, term uint64) bool
	close()
}

// keptSub is a kept subscription and the term it is resumed for.
type keptSub[T busevents.Event] struct {
	name   string
	buffer int
	opts   []busevents.SubscribeOption // as given, and LeaderOnly

	// mu serializes a resume with the pause of the term's end, so that a
	// subscription resumed for a term that ends meanwhile is paused after
	// its resume, never before; it guards the fields below. It is taken
	// before Manager.mu.
	mu sync.Mutex
	// k is the subscription, made anew if its component unsubscribed it.
	k *busevents.Kept[T]
	// term is the term the subscription is routed for, 0 while paused.
	term uint64
}

func (ks *keptSub[T]) pauseTerm(term uint64) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.term == term {
		ks.term = 0
		ks.k.Pause()
	}
}

func (ks *keptSub[T]) pauseChan(ch any, term uint64) bool {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ch != any(ks.k.C()) {
		return false
	}
	if ks.term == term {
		ks.term = 0
		ks.k.Pause()
	}
	return true
}

func (ks *keptSub[T]) close() {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	ks.term = 0
	ks.k.Close()
}

// keptChannel returns the channel of the unit's kept subscription name,
// resumed for the run's term, making it on first use. It reports false
// when the run is to get a subscription of its own (see Subscribe).
func keptChannel[T busevents.Event](tok *runToken, name string, bufferSize int, opts []busevents.SubscribeOption) (<-chan T, bool) {
	m, u, term := tok.m, tok.u, tok.t.term
	m.mu.Lock()
	live := m.term == tok.t && !tok.mem.exited
	found, known := u.kept[name]
	m.mu.Unlock()
	if !live {
		return nil, false
	}
	var ks *keptSub[T]
	if known {
		var ok bool
		if ks, ok = found.(*keptSub[T]); !ok {
			return nil, false // the name is kept for another type
		}
	} else {
		ks = &keptSub[T]{name: name, buffer: bufferSize, opts: append(opts[:len(opts):len(opts)], busevents.LeaderOnly())}
		k, err := busevents.Keep[T](m.bus, name, bufferSize, ks.opts...)
		if err != nil {
			return nil, false // not keepable: the per-term form says why, if anything is wrong
		}
		ks.k = k
		m.mu.Lock()
		if m.term != tok.t {
			// The term ended: Run may be closing the kept ones already.
			m.mu.Unlock()
			k.Close()
			return nil, false
		}
		if u.kept == nil {
			u.kept = map[string]keeper{}
		}
		u.kept[name] = ks
		u.keptList = append(u.keptList, ks)
		m.mu.Unlock()
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.term == term {
		return nil, false // a second call for the name in this run
	}
	m.mu.Lock()
	live = m.term == tok.t && !tok.mem.exited
	m.mu.Unlock()
	if !live {
		return nil, false
	}
	ks.term = term
	if !ks.k.Resume() && !m.bus.Stopped() {
		// The component unsubscribed the channel itself: make the kept
		// subscription anew. (A stopped bus closes the channel, as
		// Subscribe would.)
		k, err := busevents.Keep[T](m.bus, ks.name, ks.buffer, ks.opts...)
		if err != nil {
			return nil, false
		}
		ks.k = k
		k.Resume()
	}
	return ks.k.C(), true
}

// pauseKept pauses u's kept subscriptions routed for term. It runs with
// no lock held.
func (m *Manager) pauseKept(u *unit, term uint64) {
	m.mu.Lock()
	list := u.keptList // append-only: the elements it covers never change
	m.mu.Unlock()
	for _, ks := range list {
		ks.pauseTerm(term)
	}
}

// closeKept ends every kept subscription, when Run ends. It runs with no
// lock held.
func (m *Manager) closeKept() {
	m.mu.Lock()
	var all []keeper
	for _, u := range m.leaderOnly {
		all = append(all, u.keptList...)
	}
	m.mu.Unlock()
	for _, ks := range all {
		ks.close()
	}
}
