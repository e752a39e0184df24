package lifecycle_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/config"
	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
	busevents "github.com/baton-dev/baton/pkg/events"
	"github.com/baton-dev/baton/pkg/termrun"
)

// TestFailedLeaderOnlyComponentRestartsInItsTerm: a leader-only component
// that fails once is missing from its term (unhealthy) until RestartDelay
// later, when it runs again in the same term, subscribes again, gets the
// replay once more and makes the term ready and healthy; its failed run's
// context ended with the run.
func TestFailedLeaderOnlyComponentRestartsInItsTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 2 * time.Second
		var flaky *holder
		var calls atomic.Int32
		h := newHarness(t, lifecycle.Options{RestartDelay: delay}, func(h *harness) {
			cfgR := leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			flaky = newHolder(h.bus, "flaky", events.EventTypeConfigValidated)
			flaky.fail = func(uint64) error {
				if calls.Add(1) == 1 {
					return errBoom
				}
				return nil
			}
			ev := events.NewConfigValidatedEvent(&config.Config{}, "v1", "test")
			cfgR.Cache(ev)
			for _, err := range []error{h.m.AddLeaderOnly(flaky), h.m.AddReplayer("config", cfgR)} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		h.lead(1)
		synctest.Wait()
		s := h.m.Status()
		cs := mustStatus(t, s, "flaky")
		if cs.State != lifecycle.StateFailed || cs.Starts != 1 || cs.Failures != 1 || !cs.Missing || s.TermReady ||
			!errors.Is(s.Healthy(), lifecycle.ErrComponentFailed) {
			t.Fatalf("after the failure: %+v, component %+v; want failed, missing, unhealthy, not ready", s, cs)
		}
		if fe := lifeEvents[*events.ComponentFailedEvent](h); len(fe) != 1 || !fe[0].LeaderOnly || fe[0].Term != 1 || !errors.Is(fe[0].Err, errBoom) {
			t.Errorf("ComponentFailedEvents %+v", fe)
		}
		failedAt := time.Now()
		rep := h.awaitReady(1)
		if rep.Ready.Sub(failedAt) != delay {
			t.Errorf("ready %v after the failure, want the restart delay %v", rep.Ready.Sub(failedAt), delay)
		}
		synctest.Wait()
		s = h.m.Status()
		cs = mustStatus(t, s, "flaky")
		if cs.State != lifecycle.StateRunning || cs.Starts != 2 || cs.Term != 1 || cs.Missing || s.Healthy() != nil || !s.TermReady ||
			len(cs.HeldState) != 1 {
			t.Errorf("after the restart: %+v, component %+v; want running again in term 1, healthy and ready", s, cs)
		}
		if v := flaky.lastConfig(1); v != "v1" {
			t.Errorf("the restarted run holds %q, want the replayed v1", v)
		}
		flaky.mu.Lock()
		first := flaky.ctxs[0]
		flaky.mu.Unlock()
		if first.Err() == nil || !errors.Is(context.Cause(first), termrun.ErrRunEnded) {
			t.Errorf("the failed run's context: %v (cause %v), want ended with the run", first.Err(), context.Cause(first))
		}
	})
}

// TestCrashLoopingComponentStepsDown: a leader-only component that fails at
// every run makes the Manager step down StepDownGrace after its first
// failure (pkg/termrun's rule), with a reason naming it that wraps
// ErrMissingComponent and termrun.ErrFailing.
func TestCrashLoopingComponentStepsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 4 * time.Second
		sd := &stepDowns{}
		h := newHarness(t, lifecycle.Options{StepDownGrace: grace, StepDown: sd.stepDown}, func(h *harness) {
			c := newHolder(h.bus, "crashy", events.EventTypeConfigValidated)
			c.required = nil
			c.fail = func(uint64) error { return errBoom }
			if err := h.m.AddLeaderOnly(c); err != nil {
				t.Fatal(err)
			}
		})
		sd.h = h
		h.lead(1)
		start := time.Now()
		h.awaitStopped(1)
		terms, errs, at := sd.calls()
		if len(terms) != 1 || terms[0] != 1 || at[0].Sub(start) != grace {
			t.Fatalf("step-downs %v at %v, want term 1 after %v", terms, at, grace)
		}
		if !errors.Is(errs[0], lifecycle.ErrMissingComponent) || !errors.Is(errs[0], termrun.ErrFailing) {
			t.Errorf("reason %v", errs[0])
		}
		if cs := mustStatus(t, h.m.Status(), "crashy"); cs.Starts != 5 || cs.Failures != 5 {
			t.Errorf("crashy %+v, want 5 runs in 4s, each failed", cs)
		}
		if s := h.m.Status(); s.StepDowns != 1 {
			t.Errorf("status %+v", s)
		}
	})
}

// heldThenFails holds its state, then fails in its first run; later runs
// hold and keep running.
type heldThenFails struct {
	bus  *busevents.EventBus
	runs atomic.Int32
}

func (c *heldThenFails) Name() string            { return "fickle" }
func (c *heldThenFails) RequiredState() []string { return []string{events.EventTypeConfigValidated} }

func (c *heldThenFails) Start(ctx context.Context) error {
	run := c.runs.Add(1)
	ch := busevents.Subscribe[*events.ConfigValidatedEvent](ctx, c.bus, "fickle", 4)
	lifecycle.Subscribed(ctx)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-ch:
			if !ok {
				<-ctx.Done()
				return ctx.Err()
			}
			lifecycle.HoldsState(ctx, ev.EventType())
			if run == 1 {
				return errBoom
			}
		}
	}
}

// TestAComponentDownDoesNotHoldItsState: a component that held its state and
// then failed does not make the term ready while it waits for its restart;
// the term is ready once the restarted run holds the state again.
func TestAComponentDownDoesNotHoldItsState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay, late = 5 * time.Second, 1500 * time.Millisecond
		var cfgR *leadership.StateReplayer[*events.ConfigValidatedEvent]
		h := newHarness(t, lifecycle.Options{RestartDelay: delay}, func(h *harness) {
			cfgR = leadership.NewStateReplayer[*events.ConfigValidatedEvent](h.bus)
			slow := newHolder(h.bus, "slow", events.EventTypeConfigValidated)
			slow.subscribeDelay = func(uint64) time.Duration { return late }
			for _, err := range []error{
				h.m.AddLeaderOnly(&heldThenFails{bus: h.bus}), h.m.AddLeaderOnly(slow), h.m.AddReplayer("config", cfgR),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		})
		h.lead(1)
		start := time.Now()
		time.Sleep(100 * time.Millisecond)
		cfgR.Publish(events.NewConfigValidatedEvent(&config.Config{}, "v1", "test")) // fickle holds it, and fails
		rep := h.awaitReady(1)
		if want := 100*time.Millisecond + delay; rep.Ready.Sub(start) != want {
			t.Errorf("term ready at +%v, want +%v: when fickle's restart held the state again, not while it was down", rep.Ready.Sub(start), want)
		}
	})
}

// TestAllReplicaComponentOverstaysRun: an all-replica component that ignores
// the end of Run is reported once, StopTimeout after Run's context ended, by
// the same overstay rule as a leader-only one (pkg/termrun); Run returns
// then, and Done waits for the component. It is never started again.
func TestAllReplicaComponentOverstaysRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const stop, lag = time.Second, 10 * time.Second
		stubborn := funcComponent{name: "stubborn", fn: func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(lag)
			return ctx.Err()
		}}
		h := newHarness(t, lifecycle.Options{StopTimeout: stop}, func(h *harness) {
			if err := h.m.AddAllReplica(stubborn); err != nil {
				t.Fatal(err)
			}
		})
		synctest.Wait()
		end := time.Now()
		h.cancel()
		h.cancel = nil
		if err := <-h.runErr; err != nil || time.Since(end) != stop {
			t.Fatalf("Run returned %v after %v, want nil after StopTimeout %v", err, time.Since(end), stop)
		}
		synctest.Wait() // the test's subscriber has read what was published
		cs := mustStatus(t, h.m.Status(), "stubborn")
		if cs.State != lifecycle.StateOverstaying || cs.Overstays != 1 || cs.Starts != 1 || cs.Failures != 0 {
			t.Errorf("stubborn %+v, want overstaying once, never failed", cs)
		}
		if ov := lifeEvents[*events.ComponentOverstayedEvent](h); len(ov) != 1 || ov[0].Component != "stubborn" || ov[0].Term != 0 ||
			ov[0].Phase != events.OverstayStop || ov[0].Waited != stop {
			t.Errorf("overstay events %+v", ov)
		}
		<-h.m.Done()
		if time.Since(end) != lag {
			t.Errorf("Done after %v, want when stubborn returned (%v)", time.Since(end), lag)
		}
		if cs := mustStatus(t, h.m.Status(), "stubborn"); cs.State != lifecycle.StateStopped {
			t.Errorf("stubborn %+v after it returned", cs)
		}
		h.bus.Stop()
	})
}
