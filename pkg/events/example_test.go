package events_test

import (
	"context"
	"fmt"
	"time"

	busevents "github.com/baton-dev/baton/pkg/events"
)

type configChanged struct{ version int }

func (*configChanged) EventType() string    { return "config.changed" }
func (*configChanged) Timestamp() time.Time { return time.Time{} }

func ExampleEventBus() {
	bus := busevents.NewEventBus(100)
	defer bus.Stop()

	// Subscribe before Start: nothing published meanwhile is missed.
	ch := bus.SubscribeTypes("watcher", 8, []string{"config.changed"})
	bus.Publish(&configChanged{version: 1}) // held until Start
	bus.Start()
	bus.Publish(&configChanged{version: 2})

	for range 2 {
		e := (<-ch).(*configChanged)
		fmt.Println("version", e.version)
	}
	// Output:
	// version 1
	// version 2
}

func ExampleSubscribe() {
	bus := busevents.NewEventBus(100)
	defer bus.Stop()
	ctx, cancel := context.WithCancel(context.Background())

	// A typed subscription: the bus routes by event type, the channel
	// carries *configChanged, and cancel ends it.
	ch := busevents.Subscribe[*configChanged](ctx, bus, "typed-watcher", 8)
	bus.Start()
	fmt.Println("delivered to", bus.Publish(&configChanged{version: 7}))
	fmt.Println("version", (<-ch).version)
	cancel()
	_, open := <-ch
	fmt.Println("open after cancel:", open)
	// Output:
	// delivered to 1
	// version 7
	// open after cancel: false
}

// A subscriber that never reads still gets the newest state once it does.
func ExampleLatestValue() {
	bus := busevents.NewEventBus(100)
	defer bus.Stop()
	ch := bus.SubscribeTypes("slow-reader", 2, []string{"config.changed"}, busevents.LatestValue("config.changed"))
	bus.Start()
	for v := 1; v <= 10; v++ {
		bus.Publish(&configChanged{version: v})
	}
	last := 0
	for last != 10 {
		last = (<-ch).(*configChanged).version
	}
	st := bus.Stats().Subscribers[0]
	fmt.Println("newest:", last, "lost:", st.Dropped["config.changed"])
	// Output:
	// newest: 10 lost: 0
}
