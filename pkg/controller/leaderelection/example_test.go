package leaderelection_test

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leaderelection"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// One replica on an in-memory lease: the adapter publishes its transitions
// on the bus before calling the callbacks.
func Example() {
	bus := busevents.NewEventBusWithLogger(0, discard())
	ch := busevents.Subscribe[busevents.Event](context.Background(), bus, "printer", 16, busevents.Types(
		events.EventTypeLeaderElectionStarted, events.EventTypeBecameLeader,
		events.EventTypeLostLeadership, events.EventTypeNewLeaderObserved,
	))
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	c, err := leaderelection.NewWithStore(k8sle.Config{
		Identity: "replica-0", LeaseName: "baton", LeaseNamespace: "default", ReleaseOnCancel: true,
	}, k8sle.NewMemoryStore("baton"), bus, leaderelection.Callbacks{
		OnStartedLeading: func(ctx context.Context) {
			cancel() // shut down at once: the term ends with Run's context
			<-ctx.Done()
		},
	}, discard())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := c.Run(ctx); err != nil {
		fmt.Println(err)
	}
	bus.Stop()
	for ev := range ch {
		switch e := ev.(type) {
		case *events.LeaderElectionStartedEvent:
			fmt.Println("election started:", e.Identity, e.LeaseNamespace+"/"+e.LeaseName)
		case *events.NewLeaderObservedEvent:
			fmt.Println("new leader:", e.Identity, "self:", e.IsSelf)
		case *events.BecameLeaderEvent:
			fmt.Println("became leader: term", e.Term)
		case *events.LostLeadershipEvent:
			fmt.Println("lost leadership: term", e.Term, "-", e.Reason)
		}
	}
	// Unordered output:
	// election started: replica-0 default/baton
	// new leader: replica-0 self: true
	// became leader: term 1
	// lost leadership: term 1 - context cancelled
}
