package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// BenchmarkBurst publishes bursts of 1000 change events (alternating new
// configuration versions and pod generations, as fast as the bus takes
// them) and waits for the trigger that covers the last one. triggers/op is
// how many ReconciliationTriggeredEvents one burst gave. The debounce=1µs
// case, shorter than the gap between two changes, is the baseline of
// (almost) no debouncing.
func BenchmarkBurst(b *testing.B) {
	for _, d := range []time.Duration{time.Microsecond, time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("debounce=%s", d), func(b *testing.B) {
			bus := busevents.NewEventBusWithLogger(0, discard)
			defer bus.Stop()
			r, err := reconciler.NewReconciler(bus, reconciler.ReconcilerOptions{Debounce: d, MaxDelay: 10 * d, Logger: discard})
			if err != nil {
				b.Fatal(err)
			}
			triggers := busevents.Subscribe[*events.ReconciliationTriggeredEvent](context.Background(), bus, "bench", 4096)
			bus.Start()
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- r.Start(ctx) }()
			defer func() { cancel(); <-done }()

			cfg := testConfig("")
			pods := testPods(1, 3)
			var gen uint64
			var total int
			b.ReportAllocs()
			for b.Loop() {
				for i := range 1000 {
					gen++
					if i%2 == 0 {
						bus.Publish(events.NewConfigValidatedEvent(cfg.Config, fmt.Sprint("v", gen), "bench"))
					} else {
						bus.Publish(events.NewHAProxyPodsDiscoveredEvent(pods.Pods, gen))
					}
				}
				// The last change is a pod generation (i = 999 is odd); wait
				// for the trigger that names it.
				last := fmt.Sprintf("pods generation %d", gen)
				for {
					e := <-triggers
					total++
					if strings.HasSuffix(e.Reason, last) {
						break
					}
				}
			}
			b.ReportMetric(float64(total)/float64(b.N), "triggers/op")
			st := r.Stats()
			b.ReportMetric(float64(st.Changes)/float64(b.N), "changes_seen/op")
		})
	}
}

// BenchmarkCoordinatorTrigger is the leader's reconciliation latency: from
// publishing a trigger to receiving the TemplateRenderedEvent, with 100
// pods. Pipeline.Execute alone on the same input (execute-only) is the
// baseline: the difference is the Coordinator's and the bus's share.
func BenchmarkCoordinatorTrigger(b *testing.B) {
	bus := busevents.NewEventBusWithLogger(0, discard)
	defer bus.Stop()
	rendered := busevents.Subscribe[*events.TemplateRenderedEvent](context.Background(), bus, "bench", 16)
	bus.Start()
	c, err := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(busevents.WithLeaderOnly(context.Background()))
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	defer func() { cancel(); <-done }()
	for !subscribed(bus, c.Name()) {
		time.Sleep(time.Millisecond) // setup only: until Start has subscribed
	}
	cfg, pods := testConfig("v1"), testPods(1, 100)
	bus.Publish(cfg)
	bus.Publish(pods)

	b.Run("trigger-to-rendered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			bus.Publish(events.NewReconciliationTriggeredEvent("bench"))
			if e := <-rendered; e.PodGeneration != 1 {
				b.Fatalf("rendered generation %d", e.PodGeneration)
			}
		}
	})
	b.Run("execute-only", func(b *testing.B) {
		p := pipeline.NewDefault()
		in := pipeline.Input{Config: cfg.Config, ConfigVersion: cfg.Version, Pods: pods.Pods, PodGeneration: pods.Generation}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Execute(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func subscribed(bus *busevents.EventBus, name string) bool {
	for _, s := range bus.Stats().Subscribers {
		if s.Name == name {
			return true
		}
	}
	return false
}
