package reconciler_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/pipeline"
	"github.com/baton-dev/baton/pkg/controller/reconciler"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/events/eventstest"
)

// gatedRenderer renders with the default renderer, but each render waits
// for a release, and records the pod generation it rendered.
type gatedRenderer struct {
	release chan struct{}
	mu      sync.Mutex
	gens    []uint64
}

func newGatedRenderer() *gatedRenderer { return &gatedRenderer{release: make(chan struct{})} }

func (g *gatedRenderer) Render(ctx context.Context, in pipeline.Input) (string, error) {
	g.mu.Lock()
	g.gens = append(g.gens, in.PodGeneration)
	g.mu.Unlock()
	select {
	case <-g.release:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return pipeline.DefaultRenderer().Render(ctx, in)
}

func (g *gatedRenderer) rendered() []uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]uint64(nil), g.gens...)
}

type outcomes struct {
	rendered <-chan *events.TemplateRenderedEvent
	failed   <-chan *events.ValidationFailedEvent
}

func subscribeOutcomes(bus *busevents.EventBus) outcomes {
	return outcomes{
		rendered: busevents.Subscribe[*events.TemplateRenderedEvent](context.Background(), bus, "test-rendered", 64),
		failed:   busevents.Subscribe[*events.ValidationFailedEvent](context.Background(), bus, "test-failed", 64),
	}
}

// startCoordinator runs c under a leader-only context without a term
// (term 0), as the lifecycle Manager would but for the term.
func startCoordinator(t *testing.T, c *reconciler.Coordinator) (stop func() error) {
	ctx, cancel := context.WithCancel(busevents.WithLeaderOnly(context.Background()))
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	synctest.Wait()
	return func() error {
		cancel()
		return <-done
	}
}

func newCoordinator(t *testing.T, bus *busevents.EventBus, p *pipeline.Pipeline, buffer int) *reconciler.Coordinator {
	t.Helper()
	c, err := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{Pipeline: p, Buffer: buffer, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCoordinatorOptions(t *testing.T) {
	bus := newBus(t)
	if _, err := reconciler.NewCoordinator(nil, reconciler.CoordinatorOptions{}); !errors.Is(err, reconciler.ErrNilBus) {
		t.Errorf("nil bus: %v", err)
	}
	_, err := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{Buffer: -2})
	if want := "reconciler: invalid options: buffer -2 is negative"; err == nil || err.Error() != want {
		t.Errorf("negative buffer: %v, want %q", err, want)
	}
	c, err := reconciler.NewCoordinator(bus, reconciler.CoordinatorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.RequiredState(); len(got) != 2 || got[0] != events.EventTypeConfigValidated || got[1] != events.EventTypeHAProxyPodsDiscovered {
		t.Errorf("RequiredState = %v", got)
	}
}

// TestCoalescing: triggers that arrive during a run, however many, give
// exactly one follow-up run, and it renders the newest inputs; runs never
// overlap.
func TestCoalescing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		buffer int // 3: most of the triggers during the run are coalesced by the bus
	}{{"buffered", 64}, {"triggers coalesced by a full buffer", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.buffer == 3 {
				// The Coordinator drains its subscription while a run is in
				// progress, so on a second core it can keep pace with the
				// burst below and the bus never has to coalesce. With one P
				// the burst (microseconds, no blocking) runs before the
				// Coordinator does, and the buffer fills.
				defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			}
			synctest.Test(t, func(t *testing.T) {
				bus := newBus(t)
				out := subscribeOutcomes(bus)
				bus.Start()
				g := newGatedRenderer()
				p, _ := pipeline.New(g, pipeline.HAProxyValidator{})
				c := newCoordinator(t, bus, p, tc.buffer)
				stop := startCoordinator(t, c)

				bus.Publish(testConfig("v1"))
				bus.Publish(testPods(1, 2))
				bus.Publish(events.NewReconciliationTriggeredEvent("first"))
				synctest.Wait()
				if got := g.rendered(); len(got) != 1 {
					t.Fatalf("renders started: %v, want one", got)
				}
				// During the run: ten triggers and two newer pod sets.
				for i := range 10 {
					bus.Publish(events.NewReconciliationTriggeredEvent("during"))
					if i == 3 {
						bus.Publish(testPods(2, 2))
					}
				}
				bus.Publish(testPods(3, 3))
				synctest.Wait()
				if got := g.rendered(); len(got) != 1 {
					t.Fatalf("a second render started during the first: %v", got)
				}
				g.release <- struct{}{} // first run ends
				synctest.Wait()
				if got := g.rendered(); len(got) != 2 || got[1] != 3 {
					t.Fatalf("renders %v, want a follow-up of generation 3", got)
				}
				g.release <- struct{}{} // the follow-up ends
				synctest.Wait()
				if got := g.rendered(); len(got) != 2 {
					t.Fatalf("renders %v, want exactly one follow-up", got)
				}
				got := eventstest.Drain(out.rendered)
				if len(got) != 2 || got[0].PodGeneration != 1 || got[1].PodGeneration != 3 || got[1].ConfigVersion != "v1" {
					t.Fatalf("rendered events %v", got)
				}
				if !strings.Contains(got[1].Output, "10.3.0.3:8080") {
					t.Errorf("follow-up output lacks the newest pods:\n%s", got[1].Output)
				}
				st := c.Status()
				if st.Runs != 2 || st.Rendered != 2 || st.Failed != 0 || st.Term != 0 || !st.Running {
					t.Errorf("status %+v", st)
				}
				if tc.buffer == 64 && (st.Triggers != 11 || st.Coalesced != 9) {
					t.Errorf("status triggers %d coalesced %d, want 11 and 9", st.Triggers, st.Coalesced)
				}
				if tc.buffer == 3 {
					if n := shedTriggers(bus, c.Name()); n == 0 {
						t.Error("no trigger was coalesced by the bus with a buffer of 3; the case tests nothing")
					}
					if n := droppedTriggers(bus, c.Name()); n != 0 {
						t.Errorf("%d triggers lost; a full buffer must coalesce them", n)
					}
				}
				if err := stop(); err != nil {
					t.Errorf("Start returned %v", err)
				}
				if c.Status().Running {
					t.Error("status still running after Start returned")
				}
			})
		})
	}
}

// TestWaitsForInputs: a trigger without both inputs does not render from
// nothing; it runs once they arrive.
func TestWaitsForInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		out := subscribeOutcomes(bus)
		bus.Start()
		c := newCoordinator(t, bus, nil, 0)
		stop := startCoordinator(t, c)
		defer stop()

		bus.Publish(events.NewReconciliationTriggeredEvent("early"))
		bus.Publish(events.NewReconciliationTriggeredEvent("early again"))
		bus.Publish(testConfig("v1"))
		synctest.Wait()
		if n := len(eventstest.Drain(out.rendered)) + len(eventstest.Drain(out.failed)); n != 0 {
			t.Fatalf("%d outcomes without pods", n)
		}
		if st := c.Status(); !st.Waiting || !st.HasConfig || st.HasPods || st.Runs != 0 {
			t.Errorf("status %+v, want waiting for pods", st)
		}
		bus.Publish(testPods(4, 1))
		synctest.Wait()
		got := eventstest.Drain(out.rendered)
		if len(got) != 1 || got[0].ConfigVersion != "v1" || got[0].PodGeneration != 4 {
			t.Fatalf("rendered %v, want one of v1/4", got)
		}
		if st := c.Status(); st.Waiting || st.Runs != 1 || st.Last == nil || !st.Last.Valid || st.Last.PodGeneration != 4 {
			t.Errorf("status %+v", st)
		}
		// State alone, without a trigger, renders nothing.
		bus.Publish(testPods(5, 1))
		synctest.Wait()
		if n := len(eventstest.Drain(out.rendered)); n != 0 {
			t.Errorf("%d renders without a trigger", n)
		}
	})
}

// TestValidationFailed: an invalid render is published as a
// ValidationFailedEvent with the line errors, not as a render; a pipeline
// error likewise, with the error.
func TestValidationFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		out := subscribeOutcomes(bus)
		bus.Start()
		boom := errors.New("template blew up")
		var fail bool
		var mu sync.Mutex
		r := pipeline.RendererFunc(func(ctx context.Context, in pipeline.Input) (string, error) {
			mu.Lock()
			defer mu.Unlock()
			if fail {
				return "", boom
			}
			return pipeline.DefaultRenderer().Render(ctx, in)
		})
		p, _ := pipeline.New(r, pipeline.HAProxyValidator{})
		c := newCoordinator(t, bus, p, 0)
		stop := startCoordinator(t, c)
		defer stop()

		bad := testConfig("bad")
		bad.Config.Frontends[0].DefaultBackend = "nowhere"
		bus.Publish(bad)
		bus.Publish(testPods(1, 1))
		bus.Publish(events.NewReconciliationTriggeredEvent("t"))
		synctest.Wait()
		if n := len(eventstest.Drain(out.rendered)); n != 0 {
			t.Fatalf("%d renders of an invalid output", n)
		}
		failed := eventstest.Drain(out.failed)
		if len(failed) != 1 || failed[0].ConfigVersion != "bad" || failed[0].PodGeneration != 1 || len(failed[0].Errors) != 1 {
			t.Fatalf("failed events %v", failed)
		}
		var le pipeline.LineError
		if !errors.As(failed[0].Errors[0], &le) || le.Line != 15 || !strings.Contains(le.Msg, `"nowhere": no such backend`) {
			t.Errorf("error %v, want the line error of the default_backend", failed[0].Errors[0])
		}

		mu.Lock()
		fail = true
		mu.Unlock()
		bus.Publish(testConfig("v2"))
		bus.Publish(events.NewReconciliationTriggeredEvent("t"))
		synctest.Wait()
		failed = eventstest.Drain(out.failed)
		if len(failed) != 1 || len(failed[0].Errors) != 1 || !errors.Is(failed[0].Errors[0], boom) || !errors.Is(failed[0].Errors[0], pipeline.ErrRender) {
			t.Fatalf("failed events %v, want the render error", failed)
		}
		if st := c.Status(); st.Failed != 2 || st.Rendered != 0 || st.Last == nil || st.Last.Valid || st.Last.Errors != 1 {
			t.Errorf("status %+v", st)
		}
	})
}

// TestCoordinatorStop: a term that ends during a run publishes nothing for
// it, and Start returns promptly; a second concurrent Start is refused; a
// stopped bus is reported.
func TestCoordinatorStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bus := newBus(t)
		out := subscribeOutcomes(bus)
		bus.Start()
		g := newGatedRenderer()
		p, _ := pipeline.New(g, pipeline.HAProxyValidator{})
		c := newCoordinator(t, bus, p, 0)
		stop := startCoordinator(t, c)
		if err := c.Start(context.Background()); !errors.Is(err, reconciler.ErrAlreadyRunning) {
			t.Errorf("concurrent Start = %v", err)
		}
		bus.Publish(testConfig("v1"))
		bus.Publish(testPods(1, 1))
		bus.Publish(events.NewReconciliationTriggeredEvent("t"))
		synctest.Wait()
		if err := stop(); err != nil { // cancels while the render waits
			t.Errorf("Start = %v", err)
		}
		if n := len(eventstest.Drain(out.rendered)) + len(eventstest.Drain(out.failed)); n != 0 {
			t.Errorf("%d outcomes published after the term ended", n)
		}

		bus2 := busevents.NewEventBusWithLogger(0, discard)
		bus2.Start()
		c2 := newCoordinator(t, bus2, nil, 0)
		done := make(chan error, 1)
		go func() { done <- c2.Start(busevents.WithLeaderOnly(context.Background())) }()
		synctest.Wait()
		bus2.Stop()
		if err := <-done; !errors.Is(err, reconciler.ErrSubscriptionClosed) {
			t.Errorf("Start after bus.Stop = %v", err)
		}
	})
}

// shedTriggers counts the triggers a full buffer coalesced into a newer one.
func shedTriggers(bus *busevents.EventBus, subscriber string) uint64 {
	for _, s := range bus.Stats().Subscribers {
		if s.Name == subscriber {
			return s.Skipped[events.EventTypeReconciliationTriggered]
		}
	}
	return 0
}

func droppedTriggers(bus *busevents.EventBus, subscriber string) uint64 {
	for _, s := range bus.Stats().Subscribers {
		if s.Name == subscriber {
			return s.Dropped[events.EventTypeReconciliationTriggered]
		}
	}
	return 0
}
