package discovery_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/discovery"
	"github.com/baton-dev/baton/pkg/controller/events"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// Each change of the pod set is published once, with the whole set, and an
// unchanged set is not published.
func TestChangesSeenByAWatcher(t *testing.T) {
	eventstest.Bubble(t, func(t *testing.T, bus *busevents.EventBus) {
		w := eventstest.NewWatcher(t, bus)
		d, err := discovery.NewSimulated(bus, []config.Pod{pod("a", "10.0.0.1", true)}, discovery.Options{Logger: discard})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() { errc <- d.Start(ctx) }()
		defer func() {
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("Start returned %v", err)
			}
		}()

		podsAre := func(want string) func(*events.HAProxyPodsDiscoveredEvent) bool {
			return func(e *events.HAProxyPodsDiscoveredEvent) bool { return names(e.Pods) == want }
		}
		if err := eventstest.ExpectExactly(w, podsAre("lb/a+")); err != nil {
			t.Fatalf("initial set: %v", err)
		}
		for range 2 {
			if err := d.SetPod(pod("b", "10.0.0.2", false)); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // let Start's goroutine publish each
		}
		if err := eventstest.ExpectExactly(w, podsAre("lb/a+,lb/b-")); err != nil {
			t.Fatalf("a pod added, then the same pod again: %v", err)
		}
		if err := eventstest.ExpectNone(w, time.Minute); err != nil {
			t.Fatal(err)
		}
	})
}
