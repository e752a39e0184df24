package events_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

func TestSubscribeRefusesInvalidArguments(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	ctx := t.Context()
	cases := map[string]func(){
		"empty name":  func() { busevents.Subscribe[*ev](ctx, b, "", 1) },
		"zero buffer": func() { busevents.Subscribe[*ev](ctx, b, "x", 0) },
		"empty type":  func() { busevents.Subscribe[busevents.Event](ctx, b, "x", 1, busevents.Types("")) },
		//lint:ignore SA1012 the misuse under test
		"nil context":     func() { busevents.Subscribe[*ev](nil, b, "x", 1) },
		"negative buffer": func() { busevents.Subscribe[busevents.Event](ctx, b, "x", -1) },
		"LatestValue of a type not received": func() {
			busevents.Subscribe[busevents.Event](ctx, b, "x", 1, busevents.Types("a"), busevents.LatestValue("b"))
		},
		"LatestValue without types on every type": func() {
			busevents.Subscribe[busevents.Event](ctx, b, "x", 1, busevents.LatestValue())
		},
	}
	for name, f := range cases {
		if err := panicErr(f); !errors.Is(err, busevents.ErrInvalidSubscription) {
			t.Errorf("%s: panic %v, want ErrInvalidSubscription", name, err)
		}
	}
	if n := len(b.Stats().Subscribers); n != 0 {
		t.Fatalf("%d subscriptions made by refused calls", n)
	}
}

// Subscribe[T] with Types receives several types on one channel; with a
// concrete T and LatestValue() its own type is latest-value.
func TestSubscribeTypesAndLatestValueOfOwnType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := eventstest.NewBus(t, 0)
		multi := busevents.Subscribe[busevents.Event](t.Context(), b, "multi", 8, busevents.Types("a", "c"))
		state := busevents.Subscribe[*routed](t.Context(), b, "state", 2, busevents.LatestValue())
		b.Start()
		b.Publish(newEv("a", 1))
		b.Publish(newEv("b", 2))
		b.Publish(newEv("c", 3))
		for v := 1; v <= 50; v++ {
			b.Publish(&routed{v: v})
		}
		if got := values(eventstest.Drain(multi)); !slices.Equal(got, []int{1, 3}) {
			t.Fatalf("multi got %v, want [1 3]", got)
		}
		got := drainSettled(state)
		if len(got) == 0 || got[len(got)-1].v != 50 {
			t.Fatalf("state reader did not end with the newest version: %v", got)
		}
	})
}

// A subscriber that never reads loses events, counted, slows nobody, and
// Stop still ends it: its channel is closed and the goroutine of a
// LatestValue subscription exits (goleak checks it in TestMain).
func TestSubscriberThatNeverReads(t *testing.T) {
	b := busevents.NewEventBus(0)
	plain := subscribe(b, "plain", 2, busevents.Types("a"))
	latest := subscribe(b, "latest", 2, busevents.Types("a", "s"), busevents.LatestValue("s"))
	reader := subscribe(b, "reader", 1000, busevents.Types("a", "s"))
	b.Start()
	for i := range 300 {
		b.Publish(newEv("a", i))
		b.Publish(newEv("s", i))
	}
	if got := len(eventstest.Drain(reader)); got != 600 {
		t.Fatalf("reader got %d of 600 events", got)
	}
	st := map[string]busevents.SubscriberStats{}
	for _, s := range b.Stats().Subscribers {
		st[s.Name] = s
	}
	if st["plain"].Dropped["a"] != 298 || st["latest"].Skipped["s"] == 0 {
		t.Fatalf("drops not counted: plain %+v latest %+v", st["plain"], st["latest"])
	}
	b.Stop()
	for _, ch := range []<-chan busevents.Event{plain, latest} {
		for range ch { // ends once the bus closed ch
		}
	}
}

// TestLatestValueRandomized publishes random sequences of LatestValue and
// other types to a subscriber reading at a random pace, and checks: the
// events received are a subsequence of those published, the last event
// received of each LatestValue type is the newest published, and every
// event published is received or counted. CI runs seeds 1 to 4;
// BATON_FRESH_SEEDS=<n> runs n fresh ones, and BATON_SEED=<seed> replays
// the seed a failure names.
func TestLatestValueRandomized(t *testing.T) {
	for _, seed := range busevents.SeedsFor(t, 1, 2, 3, 4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, seed))
			for round := range 20 {
				checkLatestValueRound(t, round, rng.Uint64())
			}
		})
	}
}

func checkLatestValueRound(t *testing.T, round int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	types := []string{"s0", "s1", "s2", "n0", "n1"}
	latest := types[:1+rng.IntN(3)]
	buffer := 1 + rng.IntN(8)
	n := 50 + rng.IntN(500)
	readerPace := 1 + rng.IntN(8)
	synctest.Test(t, func(t *testing.T) {
		b := eventstest.NewBus(t, 0)
		ch := subscribe(b, "r", buffer, busevents.Types(types[0], types[1:]...), busevents.LatestValue(latest...))
		b.Start()
		var got []*ev
		var wg sync.WaitGroup
		wg.Go(func() {
			for e := range ch {
				got = append(got, e.(*ev))
				if len(got)%readerPace == 0 {
					time.Sleep(time.Millisecond) // let the publisher run ahead
				}
			}
		})
		published := map[string]int{}
		newest := map[string]int{}
		for i := range n {
			typ := types[rng.IntN(len(types))]
			b.Publish(newEv(typ, i))
			published[typ]++
			newest[typ] = i
		}
		// Once everything is blocked with the channel empty, the mover
		// has nothing left either (it blocks only on a full channel).
		for {
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if len(ch) == 0 {
				break
			}
		}
		st := b.Stats()
		b.Stop()
		wg.Wait()
		received := map[string]int{}
		last := map[string]int{}
		for i, e := range got {
			if i > 0 && e.Value <= got[i-1].Value {
				t.Fatalf("round %d (seed %d): order broken: %d after %d", round, seed, e.Value, got[i-1].Value)
			}
			received[e.Type]++
			last[e.Type] = e.Value
		}
		for _, typ := range latest {
			if published[typ] > 0 && last[typ] != newest[typ] {
				t.Fatalf("round %d (seed %d): last %s received %d, newest published %d", round, seed, typ, last[typ], newest[typ])
			}
		}
		sub := st.Subscribers[0]
		for typ, p := range published {
			if c := received[typ] + int(sub.Dropped[typ]+sub.Skipped[typ]); c != p {
				t.Fatalf("round %d (seed %d): %s published %d, received+dropped+skipped %d", round, seed, typ, p, c)
			}
		}
	})
}

// The context from WithLeaderOnly makes every subscription under it
// leader-only, and ending it ends them.
func TestWithLeaderOnlyContext(t *testing.T) {
	b := eventstest.NewBus(t, 0)
	b.Start()
	ctx, cancel := context.WithCancel(busevents.WithLeaderOnly(t.Context()))
	if !busevents.IsLeaderOnly(ctx) || busevents.IsLeaderOnly(t.Context()) {
		t.Fatal("IsLeaderOnly does not tell the contexts apart")
	}
	ch := busevents.Subscribe[*ev](ctx, b, "term", 4)
	if st := b.Stats().Subscribers; len(st) != 1 || !st[0].LeaderOnly {
		t.Fatalf("subscription under a leader-only context: %+v", st)
	}
	cancel()
	if _, ok := <-ch; ok {
		t.Fatal("channel open after the term's context ended")
	}
}

// Events from one goroutine reach a subscriber in the order published,
// across types, whether they go straight to its channel or wait in a
// LatestValue subscription's overflow.
func TestOneGoroutinesEventsArriveInOrder(t *testing.T) {
	eventstest.Bubble(t, func(t *testing.T, b *busevents.EventBus) {
		w := eventstest.NewWatcher(t, b)
		slow := subscribe(b, "slow", 2, busevents.Types("a", "b"), busevents.LatestValue("b"))
		for i, typ := range []string{"a", "b", "a", "b", "a"} {
			b.Publish(newEv(typ, i))
		}
		want := []any{eventstest.EventType("a"), eventstest.EventType("b"), eventstest.EventType("a"),
			eventstest.EventType("b"), eventstest.EventType("a")}
		if err := eventstest.ExpectExactly(w, want...); err != nil {
			t.Fatal(err)
		}
		// slow, not reading, holds two; the rest wait in its overflow,
		// where a can be dropped but the newest b is kept, in order.
		got := drainSettled(slow)
		lastB := -1
		for i, e := range got {
			if i > 0 && e.(*ev).Value <= got[i-1].(*ev).Value {
				t.Fatalf("slow subscriber got %v: out of order", values(got))
			}
			if e.EventType() == "b" {
				lastB = e.(*ev).Value
			}
		}
		if lastB != 3 {
			t.Fatalf("slow subscriber got %v: newest b lost", values(got))
		}
	})
}

// A critical LatestValue subscriber is told about an event of another type
// removed to make room for state, with the type of the event it lost.
func TestCriticalLatestValueReportsEvictedEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := eventstest.NewBus(t, 0)
		var drops []busevents.Drop
		ch := subscribe(b, "critical", 2, busevents.Types("noise", "state"), busevents.LatestValue("state"),
			busevents.Critical(func(d busevents.Drop) { drops = append(drops, d) }))
		b.Start()
		// Two in the channel, one held by the goroutine that moves them,
		// two waiting.
		for i := range 5 {
			b.Publish(newEv("noise", i))
			synctest.Wait()
		}
		if len(drops) != 0 {
			t.Fatalf("drops before the buffer was full: %+v", drops)
		}
		b.Publish(newEv("state", 10))
		if want := (busevents.Drop{Subscriber: "critical", EventType: "noise", Total: 1}); len(drops) != 1 || drops[0] != want {
			t.Fatalf("drops %+v, want %+v", drops, want)
		}
		if got := values(drainSettled(ch)); got[len(got)-1] != 10 {
			t.Fatalf("got %v, want the state last", got)
		}
	})
}
