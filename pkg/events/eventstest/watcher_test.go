package eventstest_test

import (
	"errors"
	"testing"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

func ev(typ string, v int) *eventstest.Event { return &eventstest.Event{Type: typ, Value: v} }

type other struct{}

func (*other) EventType() string    { return "other" }
func (*other) Timestamp() time.Time { return time.Time{} }

func TestExpectSkipsAndMatchesInOrder(t *testing.T) {
	eventstest.Bubble(t, func(t *testing.T, bus *busevents.EventBus) {
		w := eventstest.NewWatcher(t, bus)
		if err := eventstest.Inject(bus, ev("a", 1), &other{}, ev("b", 2), ev("a", 3)); err != nil {
			t.Fatal(err)
		}
		err := eventstest.Expect(w,
			eventstest.Type[*other](),
			func(e *eventstest.Event) bool { return e.Value == 3 })
		if err != nil {
			t.Fatal(err)
		}
		if err := eventstest.ExpectNone(w, time.Second); err != nil {
			t.Fatalf("events consumed by Expect seen again: %v", err)
		}
	})
}

func TestExpectFailures(t *testing.T) {
	eventstest.Bubble(t, func(t *testing.T, bus *busevents.EventBus) {
		w := eventstest.NewWatcher(t, bus, eventstest.WithTimeout(time.Minute))
		start := time.Now()
		if err := eventstest.Expect(w, eventstest.EventType("never")); !errors.Is(err, eventstest.ErrTimeout) {
			t.Fatalf("nothing published: %v, want ErrTimeout", err)
		}
		if d := time.Since(start); d != time.Minute {
			t.Fatalf("timed out after %s, want the watcher's timeout", d)
		}

		bus.Publish(ev("a", 1))
		bus.Publish(ev("b", 2))
		if err := eventstest.ExpectExactly(w, eventstest.EventType("b")); !errors.Is(err, eventstest.ErrUnexpected) {
			t.Fatalf("ExpectExactly with an event in between: %v, want ErrUnexpected", err)
		}

		bus.Publish(ev("c", 3))
		bus.Publish(ev("d", 4))
		if err := eventstest.ExpectExactly(w, eventstest.EventType("c")); !errors.Is(err, eventstest.ErrUnexpected) {
			t.Fatalf("ExpectExactly with an event after: %v, want ErrUnexpected", err)
		}

		bus.Publish(ev("e", 5))
		if err := eventstest.ExpectNone(w, time.Second); !errors.Is(err, eventstest.ErrUnexpected) {
			t.Fatalf("ExpectNone with an event: %v, want ErrUnexpected", err)
		}

		bad := errors.New("bad value")
		bus.Publish(ev("f", 6))
		if err := eventstest.Expect(w, func(*eventstest.Event) error { return bad }); !errors.Is(err, bad) {
			t.Fatalf("func(T) error: %v, want its error", err)
		}
		for _, want := range []any{nil, 1, func(int) bool { return true }, func(*eventstest.Event) int { return 0 }} {
			if err := eventstest.Expect(w, want); !errors.Is(err, eventstest.ErrBadWant) {
				t.Fatalf("Expect(%T): %v, want ErrBadWant", want, err)
			}
		}
	})
}

func TestExpectReportsLostEventsAndStoppedBus(t *testing.T) {
	eventstest.Bubble(t, func(t *testing.T, bus *busevents.EventBus) {
		w := eventstest.NewWatcher(t, bus)
		for i := range 5000 {
			bus.Publish(ev("a", i))
		}
		if err := eventstest.Expect(w, eventstest.EventType("a")); !errors.Is(err, eventstest.ErrLost) {
			t.Fatalf("after an overflow: %v, want ErrLost", err)
		}
		bus.Stop()
		for eventstest.Expect(w, eventstest.EventType("never")) == nil {
		}
		if err := eventstest.Expect(w, eventstest.EventType("never")); !errors.Is(err, eventstest.ErrClosed) {
			t.Fatalf("after Stop: %v, want ErrClosed", err)
		}
	})
}

func TestInject(t *testing.T) {
	bus := eventstest.NewBus(t, 0)
	w := eventstest.NewWatcher(t, bus)
	if err := eventstest.Inject(bus, ev("a", 1)); err != nil {
		t.Fatalf("before Start: %v", err)
	}
	var typedNil *eventstest.Event
	if err := eventstest.Inject(bus, ev("b", 2), typedNil); !errors.Is(err, busevents.ErrNilEvent) {
		t.Fatalf("typed nil: %v, want ErrNilEvent", err)
	}
	bus.Start()
	if err := eventstest.ExpectExactly(w, eventstest.EventType("a"), eventstest.EventType("b")); err != nil {
		t.Fatal(err)
	}
	bus.Stop()
	if err := eventstest.Inject(bus, ev("c", 3)); !errors.Is(err, busevents.ErrStopped) {
		t.Fatalf("after Stop: %v, want ErrStopped", err)
	}
}
