package eventstest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// doubler is a component under test: it answers each "in" event with an
// "out" event carrying twice the value.
func doubler(bus *busevents.EventBus, in <-chan *eventstest.Event) {
	for e := range in {
		bus.Publish(&eventstest.Event{Type: "out", Value: 2 * e.Value})
	}
}

// exampleTB stands in for the *testing.T that a test passes: an Example
// has none.
type exampleTB struct {
	testing.TB
	cleanups []func()
}

func (*exampleTB) Helper()               {}
func (tb *exampleTB) Cleanup(f func())   { tb.cleanups = append(tb.cleanups, f) }
func (*exampleTB) Fatalf(string, ...any) { panic("unreachable in this example") }
func (tb *exampleTB) end() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
}

func Example() {
	// In a test, t is the test's *testing.T, and eventstest.Bubble(t, ...)
	// would also run it in fake time.
	t := &exampleTB{}
	defer t.end()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bus := eventstest.NewBus(t, 0)
	// The watcher subscribes first, so it sees each "in" event before the
	// doubler can answer it.
	w := eventstest.NewWatcher(t, bus, eventstest.WithTimeout(10*time.Second))
	in := busevents.Subscribe[*eventstest.Event](ctx, bus, "doubler", 8, busevents.Types("in"))
	go doubler(bus, in)
	bus.Start()

	if err := eventstest.Inject(bus, &eventstest.Event{Type: "in", Value: 21}); err != nil {
		fmt.Println(err)
	}
	err := eventstest.ExpectExactly(w,
		eventstest.EventType("in"),
		func(e *eventstest.Event) bool { return e.Type == "out" && e.Value == 42 })
	fmt.Println("doubled:", err)

	fmt.Println("nothing more:", eventstest.ExpectNone(w, 10*time.Millisecond))

	bus.Stop()
	fmt.Println("inject after stop:", eventstest.Inject(bus, &eventstest.Event{Type: "in"}))
	// Output:
	// doubled: <nil>
	// nothing more: <nil>
	// inject after stop: eventstest: inject: event 0 (in): events: bus stopped
}
