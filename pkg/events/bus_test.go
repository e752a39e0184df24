package events_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type ev = eventstest.Event

func newEv(typ string, v int) *ev { return &ev{Type: typ, Value: v} }

// stateEvent has a value receiver, so its typed nil cannot even report its type.
type stateEvent struct{ v int }

func (stateEvent) EventType() string    { return "state" }
func (stateEvent) Timestamp() time.Time { return time.Time{} }

// subscribe subscribes name to every event (narrowed with Types), with no
// context: the subscription ends on Unsubscribe or Stop.
func subscribe(b *busevents.EventBus, name string, buffer int, opts ...busevents.SubscribeOption) <-chan busevents.Event {
	return busevents.Subscribe[busevents.Event](context.Background(), b, name, buffer, opts...)
}

// subscribeLeaderOnly is subscribe for a leader-only subscriber.
func subscribeLeaderOnly(b *busevents.EventBus, name string, buffer int, opts ...busevents.SubscribeOption) <-chan busevents.Event {
	return busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(context.Background()), b, name, buffer, opts...)
}

func values(evs []busevents.Event) []int {
	out := make([]int, 0, len(evs))
	for _, e := range evs {
		out = append(out, e.(*ev).Value)
	}
	return out
}

func TestPublishBeforeStartIsHeldAndDeliveredInOrder(t *testing.T) {
	b := eventstest.NewBus(t, 3)
	ch := subscribe(b, "all", 10)
	for i := 1; i <= 5; i++ {
		if n := b.Publish(newEv("a", i)); n != 0 {
			t.Fatalf("Publish before Start returned %d, want 0", n)
		}
	}
	if got := eventstest.Drain(ch); len(got) != 0 {
		t.Fatalf("delivered before Start: %v", values(got))
	}
	b.Start()
	b.Start() // idempotent
	if got, want := values(eventstest.Drain(ch)), []int{1, 2, 3}; !slices.Equal(got, want) {
		t.Fatalf("after Start got %v, want %v", got, want)
	}
	if got := b.Stats().PreStartDropped["a"]; got != 2 {
		t.Fatalf("PreStartDropped[a] = %d, want 2", got)
	}
	if n := b.Publish(newEv("a", 6)); n != 1 {
		t.Fatalf("Publish after Start returned %d, want 1", n)
	}
}

func TestStartConcurrentWithPublishKeepsOrder(t *testing.T) {
	for range 50 {
		b := busevents.NewEventBus(100000)
		ch := subscribe(b, "all", 4000)
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := 1; i <= 2000; i++ {
				b.Publish(newEv("a", i))
			}
		})
		wg.Go(b.Start)
		wg.Go(b.Start)
		wg.Wait()
		got := values(eventstest.Drain(ch))
		if len(got) != 2000 {
			t.Fatalf("got %d events, want 2000", len(got))
		}
		for i, v := range got {
			if v != i+1 {
				t.Fatalf("event %d is %d: order broken", i, v)
			}
		}
		b.Stop()
	}
}

func TestRoutingByType(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	all := subscribe(b, "all", 10)
	typed := subscribe(b, "typed", 10, busevents.Types("a", "c"))
	b.Start()
	counts := []int{b.Publish(newEv("a", 1)), b.Publish(newEv("b", 2)), b.Publish(newEv("c", 3))}
	if want := []int{2, 1, 2}; !slices.Equal(counts, want) {
		t.Fatalf("Publish counts %v, want %v", counts, want)
	}
	if got := values(eventstest.Drain(all)); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("universal got %v", got)
	}
	if got := values(eventstest.Drain(typed)); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("typed got %v", got)
	}
}

// panicErr runs f and returns the error it panicked with, or nil.
func panicErr(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err, _ = r.(error)
			if err == nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}
	}()
	f()
	return nil
}

func TestFullBufferDropsForThatSubscriberOnly(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	var drops []busevents.Drop
	slow := subscribe(b, "slow", 2, busevents.Types("a"), busevents.Critical(func(d busevents.Drop) { drops = append(drops, d) }))
	lossy := subscribe(b, "lossy", 1, busevents.Types("a"))
	fast := subscribe(b, "fast", 10, busevents.Types("a"))
	b.Start()
	for i := 1; i <= 5; i++ {
		b.Publish(newEv("a", i))
	}
	if got := values(eventstest.Drain(fast)); !slices.Equal(got, []int{1, 2, 3, 4, 5}) {
		t.Fatalf("fast subscriber got %v", got)
	}
	if got := values(eventstest.Drain(slow)); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("slow subscriber got %v", got)
	}
	if got := values(eventstest.Drain(lossy)); !slices.Equal(got, []int{1}) {
		t.Fatalf("lossy subscriber got %v", got)
	}
	if len(drops) != 3 || drops[2] != (busevents.Drop{Subscriber: "slow", EventType: "a", Total: 3}) {
		t.Fatalf("drop callbacks %+v", drops)
	}
	stats := map[string]busevents.SubscriberStats{}
	for _, s := range b.Stats().Subscribers {
		stats[s.Name] = s
	}
	if s := stats["slow"]; !s.Critical || s.Dropped["a"] != 3 || s.Delivered["a"] != 2 {
		t.Fatalf("slow stats %+v", s)
	}
	if s := stats["lossy"]; s.Critical || s.Dropped["a"] != 4 || s.Delivered["a"] != 1 {
		t.Fatalf("lossy stats %+v", s)
	}
	if s := stats["fast"]; s.Dropped["a"] != 0 || s.Delivered["a"] != 5 {
		t.Fatalf("fast stats %+v", s)
	}
}

func TestLatestValueNeverLosesNewestState(t *testing.T) {
	synctest.Test(t, testLatestValueNeverLosesNewestState)
}

func testLatestValueNeverLosesNewestState(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	ch := subscribe(b, "state-reader", 4, busevents.LatestValue("config", "pods"))
	b.Start()
	// Nobody reads: fill the buffer with noise and many versions of state.
	for i := 1; i <= 100; i++ {
		b.Publish(newEv("noise", i))
		b.Publish(newEv("config", 1000+i))
		if i%3 == 0 {
			b.Publish(newEv("pods", 2000+i))
		}
	}
	got := drainSettled(ch)
	last := map[string]int{}
	for _, e := range got {
		last[e.EventType()] = e.(*ev).Value
	}
	if last["config"] != 1100 || last["pods"] != 2099 {
		t.Fatalf("newest state lost: got %v from %v", last, values(got))
	}
	st := b.Stats().Subscribers[0]
	if st.Skipped["config"] == 0 || st.Dropped["noise"] == 0 {
		t.Fatalf("expected skipped config versions and dropped noise, stats %+v", st)
	}
	if st.Dropped["config"] != 0 || st.Dropped["pods"] != 0 {
		t.Fatalf("state counted as lost: %+v", st)
	}
}

func TestLatestValueWithConcurrentReaderKeepsOrderAndNewest(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	ch := subscribe(b, "state-reader", 3, busevents.LatestValue("config"))
	b.Start()
	done := make(chan []int)
	sawNewest := make(chan struct{})
	go func() {
		var seen []int
		for e := range ch {
			v := e.(*ev).Value
			seen = append(seen, v)
			if v == 20000 {
				close(sawNewest)
			}
		}
		done <- seen
	}()
	for i := 1; i <= 20000; i++ {
		b.Publish(newEv("config", i))
	}
	select {
	case <-sawNewest:
	case <-time.After(30 * time.Second):
		t.Fatal("the newest version never reached the reader")
	}
	b.Stop()
	seen := <-done
	if seen[len(seen)-1] != 20000 {
		t.Fatalf("last seen %d, want 20000", seen[len(seen)-1])
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("order broken at %d: %d after %d", i, seen[i], seen[i-1])
		}
	}
}

// drainSettled receives from ch until nothing more arrives once every
// goroutine of the bubble is blocked. Use it inside a synctest bubble.
func drainSettled[T any](ch <-chan T) []T {
	var out []T
	for {
		synctest.Wait()
		select {
		case v, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, v)
		default:
			return out
		}
	}
}

func TestRepublishSkipsSubscribersHoldingNewerState(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	early := subscribe(b, "early", 10, busevents.Types("config"))
	b.Start()
	old := newEv("config", 1)
	oldSeq := b.NextSequence()
	b.Publish(newEv("config", 2)) // newer than old
	late := subscribeLeaderOnly(b, "late", 10, busevents.Types("config"))
	if n := b.Republish(old, oldSeq); n != 1 {
		t.Fatalf("Republish reached %d subscribers, want 1 (the late one)", n)
	}
	if got := values(eventstest.Drain(early)); !slices.Equal(got, []int{2}) {
		t.Fatalf("early subscriber got %v, want only the newer state", got)
	}
	if got := values(eventstest.Drain(late)); !slices.Equal(got, []int{1}) {
		t.Fatalf("late subscriber got %v, want the replayed state", got)
	}
	// A second replay of the same state reaches nobody.
	if n := b.Republish(old, oldSeq); n != 0 {
		t.Fatalf("second Republish reached %d, want 0", n)
	}
	if got := b.Stats().Replayed["config"]; got != 2 {
		t.Fatalf("Replayed[config] = %d, want 2", got)
	}
}

func TestGenericSubscribeEndsWithContext(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	ch := busevents.Subscribe[*ev](ctx, b, "typed", 4)
	b.Start()
	if n := b.Publish(newEv("x", 1)); n != 1 {
		t.Fatalf("Publish reached %d, want 1", n)
	}
	if e := <-ch; e.Value != 1 {
		t.Fatalf("got %v", e)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("channel still open after the context ended")
	}
	if n := b.Publish(newEv("x", 2)); n != 0 {
		t.Fatalf("Publish after the context ended reached %d", n)
	}
}

type routed struct{ v int }

func (*routed) EventType() string    { return "routed" }
func (*routed) Timestamp() time.Time { return time.Time{} }

func TestGenericSubscribeRoutesByEventType(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	ch := busevents.Subscribe[*routed](context.Background(), b, "routed", 4)
	b.Start()
	b.Publish(newEv("other", 1))
	b.Publish(newEv("routed", 2)) // same event type, other Go type: not for ch
	b.Publish(&routed{v: 3})
	got := eventstest.Drain(ch)
	if len(got) != 1 || got[0].v != 3 {
		t.Fatalf("got %v", got)
	}
	busevents.Unsubscribe(b, ch)
	busevents.Unsubscribe(b, ch)
}

func TestNilAndTypedNilEventsAreRefused(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	ch := subscribe(b, "all", 4)
	b.Start()
	var typedNil *ev
	var nilState *stateEvent
	for _, e := range []busevents.Event{nil, typedNil, nilState} {
		if n := b.Publish(e); n != 0 {
			t.Fatalf("Publish(%#v) reached %d", e, n)
		}
		if n := b.Republish(e, b.NextSequence()); n != 0 {
			t.Fatalf("Republish(%#v) reached %d", e, n)
		}
	}
	if got := eventstest.Drain(ch); len(got) != 0 {
		t.Fatalf("nil events delivered: %v", got)
	}
	if got := b.Stats().RejectedNil; got != 6 {
		t.Fatalf("RejectedNil = %d, want 6", got)
	}
	if busevents.IsNil(stateEvent{}) || busevents.IsNil(newEv("a", 0)) {
		t.Fatal("IsNil reports a real event as nil")
	}
}

func TestUseAfterStop(t *testing.T) {
	b := busevents.NewEventBus(0)
	ch := subscribe(b, "all", 4)
	b.Start()
	b.Stop()
	b.Stop()
	if _, ok := <-ch; ok {
		t.Fatal("subscription channel open after Stop")
	}
	if n := b.Publish(newEv("a", 1)); n != 0 {
		t.Fatalf("Publish after Stop reached %d", n)
	}
	if got := b.Stats().RejectedStopped; got != 1 {
		t.Fatalf("RejectedStopped = %d, want 1", got)
	}
	late := subscribe(b, "late", 4)
	if _, ok := <-late; ok {
		t.Fatal("subscription made after Stop is open")
	}
	busevents.Unsubscribe(b, ch)
	busevents.Unsubscribe(b, late)
	b.Start() // does nothing
	if b.Started() || !b.Stopped() {
		t.Fatal("Start after Stop restarted the bus")
	}
}

func TestUnsubscribeTwiceAndForeignChannel(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	ch := subscribe(b, "all", 4)
	b.Start()
	busevents.Unsubscribe(b, ch)
	busevents.Unsubscribe(b, ch)
	busevents.Unsubscribe(b, make(chan busevents.Event))
	if _, ok := <-ch; ok {
		t.Fatal("channel open after Unsubscribe")
	}
	if n := b.Publish(newEv("a", 1)); n != 0 {
		t.Fatalf("Publish reached %d after Unsubscribe", n)
	}
}

func TestSubscribeAfterStartWarnsNamingCaller(t *testing.T) {
	var buf bytes.Buffer
	b := busevents.NewEventBusWithLogger(0, slog.New(slog.NewTextHandler(&buf, nil)))
	defer b.Stop()
	subscribe(b, "before", 1)
	b.Start()
	if buf.Len() != 0 {
		t.Fatalf("warned before Start: %s", buf.String())
	}
	subscribeLeaderOnly(b, "leader-only", 1, busevents.Types("a"))
	busevents.Subscribe[busevents.Event](busevents.WithLeaderOnly(t.Context()), b, "leader-only-ctx", 1)
	if buf.Len() != 0 {
		t.Fatalf("warned about a leader-only subscription: %s", buf.String())
	}
	for _, st := range b.Stats().Subscribers {
		if want := st.Name != "before"; st.LeaderOnly != want {
			t.Errorf("%s: LeaderOnly %v, want %v", st.Name, st.LeaderOnly, want)
		}
	}
	busevents.Subscribe[busevents.Event](context.Background(), b, "after", 1, busevents.Types("a"))
	out := buf.String()
	if !strings.Contains(out, "subscriber=after") || !strings.Contains(out, "events_test.TestSubscribeAfterStartWarnsNamingCaller") {
		t.Fatalf("warning does not name subscriber and caller: %s", out)
	}
}

func TestConcurrentPublishSubscribeUnsubscribe(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for p := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				b.Publish(newEv([]string{"a", "b", "c"}[(i+p)%3], i))
			}
		})
	}
	for s := range 4 {
		wg.Go(func() {
			for i := 0; i < 200; i++ {
				var ch <-chan busevents.Event
				if s%2 == 0 {
					ch = subscribe(b, "u", 2, busevents.LatestValue("a"))
				} else {
					ch = subscribeLeaderOnly(b, "t", 2, busevents.Types("b"))
				}
				eventstest.Drain(ch)
				busevents.Unsubscribe(b, ch)
			}
		})
	}
	time.AfterFunc(200*time.Millisecond, cancel)
	wg.Wait()
	if n := len(b.Stats().Subscribers); n != 0 {
		t.Fatalf("%d subscriptions left", n)
	}
}

func TestTotalsOutliveSubscriptions(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	for term := 1; term <= 3; term++ {
		ch := subscribeLeaderOnly(b, "publisher", 4, busevents.Types("a"))
		b.Publish(newEv("a", term))
		busevents.Unsubscribe(b, ch)
		eventstest.Drain(ch)
	}
	live := subscribeLeaderOnly(b, "publisher", 4, busevents.Types("a"))
	b.Publish(newEv("a", 4))
	st := b.Stats()
	if len(st.Subscribers) != 1 || st.Subscribers[0].Delivered["a"] != 1 {
		t.Fatalf("live subscribers %+v", st.Subscribers)
	}
	if len(st.Totals) != 1 || st.Totals[0].Name != "publisher" || st.Totals[0].Delivered["a"] != 4 || !st.Totals[0].LeaderOnly {
		t.Fatalf("totals %+v, want 4 deliveries to publisher over its subscriptions", st.Totals)
	}
	busevents.Unsubscribe(b, live)
	if got := b.Stats().Totals[0].Delivered["a"]; got != 4 {
		t.Fatalf("totals after the last unsubscribe: %d, want 4", got)
	}
}
