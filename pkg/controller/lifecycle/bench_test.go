package lifecycle_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
)

// benchComponent is a lean leader-only component: it subscribes to the
// state types it needs (ended with the term's context) and reports each as
// held when it arrives.
type benchComponent struct {
	name  string
	bus   *busevents.EventBus
	pods  bool // also needs pods
	dummy int
}

func (c *benchComponent) Name() string { return c.name }

func (c *benchComponent) RequiredState() []string {
	if c.pods {
		return []string{events.EventTypeConfigValidated, events.EventTypeHAProxyPodsDiscovered}
	}
	return []string{events.EventTypeConfigValidated}
}

func (c *benchComponent) Start(ctx context.Context) error {
	c.dummy = 0 // per-term reset
	cfg := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, c.bus, c.name+"-config", 8, busevents.LeaderOnly())
	var pods <-chan *events.HAProxyPodsDiscoveredEvent
	if c.pods {
		pods = busevents.Subscribe[*events.HAProxyPodsDiscoveredEvent](ctx, c.bus, c.name+"-pods", 8, busevents.LeaderOnly())
	}
	lifecycle.Subscribed(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-cfg:
			if !ok {
				cfg = nil
				continue
			}
			c.dummy += len(ev.Version)
			lifecycle.HoldsState(ctx, events.EventTypeConfigValidated)
		case ev, ok := <-pods:
			if !ok {
				pods = nil
				continue
			}
			c.dummy += len(ev.Pods)
			lifecycle.HoldsState(ctx, events.EventTypeHAProxyPodsDiscovered)
		}
	}
}

// BenchmarkTermReady measures, in the embedded mode (in-process bus, no
// cluster), the time from a BecameLeaderEvent (its timestamp: the lease
// acquisition) to term-ready with three leader-only components fed by two
// StateReplayers and a reconcile trigger hook. Each iteration is one full
// term: lead, ready, lose, stopped. Reported: term-ready latency median and
// p99 (ns-ready-median, ns-ready-p99). The baseline, measured in the same
// run, is one bus round trip: a BecameLeaderEvent published to a
// subscriber goroutine that answers on a channel.
func BenchmarkTermReady(b *testing.B) {
	b.Run("baseline=bus-roundtrip", func(b *testing.B) {
		b.ReportAllocs()
		bus := busevents.NewEventBusWithLogger(0, discard())
		ch := bus.SubscribeTypes("echo", 8, []string{events.EventTypeBecameLeader})
		bus.Start()
		defer bus.Stop()
		got := make(chan time.Duration)
		go func() {
			for ev := range ch {
				got <- time.Since(ev.Timestamp())
			}
		}()
		lat := make([]time.Duration, 0, b.N)
		for i := 0; b.Loop(); i++ {
			bus.Publish(events.NewBecameLeaderEvent("me", uint64(i+1)))
			lat = append(lat, <-got)
		}
		reportLatency(b, lat)
	})
	b.Run("components=3,replayers=2", func(b *testing.B) {
		b.ReportAllocs()
		bus := busevents.NewEventBusWithLogger(0, discard())
		ready := make(chan lifecycle.TermReport, 1)
		stopped := make(chan lifecycle.TermStopReport, 1)
		m, err := lifecycle.NewManager(bus, lifecycle.Options{
			Logger:        discard(),
			OnTermReady:   func(r lifecycle.TermReport) { ready <- r },
			OnTermStopped: func(r lifecycle.TermStopReport) { stopped <- r },
		})
		if err != nil {
			b.Fatal(err)
		}
		cfgR := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
		podR := leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](bus)
		triggers := 0
		for _, err := range []error{
			m.AddLeaderOnly(&benchComponent{name: "publisher", bus: bus}),
			m.AddLeaderOnly(&benchComponent{name: "scheduler", bus: bus, pods: true}),
			m.AddLeaderOnly(&benchComponent{name: "coordinator", bus: bus, pods: true}),
			m.AddReplayer("config", cfgR),
			m.AddReplayer("pods", podR),
			m.AddTermHook("reconcile", func(uint64) { triggers++ }),
		} {
			if err != nil {
				b.Fatal(err)
			}
		}
		bus.Start()
		cfg := events.NewConfigValidatedEvent(&config.Config{}, "v1", "bench")
		bus.Publish(cfg)
		cfgR.Cache(cfg)
		pods := events.NewHAProxyPodsDiscoveredEvent([]config.Pod{{Name: "p1"}, {Name: "p2"}}, 1)
		bus.Publish(pods)
		podR.Cache(pods)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		defer func() {
			cancel()
			<-done
			<-m.Done()
			bus.Stop()
		}()

		lat := make([]time.Duration, 0, b.N)
		for i := 0; b.Loop(); i++ {
			term := uint64(i + 1)
			bus.Publish(events.NewBecameLeaderEvent("me", term))
			r := <-ready
			if r.Term != term {
				b.Fatalf("ready for term %d, want %d", r.Term, term)
			}
			lat = append(lat, r.Latency)
			bus.Publish(events.NewLostLeadershipEvent("me", term, "bench"))
			if s := <-stopped; len(s.Overstayed) != 0 {
				b.Fatalf("overstayed: %v", s.Overstayed)
			}
		}
		b.StopTimer()
		if triggers != len(lat) {
			b.Fatalf("reconcile hook ran %d times for %d terms", triggers, len(lat))
		}
		reportLatency(b, lat)
	})
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "ns-ready-median")
	b.ReportMetric(float64(lat[(len(lat)*99)/100].Nanoseconds()), "ns-ready-p99")
	b.ReportMetric(float64(lat[len(lat)-1].Nanoseconds()), "ns-ready-max")
}
