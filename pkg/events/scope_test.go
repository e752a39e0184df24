package events_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/testseed"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// period is one period of a scope: its context and the cancel that ends it.
type period struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// begin starts a period of sc, under a leader-only context.
func begin(t testing.TB, sc *busevents.Scope) period {
	ctx, cancel := context.WithCancel(busevents.WithScope(busevents.WithLeaderOnly(t.Context()), sc))
	sc.Begin(ctx)
	return period{ctx, cancel}
}

// end ends p, as a runtime does: the context first, then the period.
func (p period) end(sc *busevents.Scope) {
	p.cancel()
	sc.End(p.ctx)
}

func drainRouted(ch <-chan *routed) []int {
	var out []int
	for _, e := range eventstest.Drain(ch) {
		out = append(out, e.v)
	}
	return out
}

// readToClose reads ch until it is closed, failing if that takes long.
func readToClose[T any](t *testing.T, ch <-chan T) []T {
	t.Helper()
	var out []T
	timeout := time.After(10 * time.Second)
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, v)
		case <-timeout:
			t.Fatalf("channel not closed after %d events", len(out))
		}
	}
}

// TestScopePeriods: each period's Subscribe returns a new channel that
// gets only what is published from the call on, is reached by a replay of
// state it was given before in an earlier period, and is closed at the
// period's end with what it held.
func TestScopePeriods(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	sc := busevents.NewScope(b)
	defer sc.Close()

	p := begin(t, sc)
	ch1 := busevents.Subscribe[*routed](p.ctx, b, "scoped", 4)
	seq := b.NextSequence()
	replayed := &routed{v: 1}
	b.Publish(replayed)
	b.Publish(&routed{v: 2}) // left unread
	p.end(sc)
	p.end(sc) // again: nothing
	if got := drainRouted(ch1); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("first period read %v, want [1 2]", got)
	}
	if _, open := <-ch1; open {
		t.Fatal("first period's channel open after End")
	}
	b.Publish(&routed{v: 3}) // between periods

	p = begin(t, sc)
	ch2 := busevents.Subscribe[*routed](p.ctx, b, "scoped", 4)
	if ch2 == ch1 {
		t.Fatal("a new period got the closed channel of the last one")
	}
	if n := b.Republish(replayed, seq); n != 1 {
		t.Fatalf("replay in a new period queued for %d subscribers, want 1", n)
	}
	b.Publish(&routed{v: 4})
	p.end(sc)
	if got := drainRouted(ch2); !slices.Equal(got, []int{1, 4}) {
		t.Fatalf("second period read %v, want [1 4]: nothing from between periods", got)
	}
}

// TestScopeFallsBack: every call a scope does not keep gets an ordinary
// subscription, ended with its own context.
func TestScopeFallsBack(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	sc := busevents.NewScope(b)
	defer sc.Close()
	p := begin(t, sc)
	kept := busevents.Subscribe[*routed](p.ctx, b, "kept", 2)
	derived, cancelDerived := context.WithCancel(p.ctx)
	others := map[string]func(context.Context) <-chan *routed{
		"derived context": func(context.Context) <-chan *routed {
			return busevents.Subscribe[*routed](derived, b, "derived", 2)
		},
		"second call": func(ctx context.Context) <-chan *routed {
			return busevents.Subscribe[*routed](ctx, b, "kept", 2)
		},
	}
	var chans []<-chan *routed
	for _, f := range others {
		chans = append(chans, f(p.ctx))
	}
	other := busevents.Subscribe[*ev](p.ctx, b, "typed", 2, busevents.Types("a"))
	b.Publish(&routed{v: 1})
	cancelDerived()
	p.end(sc)
	for i, ch := range chans {
		if got := readToClose(t, ch); len(got) != 1 {
			t.Errorf("fallback %d read %d events, want 1", i, len(got))
		}
	}
	readToClose(t, kept)
	readToClose(t, other)

	// After End, and with another T or buffer for a name the scope holds.
	late := busevents.Subscribe[*routed](p.ctx, b, "kept", 2)
	if _, open := <-late; open {
		t.Fatal("a call after End got an open channel under a done context")
	}
	p = begin(t, sc)
	wrongT := busevents.Subscribe[*ev](p.ctx, b, "kept", 2, busevents.Types("a"))
	wrongBuffer := busevents.Subscribe[*routed](p.ctx, b, "typed", 3)
	b.Publish(newEv("a", 1))
	b.Publish(&routed{v: 2})
	p.end(sc)
	if len(readToClose(t, wrongT)) != 1 || len(readToClose(t, wrongBuffer)) != 1 {
		t.Fatal("a subscription with another T or buffer did not get its event")
	}

	defer func() {
		if err, _ := recover().(error); !errors.Is(err, busevents.ErrInvalidSubscription) {
			t.Fatalf("invalid arguments under a scope: recovered %v, want ErrInvalidSubscription", err)
		}
	}()
	p = begin(t, sc)
	defer p.end(sc)
	busevents.Subscribe[*routed](p.ctx, b, "", 1)
}

type uncomparableCtx struct {
	context.Context
	_ []int
}

func TestScopeBeginNeedsAComparableContext(t *testing.T) {
	sc := busevents.NewScope(eventstest.NewBus(t, 0))
	defer func() {
		if err, _ := recover().(error); !errors.Is(err, busevents.ErrInvalidSubscription) {
			t.Fatalf("recovered %v, want ErrInvalidSubscription", err)
		}
	}()
	sc.Begin(uncomparableCtx{Context: t.Context()})
}

// TestScopeStats: a scoped subscription is listed live in its period only;
// each period's counters go to Totals, which only grow.
func TestScopeStats(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	sc := busevents.NewScope(b)
	defer sc.Close()
	for n := 1; n <= 3; n++ {
		p := begin(t, sc)
		busevents.Subscribe[*routed](p.ctx, b, "scoped", 1, busevents.Critical(nil))
		b.Publish(&routed{v: 1})
		b.Publish(&routed{v: 2}) // buffer full: dropped
		live := b.Stats()
		if len(live.Subscribers) != 1 || live.Subscribers[0].Delivered["routed"] != 1 || live.Subscribers[0].Dropped["routed"] != 1 {
			t.Fatalf("period %d: live stats %+v, want this period's 1 delivered, 1 dropped", n, live.Subscribers)
		}
		p.end(sc)
		st := b.Stats()
		if len(st.Subscribers) != 0 {
			t.Fatalf("period %d: ended subscription listed live: %+v", n, st.Subscribers)
		}
		tot := st.Totals[0]
		if tot.Delivered["routed"] != uint64(n) || tot.Dropped["routed"] != uint64(n) || !tot.Critical {
			t.Fatalf("period %d: totals %+v, want %d delivered and dropped, critical", n, tot, n)
		}
	}
	sc.Close()
	if tot := b.Stats().Totals[0]; tot.Delivered["routed"] != 3 {
		t.Fatalf("after Close totals %+v: counted again or lost", tot)
	}
}

// TestScopeStop: Stop closes the period's channel; End then closes nothing
// again, and a later period's Subscribe gets a closed channel.
func TestScopeStop(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	sc := busevents.NewScope(b)
	p := begin(t, sc)
	ch := busevents.Subscribe[*routed](p.ctx, b, "scoped", 1)
	b.Stop()
	if _, open := <-ch; open {
		t.Fatal("channel open after Stop")
	}
	p.end(sc)
	p = begin(t, sc)
	if _, open := <-busevents.Subscribe[*routed](p.ctx, b, "scoped", 1); open {
		t.Fatal("channel of a period after Stop is open")
	}
	p.end(sc)
	sc.Close()
	sc.Close()
}

// TestScopeUnsubscribed: Unsubscribe ends the period's subscription; End
// closes nothing again, and the next period subscribes as before.
func TestScopeUnsubscribed(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	sc := busevents.NewScope(b)
	defer sc.Close()
	for range 3 {
		p := begin(t, sc)
		ch := busevents.Subscribe[*routed](p.ctx, b, "scoped", 1)
		b.Publish(&routed{v: 1})
		busevents.Unsubscribe(b, ch)
		b.Publish(&routed{v: 2})
		p.end(sc)
		if got := drainRouted(ch); !slices.Equal(got, []int{1}) {
			t.Fatalf("read %v, want [1]", got)
		}
	}
}

// TestScopeLatestValueNewPeriodStartsClean: a LatestValue subscription
// whose reader fell behind has events waiting in the bus's queue (and its
// mover may hold one) at the end of a period; they are discarded with it,
// the next period reads only what is published in it, and each period's
// skipped counts are counted once, in Totals.
func TestScopeLatestValueNewPeriodStartsClean(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	sc := busevents.NewScope(b)
	opts := []busevents.SubscribeOption{busevents.Types("a", "b"), busevents.LatestValue("a")}
	for n := 1; n <= 3; n++ {
		p := begin(t, sc)
		ch := busevents.Subscribe[busevents.Event](p.ctx, b, "scoped", 2, opts...)
		base := n * 100
		for v := range 10 { // more than the buffer: the rest waits in the queue
			b.Publish(newEv("a", base+v))
			b.Publish(newEv("b", base+v))
		}
		p.end(sc)
		if got := readToClose(t, ch); len(got) > 2 {
			t.Fatalf("period %d: read %d events after End, want at most the buffer (2)", n, len(got))
		}
		p = begin(t, sc)
		ch = busevents.Subscribe[busevents.Event](p.ctx, b, "scoped", 2, opts...)
		b.Publish(newEv("a", base+50))
		p.end(sc)
		if got := values(readToClose(t, ch)); !slices.Equal(got, []int{base + 50}) {
			t.Fatalf("period %d: the next period read %v, want only [%d]", n, got, base+50)
		}
	}
	tot := b.Stats().Totals[0]
	sc.Close()
	if again := b.Stats().Totals[0]; again.Skipped["a"] != tot.Skipped["a"] || tot.Skipped["a"] == 0 {
		t.Fatalf("skipped: %d before Close, %d after; want equal and not zero", tot.Skipped["a"], again.Skipped["a"])
	}
}

// TestScopeRenewDuringADropReport: a delivery that let go of its topic's
// lock to report a drop may still hold the routes of a subscription whose
// period ended when the next period subscribes; the scope then gives it a
// new record rather than reuse those routes, and the new period (a
// LatestValue subscription, whose mover runs) gets nothing from before it.
func TestScopeRenewDuringADropReport(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	reporting, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	// Routed before the scoped one: a delivery reports its drop, then goes
	// on to the scoped subscription's route.
	full := busevents.Subscribe[*routed](t.Context(), b, "full", 3, busevents.LeaderOnly(), busevents.Critical(func(busevents.Drop) {
		once.Do(func() { close(reporting); <-release })
	}))
	sc := busevents.NewScope(b)
	defer sc.Close()
	p := begin(t, sc)
	busevents.Subscribe[*routed](p.ctx, b, "scoped", 2, busevents.LatestValue())
	published := make(chan struct{})
	go func() {
		for v := range 7 { // the scoped one's mover starts at 2; "full" drops 3
			b.Publish(&routed{v: v})
		}
		close(published)
	}()
	<-reporting // the delivery of 3 let go of the topic's lock, holding the scoped route
	p.end(sc)
	p = begin(t, sc)
	ch := busevents.Subscribe[*routed](p.ctx, b, "scoped", 2, busevents.LatestValue())
	close(release)
	<-published
	eventstest.Drain(full)
	b.Publish(&routed{v: 7})
	var got []int
	for timeout := time.After(10 * time.Second); !slices.Contains(got, 7); {
		select {
		case e := <-ch:
			got = append(got, e.v)
		case <-timeout:
			t.Fatalf("in the new period read %v, and no 7", got)
		}
	}
	if slices.ContainsFunc(got, func(v int) bool { return v <= 3 }) {
		t.Fatalf("the new period read %v: an event published before it (up to 3, whose delivery spanned the end) leaked into it", got)
	}
	p.end(sc)
	readToClose(t, ch)
}

// TestScopePeriodAllocations guards the point of a Scope: a period of a
// subscription to two types costs its channel (two allocations: the
// channel and its buffer) and nothing else, once the bus knows the types.
func TestScopePeriodAllocations(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	sc := busevents.NewScope(b)
	defer sc.Close()
	ctx, cancel := context.WithCancel(busevents.WithScope(busevents.WithLeaderOnly(t.Context()), sc))
	defer cancel()
	opts := []busevents.SubscribeOption{busevents.Types("a", "b"), busevents.LatestValue("a")}
	e := newEv("a", 1)
	period := func() {
		sc.Begin(ctx)
		busevents.Subscribe[busevents.Event](ctx, b, "scoped", 4, opts...)
		b.Publish(e)
		sc.End(ctx)
	}
	period()
	if n := testing.AllocsPerRun(100, period); n > 2 {
		t.Fatalf("a period of a scoped subscription allocates %.1f times, want at most 2 (its channel)", n)
	}
}

// TestScopeRandomized ends and begins periods at random while publishers
// publish numbered events of two types, and checks what each period's
// channel gives: only events published after its Subscribe began (each
// publisher's order kept), none twice, then the close. A failure names its
// seed; BATON_SEED=<seed> replays the schedule of periods.
func TestScopeRandomized(t *testing.T) {
	seeds := testseed.Seeds(t, []uint64{1, 2, 3, 4}...)
	for _, seed := range seeds {
		for _, latest := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d,latest=%t", seed, latest), func(t *testing.T) { scopeRandom(t, seed, latest) })
		}
	}
}

func scopeRandom(t *testing.T, seed uint64, latest bool) {
	rng := rand.New(rand.NewPCG(seed, 0x6e97))
	b := eventstest.NewBus(t, 0)
	b.Start()
	opts := []busevents.SubscribeOption{busevents.Types("a", "b")}
	if latest {
		opts = append(opts, busevents.LatestValue("a"))
	}
	buffer := 1 + rng.IntN(8)
	sc := busevents.NewScope(b)
	defer sc.Close()
	var (
		mu   sync.Mutex
		next = map[string]int{} // next number each publisher publishes
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, typ := range []string{"a", "b"} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				// Published under mu, so that a number below the floor
				// read under mu was published before it was read.
				mu.Lock()
				b.Publish(newEv(typ, next[typ]))
				next[typ]++
				mu.Unlock()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	for n := range 200 {
		mu.Lock()
		floor := maps.Clone(next) // published from here on is fair game
		mu.Unlock()
		p := begin(t, sc)
		ch := busevents.Subscribe[busevents.Event](p.ctx, b, "scoped", buffer, opts...)
		last := map[string]int{"a": -1, "b": -1}
		check := func(e busevents.Event) {
			x := e.(*ev)
			if x.Value < floor[x.Type] || x.Value <= last[x.Type] {
				t.Fatalf("seed %d period %d: read %s#%d; published since Subscribe: from #%d, last read #%d",
					seed, n, x.Type, x.Value, floor[x.Type], last[x.Type])
			}
			last[x.Type] = x.Value
		}
		for range rng.IntN(50) {
			select {
			case e := <-ch:
				check(e)
			default:
			}
		}
		p.end(sc)
		for _, e := range readToClose(t, ch) {
			check(e)
		}
	}
}

// TestScopeManyTypes: a scoped subscription to more types than a
// subscription holds routes for inline (some routes are allocated one by
// one) gets every type in each period, plain and LatestValue.
func TestScopeManyTypes(t *testing.T) {
	types := make([]string, 9)
	for i := range types {
		types[i] = "type-" + strconv.Itoa(i)
	}
	for _, latest := range []bool{false, true} {
		t.Run(fmt.Sprintf("latest=%v", latest), func(t *testing.T) {
			b := eventstest.NewBus(t, 0)
			b.Start()
			opts := []busevents.SubscribeOption{busevents.Types(types[0], types[1:]...)}
			if latest {
				opts = append(opts, busevents.LatestValue())
			}
			sc := busevents.NewScope(b)
			defer sc.Close()
			for n := range 4 {
				p := begin(t, sc)
				ch := busevents.Subscribe[busevents.Event](p.ctx, b, "many", len(types)+1, opts...)
				for _, typ := range types {
					b.Publish(&eventstest.Event{Type: typ})
				}
				b.Publish(&eventstest.Event{Type: "other"})
				p.end(sc)
				var got []string
				for _, e := range readToClose(t, ch) {
					got = append(got, e.EventType())
				}
				slices.Sort(got)
				if !slices.Equal(got, types) {
					t.Fatalf("period %d: got %v, want %v", n, got, types)
				}
			}
		})
	}
}

// TestScopeKey: WithScope's context answers the key IsScopeKey names with
// its scope, and IsScopeKey names no other key.
func TestScopeKey(t *testing.T) {
	sc := busevents.NewScope(eventstest.NewBus(t, 0))
	ctx := busevents.WithScope(t.Context(), sc)
	found := false
	for _, k := range []any{nil, "scope", struct{}{}, 0} {
		if busevents.IsScopeKey(k) {
			t.Errorf("IsScopeKey(%#v) is true", k)
		}
	}
	// The key is unexported: find it through a context that records the
	// keys Value is asked for.
	rec := &keyRecorder{Context: ctx}
	busevents.Subscribe[*routed](rec, eventstest.NewBus(t, 0), "probe", 1, busevents.LeaderOnly())
	for _, k := range rec.keys {
		if busevents.IsScopeKey(k) {
			found = true
			if ctx.Value(k) != sc {
				t.Fatal("WithScope's context does not return the scope for the scope key")
			}
		}
	}
	if !found {
		t.Fatal("Subscribe did not look the scope up under a key IsScopeKey names")
	}
}

// keyRecorder is a context that records the keys its Value is asked for.
type keyRecorder struct {
	context.Context
	keys []any
}

func (r *keyRecorder) Value(k any) any {
	r.keys = append(r.keys, k)
	return r.Context.Value(k)
}
