package events_test

import (
	"fmt"

	busevents "github.com/baton-dev/baton/pkg/events"
)

func ExampleKeep() {
	bus := busevents.NewEventBus(100)
	defer bus.Stop()
	bus.Start()

	// One subscription for every period of work, paused in between.
	k, err := busevents.Keep[*configChanged](bus, "worker", 8, busevents.LeaderOnly())
	if err != nil {
		panic(err)
	}
	defer k.Close()
	for period := 1; period <= 2; period++ {
		k.Resume()
		bus.Publish(&configChanged{version: period * 10})
		bus.Publish(&configChanged{version: period*10 + 1})
		fmt.Println("period", period, "reads version", (<-k.C()).version)
		k.Pause()                                // the unread version is dropped at the next Resume
		bus.Publish(&configChanged{version: -1}) // paused: never routed
	}
	// Output:
	// period 1 reads version 10
	// period 2 reads version 20
}
