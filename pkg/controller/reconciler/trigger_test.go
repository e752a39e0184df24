package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/baton-dev/baton/internal/testseed"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// versionRecorder renders with the default renderer and records the
// configuration version and pod generation of every render it started.
type versionRecorder struct {
	mu   sync.Mutex
	runs []string
}

func (v *versionRecorder) Render(ctx context.Context, in pipeline.Input) (string, error) {
	v.mu.Lock()
	v.runs = append(v.runs, fmt.Sprintf("%s/%d", in.ConfigVersion, in.PodGeneration))
	v.mu.Unlock()
	return pipeline.DefaultRenderer().Render(ctx, in)
}

func (v *versionRecorder) take() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := v.runs
	v.runs = nil
	return out
}

// TestRenderStartsFromNewestAfterOverflow is the regression test of a
// trigger the bus dropped for want of room: the render it causes must start
// from the newest configuration and pods published before it, never from
// the inputs the coordinator held when the drop was reported. Each round
// publishes new state, then more triggers than the buffer holds.
func TestRenderStartsFromNewestAfterOverflow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		bus.Start()
		rec := &versionRecorder{}
		p, _ := pipeline.New(rec, pipeline.HAProxyValidator{})
		c := newCoordinator(t, bus, p, 3)
		stop := startCoordinator(t, c)
		defer stop()

		bus.Publish(testConfig("v0"))
		bus.Publish(testPods(100, 1))
		bus.Publish(events.NewReconciliationTriggeredEvent("first"))
		synctest.Wait()
		rec.take()
		stale := 0
		for round := 1; round <= 20; round++ {
			want := fmt.Sprintf("v%d/%d", round, 100+round)
			bus.Publish(testConfig(fmt.Sprintf("v%d", round)))
			bus.Publish(testPods(uint64(100+round), 1))
			for range 8 {
				bus.Publish(events.NewReconciliationTriggeredEvent("burst"))
			}
			synctest.Wait()
			runs := rec.take()
			if len(runs) == 0 {
				t.Fatalf("round %d: no render after the burst", round)
			}
			for _, r := range runs {
				if r != want {
					stale++
					t.Errorf("round %d: a render started from %s, want %s (all: %v)", round, r, want, runs)
					break
				}
			}
		}
		if stale > 0 {
			t.Errorf("%d of 20 rounds rendered stale inputs", stale)
		}
	})
}

// TestPipelinePanicFailsTheTerm: a panicking renderer does not take the
// process down; Start returns an error wrapping ErrPipelinePanicked and
// lifecycle.ErrPanicked, and nothing is published for the run.
func TestPipelinePanicFailsTheTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		out := subscribeOutcomes(bus)
		bus.Start()
		r := pipeline.RendererFunc(func(context.Context, pipeline.Input) (string, error) {
			var m map[string]int
			//lint:ignore SA5000 the write to a nil map is the runtime panic under test
			m["boom"]++
			return "", nil
		})
		p, _ := pipeline.New(r, pipeline.HAProxyValidator{})
		c := newCoordinator(t, bus, p, 0)
		done := make(chan error, 1)
		go func() { done <- c.Start(busevents.WithLeaderOnly(context.Background())) }()
		synctest.Wait()
		bus.Publish(testConfig("v1"))
		bus.Publish(testPods(1, 1))
		bus.Publish(events.NewReconciliationTriggeredEvent("t"))
		synctest.Wait()
		select {
		case err := <-done:
			if !errors.Is(err, reconciler.ErrPipelinePanicked) || !errors.Is(err, lifecycle.ErrPanicked) {
				t.Fatalf("Start = %v, want ErrPipelinePanicked and lifecycle.ErrPanicked", err)
			}
			if !strings.Contains(err.Error(), "nil map") {
				t.Errorf("error %q does not carry the panic value", err)
			}
		default:
			t.Fatal("Start still runs after its pipeline panicked")
		}
		if n := len(eventstest.Drain(out.rendered)) + len(eventstest.Drain(out.failed)); n != 0 {
			t.Errorf("%d outcomes published for a panicked run", n)
		}
		if c.Status().Running {
			t.Error("status still running")
		}
	})
}

// TestRandomizedRendersFollowNewestState drives a Coordinator, wired as the
// replica wires it (Latest from the all-replica replayers), with seeded
// random bursts of configurations, pod sets and triggers, through a random
// subscription buffer. Checked after every burst, once the bubble is idle:
// the versions rendered never go back, and if the burst had a trigger, the
// last render is of a configuration and pods at least as new as those
// published before the burst's last trigger. A failure
// names its seed; BATON_SEED=<seed> replays it.
func TestRandomizedRendersFollowNewestState(t *testing.T) {
	seeds := testseed.Seeds(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}...)
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomRenders(t, seed) })
		})
	}
}

func randomRenders(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xc0de))
	bus := newBus(t)
	cfgR := leadership.NewStateReplayer[*events.ConfigValidatedEvent](bus).WithLogger(discard)
	podR := leadership.NewStateReplayer[*events.HAProxyPodsDiscoveredEvent](bus).WithLogger(discard)
	bus.Start()
	rec := &versionRecorder{}
	p, _ := pipeline.New(rec, pipeline.HAProxyValidator{})
	buffer := 1 + rng.IntN(8)
	c, err := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{Pipeline: p, Buffer: buffer, Logger: discard,
		Latest: func() (*events.ConfigValidatedEvent, *events.HAProxyPodsDiscoveredEvent) {
			cfg, _ := cfgR.Get()
			pods, _ := podR.Get()
			return cfg, pods
		}})
	if err != nil {
		t.Fatal(err)
	}
	stop := startCoordinator(t, c)
	defer stop()

	cfg, pods := 0, 0
	lastCfg, lastPods := -1, -1
	for round := range 60 {
		triggered := false
		var cfgAt, podsAt int // published before the burst's last trigger
		for range 1 + rng.IntN(20) {
			switch rng.IntN(3) {
			case 0:
				cfg++
				cfgR.Publish(testConfig(fmt.Sprintf("v%d", cfg)))
			case 1:
				pods++
				podR.Publish(testPods(uint64(pods), 1))
			default:
				triggered, cfgAt, podsAt = true, cfg, pods
				bus.Publish(events.NewReconciliationTriggeredEvent("random"))
			}
		}
		synctest.Wait()
		for _, r := range rec.take() {
			var gotCfg, gotPods int
			if _, err := fmt.Sscanf(r, "v%d/%d", &gotCfg, &gotPods); err != nil {
				t.Fatalf("seed %d round %d: render %q: %v", seed, round, r, err)
			}
			if gotCfg < lastCfg || gotPods < lastPods {
				t.Fatalf("seed %d round %d (buffer %d): render of v%d/%d after v%d/%d: went back", seed, round, buffer, gotCfg, gotPods, lastCfg, lastPods)
			}
			lastCfg, lastPods = gotCfg, gotPods
		}
		if triggered && cfg > 0 && pods > 0 && (lastCfg < cfgAt || lastPods < podsAt) {
			t.Fatalf("seed %d round %d (buffer %d): last render v%d/%d, but v%d/%d was published before the last trigger",
				seed, round, buffer, lastCfg, lastPods, cfgAt, podsAt)
		}
	}
}
