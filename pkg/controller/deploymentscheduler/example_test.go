package deploymentscheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/deploymentscheduler"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// The scheduler holds until a term gives it both a configuration and pods,
// then deploys at once. Here the state was published before the term began,
// as the all-replica side does, and reaches the scheduler through replays.
func ExampleComponent() {
	bus := busevents.NewEventBusWithLogger(16, discard)
	ready := make(chan lifecycle.TermReport, 1)
	m, _ := lifecycle.NewManager(bus, lifecycle.Options{Logger: discard, OnTermReady: func(r lifecycle.TermReport) { ready <- r }})
	sched, _ := deploymentscheduler.New(bus, deploymentscheduler.Options{MinInterval: time.Second, Logger: discard})
	m.AddLeaderOnly(sched)
	cfgState := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
	podState := leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](bus)
	m.AddReplayer("config", cfgState)
	m.AddReplayer("pods", podState)
	deployed := busevents.Subscribe[*events.DeploymentScheduledEvent](context.Background(), bus, "example", 4)
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- m.Run(ctx) }()

	cfg := events.NewConfigValidatedEvent(config.Default(), "v1", "example")
	pods := events.NewHAProxyPodsDiscoveredEvent([]config.Pod{{Namespace: "lb", Name: "haproxy-0", IP: "10.0.0.1", Ready: true}}, 1)
	cfgState.Cache(cfg)
	bus.Publish(cfg)
	podState.Cache(pods)
	bus.Publish(pods)

	bus.Publish(events.NewBecameLeaderEvent("replica-0", 12))

	d := <-deployed
	fmt.Printf("term %d deployment %d: config %s to pod generation %d (%d/%d ready)\n",
		d.Term, d.Sequence, d.ConfigVersion, d.PodGeneration, d.ReadyPods, d.Pods)
	fmt.Println("term ready:", (<-ready).Term)

	cancel()
	<-done
	bus.Stop()
	// Output:
	// term 12 deployment 1: config v1 to pod generation 1 (1/1 ready)
	// term ready: 12
}
