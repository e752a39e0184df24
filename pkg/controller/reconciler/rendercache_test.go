package reconciler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"testing/synctest"

	"github.com/baton-dev/baton/internal/testseed"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
	"github.com/baton-dev/baton/pkg/termctx"
)

// TestRandomizedRenderCache drives a Coordinator through seeded random
// steps, each followed by a trigger: a new configuration version, a new pod
// generation, the same events again (a replay), new events that repeat the
// versions of the current ones with other content (a producer that reuses a
// version must still be rendered afresh), and a new term. Checked after
// every trigger, once the bubble is idle:
//   - exactly one outcome is published, for the current term, with the
//     current versions, and its output is what the default renderer makes
//     of the current input;
//   - the pipeline ran iff the input events changed since the last run
//     (with NoRenderCache: on every trigger);
//   - Status().Last says whether the outcome came from the cache.
//
// A failure names its seed; BATON_SEED=<seed> replays it.
func TestRandomizedRenderCache(t *testing.T) {
	seeds := testseed.Seeds(t, []uint64{1, 2, 3, 4, 5, 6, 7, 8}...)
	for _, seed := range seeds {
		for _, noCache := range []bool{false, true} {
			t.Run(fmt.Sprintf("seed=%d,noCache=%t", seed, noCache), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { randomRenderCache(t, seed, noCache) })
			})
		}
	}
}

// countingRenderer renders with the default renderer and counts the
// renders; only the Coordinator's run goroutine calls it, one at a time.
type countingRenderer struct{ n int }

func (r *countingRenderer) Render(ctx context.Context, in pipeline.Input) (string, error) {
	r.n++
	return pipeline.DefaultRenderer().Render(ctx, in)
}

// cacheHarness runs a Coordinator one term at a time.
type cacheHarness struct {
	t    *testing.T
	bus  *busevents.EventBus
	c    *reconciler.Coordinator
	term uint64
	stop func()
}

func (h *cacheHarness) newTerm() {
	if h.stop != nil {
		h.stop()
	}
	h.term++
	ctx, cancel := context.WithCancel(termctx.NewContext(busevents.WithLeaderOnly(context.Background()), h.term))
	done := make(chan error, 1)
	go func() { done <- h.c.Start(ctx) }()
	synctest.Wait()
	h.stop = func() {
		cancel()
		if err := <-done; err != nil {
			h.t.Errorf("term %d: Start: %v", h.term, err)
		}
	}
}

func randomRenderCache(t *testing.T, seed uint64, noCache bool) {
	rng := rand.New(rand.NewPCG(seed, 0xcac4e))
	bus := newBus(t)
	out := subscribeOutcomes(bus)
	bus.Start()
	r := &countingRenderer{}
	p, _ := pipeline.New(r, pipeline.HAProxyValidator{})
	c, err := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{Pipeline: p, Logger: discard, NoRenderCache: noCache})
	if err != nil {
		t.Fatal(err)
	}
	h := &cacheHarness{t: t, bus: bus, c: c}
	h.newTerm()
	defer func() { h.stop() }()

	cfgN, gen := 1, uint64(1)
	cfg, pods := testConfig("v1"), testPods(1, 2)
	var lastCfg *events.ConfigValidatedEvent // the inputs of the last render
	var lastPods *events.HAProxyPodsDiscoveredEvent
	for step := range 200 {
		what := ""
		switch rng.IntN(6) {
		case 0:
			cfgN++
			cfg, what = randomConfig(rng, fmt.Sprintf("v%d", cfgN)), "new config version"
		case 1:
			gen++
			pods, what = testPods(gen, 1+rng.IntN(4)), "new pod generation"
		case 2:
			cfg, what = randomConfig(rng, cfg.Version), "other config content, same version"
		case 3:
			pods, what = testPods(gen, 1+rng.IntN(4)), "other pods, same generation"
		case 4:
			h.newTerm()
			what = "new term"
		default:
			what = "the same events again"
		}
		rendersBefore := r.n
		bus.Publish(cfg)
		bus.Publish(pods)
		bus.Publish(events.NewReconciliationTriggeredEvent("random"))
		synctest.Wait()

		ctx := fmt.Sprintf("seed %d step %d (%s)", seed, step, what)
		got := eventstest.Drain(out.rendered)
		if failed := eventstest.Drain(out.failed); len(got) != 1 || len(failed) != 0 {
			t.Fatalf("%s: %d renders and %d failures published, want 1 render", ctx, len(got), len(failed))
		}
		ev := got[0]
		want, err := pipeline.DefaultRenderer().Render(context.Background(), pipeline.Input{
			Config: cfg.Config, ConfigVersion: cfg.Version, Pods: pods.Pods, PodGeneration: pods.Generation})
		if err != nil {
			t.Fatal(err)
		}
		if ev.Output != want || ev.ConfigVersion != cfg.Version || ev.PodGeneration != pods.Generation || ev.Term != h.term {
			t.Fatalf("%s: published %s/%d term %d (output equal: %t), want %s/%d term %d",
				ctx, ev.ConfigVersion, ev.PodGeneration, ev.Term, ev.Output == want, cfg.Version, pods.Generation, h.term)
		}
		changed := cfg != lastCfg || pods != lastPods
		wantRender := changed || noCache
		if rendered := r.n > rendersBefore; rendered != wantRender {
			t.Fatalf("%s: rendered %t, want %t (input changed: %t)", ctx, rendered, wantRender, changed)
		}
		if last := c.Status().Last; last == nil || last.Cached == wantRender {
			t.Fatalf("%s: Status().Last = %+v, want Cached %t", ctx, last, !wantRender)
		}
		lastCfg, lastPods = cfg, pods
	}
}

// randomConfig returns a configuration of version, with a random backend
// port, so that two configurations of one version may differ.
func randomConfig(rng *rand.Rand, version string) *events.ConfigValidatedEvent {
	cfg := &config.Config{
		Frontends: []config.Frontend{{Name: "web", Bind: ":80", DefaultBackend: "app"}},
		Backends:  []config.Backend{{Name: "app", Port: 8000 + rng.IntN(1000)}},
	}
	return events.NewConfigValidatedEvent(cfg, version, "test")
}

// TestRenderCacheSkipsErrors: a run that returned an error is not cached,
// so the same input is run again on the next trigger; findings of the
// validator are an outcome like any other, and are published again from
// the cache, stamped with the new term.
func TestRenderCacheSkipsErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		out := subscribeOutcomes(bus)
		bus.Start()
		renders, fail := 0, true
		r := pipeline.RendererFunc(func(context.Context, pipeline.Input) (string, error) {
			renders++
			if fail {
				return "", fmt.Errorf("renderer down")
			}
			return "not haproxy", nil // the validator finds errors in it
		})
		p, _ := pipeline.New(r, pipeline.HAProxyValidator{})
		c := newCoordinator(t, bus, p, 0)
		h := &cacheHarness{t: t, bus: bus, c: c}
		h.newTerm()
		defer func() { h.stop() }()
		cfg, pods := testConfig("v1"), testPods(1, 1)
		trigger := func() []*events.ValidationFailedEvent {
			bus.Publish(cfg)
			bus.Publish(pods)
			bus.Publish(events.NewReconciliationTriggeredEvent("t"))
			synctest.Wait()
			if n := len(eventstest.Drain(out.rendered)); n != 0 {
				t.Fatalf("%d renders published for an invalid output", n)
			}
			return eventstest.Drain(out.failed)
		}
		if f := trigger(); len(f) != 1 || renders != 1 {
			t.Fatalf("failing renderer: %d failures published, %d renders; want 1, 1", len(f), renders)
		}
		fail = false
		f := trigger()
		if len(f) != 1 || renders != 2 || len(f[0].Errors) == 0 {
			t.Fatalf("after an error: %d failures published, %d renders; want 1 with findings, 2 renders", len(f), renders)
		}
		findings := len(f[0].Errors)
		h.newTerm()
		f = trigger()
		if len(f) != 1 || renders != 2 || len(f[0].Errors) != findings || f[0].Term != h.term {
			t.Fatalf("new term, same input: %d failures published (%+v), %d renders; want 1 of term %d with %d findings from the cache, 2 renders",
				len(f), f, renders, h.term, findings)
		}
	})
}
