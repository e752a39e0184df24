package reconciler_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// TestCachedRunAllocations guards the cost of a run the render cache
// answers, the run every new term of an unchanged replica makes: the
// trigger and the TemplateRenderedEvent (the two events, pointers the bus
// hands to every subscriber) and nothing of the Coordinator's own: its
// LastRun is rewritten in place and its status copied by value.
func TestCachedRunAllocations(t *testing.T) {
	bus := busevents.NewEventBusWithLogger(0, discard)
	defer bus.Stop()
	rendered := busevents.Subscribe[*events.TemplateRenderedEvent](context.Background(), bus, "alloc", 16)
	bus.Start()
	c, err := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(busevents.WithLeaderOnly(context.Background()))
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	defer func() { cancel(); <-done }()
	for !subscribed(bus, c.Name()) {
		time.Sleep(time.Millisecond) // setup only: until Start has subscribed
	}
	bus.Publish(testConfig("v1"))
	bus.Publish(testPods(1, 10))
	run := func() {
		bus.Publish(events.NewReconciliationTriggeredEvent("alloc"))
		if e := <-rendered; e.PodGeneration != 1 {
			t.Fatalf("rendered generation %d", e.PodGeneration)
		}
	}
	run() // renders and fills the cache
	n := testing.AllocsPerRun(100, run)
	if st := c.Status(); st.Last == nil || !st.Last.Cached || !st.Last.Valid {
		t.Fatalf("last run %+v, want a cached valid one", st.Last)
	}
	t.Logf("%.1f allocations per cached run", n)
	if n > 2 {
		t.Errorf("a cached run costs %.1f allocations, want at most 2 (the trigger and the rendered event)", n)
	}
}
