package events_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/baton-dev/baton/internal/testseed"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// Kinds of subscription in TestPublishToMixedSubscriptionsRandomized.
const (
	mixedEvent    = iota // Subscribe[Event]: on chan Event
	mixedRouted          // Subscribe[*routed]: on the event type's own Go type
	mixedEv              // Subscribe[*ev] on the same event type: another Go type
	mixedCritical        // Critical on chan Event: reports drops, letting go of the topic lock
	mixedLatest          // LatestValue, with room for every event
	mixedKinds
)

// mixedSub is the model of one subscription of TestPublishToMixedSubscriptionsRandomized.
type mixedSub struct {
	name                         string
	kind                         int
	read                         func() (int, bool) // receives one event's value without blocking
	stop                         func()
	cap                          int
	queue                        []int
	delivered, dropped, reported uint64
}

// accepts reports whether s receives an event of Go type *routed (routed)
// or *ev.
func (s *mixedSub) accepts(routed bool) bool {
	switch s.kind {
	case mixedRouted:
		return routed
	case mixedEv:
		return !routed
	}
	return true
}

// A publish reaches every kind of subscription of its event type. These
// histories mix, on one event type, every kind of subscription in random
// order (plain on chan Event, on two Go types that report the same event
// type, Critical, LatestValue), with full buffers, reads, new stamps,
// subscriptions and unsubscriptions, and check against a model what each
// Publish returns, every event each subscriber reads, in order, and the
// Delivered and Dropped figures and drop reports of each. A failure
// names its seed; BATON_SEED=<seed> replays it.
func TestPublishToMixedSubscriptionsRandomized(t *testing.T) {
	seeds := make([]uint64, 200)
	for i := range seeds {
		seeds[i] = uint64(i)
	}
	seeds = testseed.Seeds(t, seeds...)
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("replay with BATON_SEED=%d", seed)
				}
			}()
			runMixedHistory(t, seed)
		})
	}
}

func runMixedHistory(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xd1))
	b := busevents.NewEventBusWithLogger(0, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer b.Stop()
	var subs []*mixedSub
	made := 0
	subscribe := func() {
		s := &mixedSub{name: fmt.Sprint("s", made), kind: rng.IntN(mixedKinds), cap: 1 + rng.IntN(4)}
		made++
		ctx := busevents.WithLeaderOnly(context.Background())
		switch s.kind {
		case mixedRouted:
			ch := busevents.Subscribe[*routed](ctx, b, s.name, s.cap)
			s.read, s.stop = recvValue(ch, func(e *routed) int { return e.v }), func() { busevents.Unsubscribe(b, ch) }
		case mixedEv:
			ch := busevents.Subscribe[*ev](ctx, b, s.name, s.cap, busevents.Types("routed"))
			s.read, s.stop = recvValue(ch, func(e *ev) int { return e.Value }), func() { busevents.Unsubscribe(b, ch) }
		default:
			opts := []busevents.SubscribeOption{busevents.Types("routed")}
			switch s.kind {
			case mixedCritical:
				opts = append(opts, busevents.Critical(func(busevents.Drop) { s.reported++ }))
			case mixedLatest:
				s.cap = 1000 // never full: it skips nothing the model must know of
				opts = append(opts, busevents.LatestValue())
			}
			ch := busevents.Subscribe[busevents.Event](ctx, b, s.name, s.cap, opts...)
			s.read, s.stop = recvValue(ch, eventValue), func() { busevents.Unsubscribe(b, ch) }
		}
		subs = append(subs, s)
	}
	for range 2 + rng.IntN(6) {
		subscribe()
	}
	b.Start()
	b.NextSequence()
	check := func(step int) {
		st := b.Stats()
		if len(st.Subscribers) != len(subs) {
			t.Fatalf("step %d: %d live subscribers, want %d", step, len(st.Subscribers), len(subs))
		}
		for _, s := range subs {
			got := statsOf(st.Subscribers, s.name)
			if got.Delivered["routed"] != s.delivered || got.Dropped["routed"] != s.dropped || s.reported != s.droppedIfCritical() {
				t.Fatalf("step %d: %s (kind %d): delivered %d, dropped %d, reported %d; want %d, %d, %d",
					step, s.name, s.kind, got.Delivered["routed"], got.Dropped["routed"], s.reported, s.delivered, s.dropped, s.droppedIfCritical())
			}
		}
	}
	for step := range 300 {
		switch k := rng.IntN(20); {
		case k < 10:
			v := step + 1
			isRouted := rng.IntN(2) == 0
			var e busevents.Event = newEv("routed", v)
			if isRouted {
				e = &routed{v: v}
			}
			want := 0
			for _, s := range subs {
				switch {
				case !s.accepts(isRouted):
				case len(s.queue) < s.cap:
					s.queue = append(s.queue, v)
					s.delivered++
					want++
				default:
					s.dropped++
				}
			}
			if n := b.Publish(e); n != want {
				t.Fatalf("step %d: Publish reached %d subscribers, want %d", step, n, want)
			}
		case k < 11:
			b.NextSequence()
		case k < 16 && len(subs) > 0:
			s := subs[rng.IntN(len(subs))]
			for range 1 + rng.IntN(3) {
				s.readOne(t, step)
			}
		case k < 17 && len(subs) > 0:
			i := rng.IntN(len(subs))
			s := subs[i]
			s.stop()
			for len(s.queue) > 0 {
				s.readOne(t, step)
			}
			if v, ok := s.read(); ok {
				t.Fatalf("step %d: %s read %d after its queue, want its channel closed", step, s.name, v)
			}
			subs = append(subs[:i], subs[i+1:]...)
		case k < 18:
			subscribe()
		default:
			check(step)
		}
	}
	check(300)
}

func (s *mixedSub) droppedIfCritical() uint64 {
	if s.kind == mixedCritical {
		return s.dropped
	}
	return 0
}

// readOne reads the next event of s, if the model holds one, and checks it.
func (s *mixedSub) readOne(t *testing.T, step int) {
	t.Helper()
	if len(s.queue) == 0 {
		return
	}
	v, ok := s.read()
	if !ok || v != s.queue[0] {
		t.Fatalf("step %d: %s (kind %d) read %d (ok %v), want %d", step, s.name, s.kind, v, ok, s.queue[0])
	}
	s.queue = s.queue[1:]
}

// recvValue returns a function that receives one event from ch and gives
// its value. It is called when the model says an event is queued or the
// channel closed; it waits only for a LatestValue subscription's mover,
// and reports a missing event as a closed channel after a while.
func recvValue[T any](ch <-chan T, value func(T) int) func() (int, bool) {
	return func() (int, bool) {
		select {
		case e, ok := <-ch:
			if !ok {
				return 0, false
			}
			return value(e), true
		case <-time.After(10 * time.Second):
			return 0, false
		}
	}
}

func eventValue(e busevents.Event) int {
	switch e := e.(type) {
	case *routed:
		return e.v
	case *ev:
		return e.Value
	}
	return -1
}

func statsOf(subs []busevents.SubscriberStats, name string) busevents.SubscriberStats {
	for _, s := range subs {
		if s.Name == name {
			return s
		}
	}
	return busevents.SubscriberStats{}
}
