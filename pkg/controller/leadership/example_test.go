package leadership_test

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// A new leader's component subscribes late and still gets the current
// configuration, through the replayer of the all-replica side.
func ExampleStateReplayer() {
	bus := busevents.NewEventBus(100)
	defer bus.Stop()
	configReplayer := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
	bus.Start()

	// All-replica side: hand out every validated configuration through the
	// replayer, which caches and publishes it in one step.
	for _, version := range []string{"v1", "v2"} {
		configReplayer.Publish(events.NewConfigValidatedEvent(nil, version, "example"))
	}

	// Leader-only side, after BecameLeaderEvent: subscribe, then replay.
	// The lifecycle Manager gives a leader-only component a context like
	// term, which makes its subscriptions leader-only.
	term, endTerm := context.WithCancel(busevents.WithLeaderOnly(context.Background()))
	defer endTerm()
	ch := busevents.Subscribe[*events.ConfigValidatedEvent](term, bus, "config-publisher", 8)
	fmt.Println("replayed:", configReplayer.Replay())
	e := <-ch
	fmt.Println("leader holds config", e.Version)

	// A second replay reaches nobody: the subscriber already holds it.
	configReplayer.Replay()
	fmt.Println("queued after second replay:", len(ch))
	// Output:
	// replayed: true
	// leader holds config v2
	// queued after second replay: 0
}
