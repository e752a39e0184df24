package eventstest

import (
	"testing"
	"testing/synctest"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// NewBus returns a bus that is stopped when the test ends. Start it yourself
// after subscribing the components under test.
func NewBus(tb testing.TB, capacity int) *busevents.EventBus {
	tb.Helper()
	b := busevents.NewEventBus(capacity)
	tb.Cleanup(b.Stop)
	return b
}

// Bubble runs f in a testing/synctest bubble with a started bus, created
// inside the bubble and stopped when f returns, before the bubble checks
// that every goroutine it started has ended. Time inside the bubble is fake:
// a Watcher's deadline or an ExpectNone window passes as soon as every
// goroutine of the bubble is blocked, so tests of timing cost no real time.
func Bubble(t *testing.T, f func(t *testing.T, bus *busevents.EventBus)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		bus := NewBus(t, 0)
		bus.Start()
		f(t, bus)
		bus.Stop()
		synctest.Wait()
	})
}

// Inject publishes events on bus, as a component under test would see them
// from a peer. It returns an error wrapping busevents.ErrNilEvent for a nil
// or typed-nil event and busevents.ErrStopped once the bus is stopped; the
// events before the faulty one are published. Before Start the events are
// held like any publish.
func Inject(bus *busevents.EventBus, events ...busevents.Event) error {
	for i, e := range events {
		if busevents.IsNil(e) {
			return errorf("inject: event %d: %w", i, busevents.ErrNilEvent)
		}
		if bus.Stopped() {
			return errorf("inject: event %d (%s): %w", i, e.EventType(), busevents.ErrStopped)
		}
		bus.Publish(e)
	}
	return nil
}

// Event is a plain event for tests: Type is its event type, Value a payload.
type Event struct {
	Type  string
	Value int
	At    time.Time
}

func (e *Event) EventType() string    { return e.Type }
func (e *Event) Timestamp() time.Time { return e.At }

// Drain returns what ch holds now without waiting.
func Drain[T any](ch <-chan T) []T {
	var out []T
	for {
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
