package lifecycle_test

import (
	"context"
	"runtime"
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
	cfg, pods := c.subscribe(ctx)
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

func (c *benchComponent) subscribe(ctx context.Context) (<-chan *events.ConfigValidatedEvent, <-chan *events.HAProxyPodsDiscoveredEvent) {
	var pods <-chan *events.HAProxyPodsDiscoveredEvent
	if c.pods {
		pods = busevents.Subscribe[*events.HAProxyPodsDiscoveredEvent](ctx, c.bus, c.name+"-pods", 8)
	}
	return busevents.Subscribe[*events.ConfigValidatedEvent](ctx, c.bus, c.name+"-config", 8), pods
}

// BenchmarkTermReady measures, in the embedded mode (in-process bus, no
// cluster), the time from a BecameLeaderEvent (its timestamp: the lease
// acquisition) to term-ready with three leader-only components fed by two
// StateReplayers and a reconcile trigger hook. Each iteration is one full
// term: lead, ready, lose, stopped. Reported: term-ready latency median and
// p99 and maximum (ns-ready-median, ns-ready-p99, ns-ready-max) and the
// heap allocations per term (allocs/term). The baseline, measured in the same
// run, is one bus round trip: a BecameLeaderEvent published to a
// subscriber goroutine that answers on a channel.
func BenchmarkTermReady(b *testing.B) {
	b.Run("baseline=bus-roundtrip", func(b *testing.B) {
		b.ReportAllocs()
		bus := busevents.NewEventBusWithLogger(0, discard())
		ch := busevents.Subscribe[busevents.Event](context.Background(), bus, "echo", 8, busevents.Types(events.EventTypeBecameLeader))
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
		rig := newTermRig(b)
		lat := make([]time.Duration, 0, b.N)
		mallocs := mallocCount()
		for b.Loop() {
			lat = append(lat, rig.term())
		}
		b.StopTimer()
		mallocs = mallocCount() - mallocs
		if rig.triggers != len(lat) {
			b.Fatalf("reconcile hook ran %d times for %d terms", rig.triggers, len(lat))
		}
		reportLatency(b, lat)
		b.ReportMetric(float64(mallocs)/float64(len(lat)), "allocs/term")
	})
}

// termRig is a Manager with three leader-only components (benchComponent)
// fed by two StateReplayers and a reconcile trigger hook, running on a
// started bus, one full term per call of term.
type termRig struct {
	tb       testing.TB
	bus      *busevents.EventBus
	ready    chan lifecycle.TermReport
	stopped  chan lifecycle.TermStopReport
	last     uint64 // the last term made
	triggers int
}

// newTermRig starts the rig; it stops when tb ends.
func newTermRig(tb testing.TB) *termRig {
	bus := busevents.NewEventBusWithLogger(0, discard())
	r := &termRig{tb: tb, bus: bus, ready: make(chan lifecycle.TermReport, 1), stopped: make(chan lifecycle.TermStopReport, 1)}
	m, err := lifecycle.NewManager(bus, lifecycle.Options{
		Logger:        discard(),
		OnTermReady:   func(rep lifecycle.TermReport) { r.ready <- rep },
		OnTermStopped: func(rep lifecycle.TermStopReport) { r.stopped <- rep },
	})
	if err != nil {
		tb.Fatal(err)
	}
	cfgR := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus)
	podR := leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](bus)
	for _, err := range []error{
		m.AddLeaderOnly(&benchComponent{name: "publisher", bus: bus}),
		m.AddLeaderOnly(&benchComponent{name: "scheduler", bus: bus, pods: true}),
		m.AddLeaderOnly(&benchComponent{name: "coordinator", bus: bus, pods: true}),
		m.AddReplayer("config", cfgR),
		m.AddReplayer("pods", podR),
		m.AddTermHook("reconcile", func(uint64) { r.triggers++ }),
	} {
		if err != nil {
			tb.Fatal(err)
		}
	}
	bus.Start()
	cfgR.Publish(events.NewConfigValidatedEvent(&config.Config{}, "v1", "bench"))
	podR.Publish(events.NewHAProxyPodsDiscoveredEvent([]config.Pod{{Name: "p1"}, {Name: "p2"}}, 1))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		<-done
		<-m.Done()
		bus.Stop()
	})
	return r
}

// term makes one full term (lead, ready, lose, stopped) and returns its
// term-ready latency.
func (r *termRig) term() time.Duration {
	r.last++
	term := r.last
	r.bus.Publish(events.NewBecameLeaderEvent("me", term))
	rep := <-r.ready
	if rep.Term != term {
		r.tb.Fatalf("ready for term %d, want %d", rep.Term, term)
	}
	r.bus.Publish(events.NewLostLeadershipEvent("me", term, "bench"))
	if s := <-r.stopped; len(s.Overstayed) != 0 {
		r.tb.Fatalf("overstayed: %v", s.Overstayed)
	}
	return rep.Latency
}

// mallocCount returns the number of heap allocations made so far by the
// process (runtime.MemStats.Mallocs); the difference over the measured
// loop, divided by the terms, is what allocs/term reports: everything a
// term costs, on every goroutine, including the harness's own events.
func mallocCount() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
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
