// Package eventstest has helpers for tests that use the event bus.
package eventstest

import (
	"testing"
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
