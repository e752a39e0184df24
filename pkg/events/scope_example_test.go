package events_test

import (
	"context"
	"fmt"

	busevents "github.com/baton-dev/baton/pkg/events"
)

// A runtime that runs a component in periods gives it a context carrying
// a Scope; the component subscribes with Subscribe[T] as always. Each
// period's channel is new and closed at the period's end; the scope reuses
// the rest of the subscription.
func ExampleScope() {
	bus := busevents.NewEventBus(0)
	bus.Start()
	defer bus.Stop()
	scope := busevents.NewScope(bus)
	defer scope.Close()

	component := func(ctx context.Context) <-chan *routed {
		return busevents.Subscribe[*routed](ctx, bus, "component", 4)
	}
	var last <-chan *routed
	for n := 1; n <= 2; n++ {
		ctx, cancel := context.WithCancel(busevents.WithScope(busevents.WithLeaderOnly(context.Background()), scope))
		scope.Begin(ctx) // the runtime, before running the component
		ch := component(ctx)
		bus.Publish(&routed{v: n})
		cancel()
		scope.End(ctx) // the runtime, once the period is over
		for e := range ch {
			fmt.Printf("period %d read %d (new channel: %t)\n", n, e.v, ch != last)
		}
		last = ch
	}
	// Output:
	// period 1 read 1 (new channel: true)
	// period 2 read 2 (new channel: true)
}
