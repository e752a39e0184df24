package reconciler_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// Example wires the Reconciler and the Coordinator into the lifecycle
// Manager, publishes state before any leader exists, and shows that the
// new leader's first render is built from it.
func Example() {
	logger := slog.New(slog.DiscardHandler)
	bus := busevents.NewEventBusWithLogger(0, logger)
	defer bus.Stop()
	m, _ := lifecycle.NewManager(bus, lifecycle.Options{Logger: logger})
	configs := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
	pods := leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](bus)
	rec, _ := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Logger: logger})
	coord, _ := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{Logger: logger})
	m.AddAllReplica(rec)
	m.AddLeaderOnly(coord)
	m.AddReplayer("config", configs)
	m.AddReplayer("pods", pods)
	m.AddTermHook("reconcile", rec.TriggerNow)
	rendered := busevents.Subscribe[*events.TemplateRenderedEvent](context.Background(), bus, "example", 8)
	bus.Start()
	ctx, cancel := context.WithCancel(context.Background())
	go m.Run(ctx)

	// The all-replica side publishes and caches state; nobody leads yet.
	cfg := &config.Config{
		Frontends: []config.Frontend{{Name: "web", Bind: ":80", DefaultBackend: "app"}},
		Backends:  []config.Backend{{Name: "app", Port: 8080}},
	}
	for _, v := range []string{"v1", "v2"} {
		e := events.NewConfigValidatedEvent(cfg, v, "example")
		bus.Publish(e)
		configs.Cache(e)
	}
	p := events.NewHAProxyPodsDiscoveredEvent([]config.Pod{
		{Namespace: "shop", Name: "app-0", IP: "10.0.0.1", Ready: true},
		{Namespace: "shop", Name: "app-1", IP: "10.0.0.2", Ready: true},
	}, 7)
	bus.Publish(p)
	pods.Cache(p)

	bus.Publish(events.NewBecameLeaderEvent("replica-0", 3))
	first := <-rendered
	fmt.Printf("term %d: config %s, pods generation %d, %d servers\n",
		first.Term, first.ConfigVersion, first.PodGeneration, strings.Count(first.Output, "    server "))

	cancel()
	<-m.Done()
	// Output:
	// term 3: config v2, pods generation 7, 2 servers
}
