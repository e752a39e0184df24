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
	ch := busevents.Subscribe[*configChanged](context.Background(), bus, "watcher", 8)
	bus.Publish(&configChanged{version: 1}) // held until Start
	bus.Start()
	bus.Publish(&configChanged{version: 2})

	for range 2 {
		fmt.Println("version", (<-ch).version)
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
	ch := busevents.Subscribe[*configChanged](context.Background(), bus, "slow-reader", 2, busevents.LatestValue())
	bus.Start()
	for v := 1; v <= 10; v++ {
		bus.Publish(&configChanged{version: v})
	}
	last := 0
	for last != 10 {
		last = (<-ch).version
	}
	st := bus.Stats().Subscribers[0]
	fmt.Println("newest:", last, "lost:", st.Dropped["config.changed"])
	// Output:
	// newest: 10 lost: 0
}

type podsChanged struct{ count int }

func (*podsChanged) EventType() string    { return "pods.changed" }
func (*podsChanged) Timestamp() time.Time { return time.Time{} }

// Several event types on one channel, and a leader-only subscription by
// construction: the lifecycle Manager gives leader-only components a
// context like this one.
func ExampleTypes() {
	bus := busevents.NewEventBus(100)
	defer bus.Stop()
	bus.Start()
	term, endTerm := context.WithCancel(busevents.WithLeaderOnly(context.Background()))
	ch := busevents.Subscribe[busevents.Event](term, bus, "renderer", 8,
		busevents.Types("config.changed", "pods.changed"), busevents.LatestValue())
	bus.Publish(&configChanged{version: 3})
	bus.Publish(&podsChanged{count: 2})
	for range 2 {
		switch e := (<-ch).(type) {
		case *configChanged:
			fmt.Println("config", e.version)
		case *podsChanged:
			fmt.Println("pods", e.count)
		}
	}
	fmt.Println("leader-only:", bus.Stats().Subscribers[0].LeaderOnly)
	endTerm()
	_, open := <-ch
	fmt.Println("open after the term:", open)
	// Output:
	// config 3
	// pods 2
	// leader-only: true
	// open after the term: false
}
