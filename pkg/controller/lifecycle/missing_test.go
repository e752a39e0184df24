package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/events"
	"github.com/baton-dev/baton/pkg/controller/lifecycle"
)

// stepDowns records the Manager's calls of Options.StepDown and, like the
// elector would, ends the term with a LostLeadershipEvent.
type stepDowns struct {
	h     *harness
	mu    sync.Mutex
	terms []uint64
	errs  []error
	at    []time.Time
}

func (s *stepDowns) stepDown(term uint64, reason error) bool {
	s.mu.Lock()
	s.terms = append(s.terms, term)
	s.errs = append(s.errs, reason)
	s.at = append(s.at, time.Now())
	s.mu.Unlock()
	s.h.lose(term, "resigned")
	return true
}

func (s *stepDowns) calls() ([]uint64, []error, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint64(nil), s.terms...), append([]error(nil), s.errs...), append([]time.Time(nil), s.at...)
}

// TestStuckLeaderOnlyComponentMakesLeaderUnhealthy is the regression test
// of a leader-only component that overstays its term: the next term it is
// missing from must make the leader unhealthy (it used to report nil).
func TestStuckLeaderOnlyComponentMakesLeaderUnhealthy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var stuck *holder
		h := newHarness(t, lifecycle.Options{StopTimeout: time.Second}, func(h *harness) {
			stuck = newHolder(h.bus, "stuck", events.EventTypeConfigValidated)
			stuck.required = nil
			stuck.stopDelay = time.Hour
			if err := h.m.AddLeaderOnly(stuck); err != nil {
				t.Fatal(err)
			}
		})
		h.lead(1)
		h.awaitReady(1)
		h.lose(1, "test")
		h.awaitStopped(1)
		if err := h.m.Status().Healthy(); err != nil {
			t.Errorf("a follower with an overstaying leader-only component reports %v", err)
		}
		h.lead(2)
		synctest.Wait()
		if f := h.m.Status().Failures; f != 0 {
			t.Fatalf("%d failures; the component must be stuck, not failed", f)
		}
		err := h.m.Status().Healthy()
		if !errors.Is(err, lifecycle.ErrComponentFailed) || !strings.Contains(err.Error(), "stuck: still running from term 1, missing from term 2") {
			t.Fatalf("Healthy() = %v while leading term 2 without stuck", err)
		}
	})
}

// TestMissingComponentStepsDownAfterGrace: a term that misses a
// leader-only component (stuck from an earlier term, or panicked in this
// one) is reported at once (status, log, counters) and, after
// StepDownGrace, the Manager asks to step down, once per term; with
// no StepDown it never does; a component that comes back in time clears it.
func TestMissingComponentStepsDownAfterGrace(t *testing.T) {
	const grace = 3 * time.Second
	t.Run("stuck", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sd := &stepDowns{}
			var stuck *holder
			h := newHarness(t, lifecycle.Options{StopTimeout: time.Second, StepDownGrace: grace, StepDown: sd.stepDown}, func(h *harness) {
				stuck = newHolder(h.bus, "stuck", events.EventTypeConfigValidated)
				stuck.required = nil
				stuck.stopDelay = time.Hour
				if err := h.m.AddLeaderOnly(stuck); err != nil {
					t.Fatal(err)
				}
			})
			sd.h = h
			h.lead(1)
			h.awaitReady(1)
			h.lose(1, "test")
			h.awaitStopped(1)
			h.lead(2)
			start := time.Now()
			synctest.Wait()
			s := h.m.Status()
			if len(s.Missing) != 1 || s.Missing[0] != "stuck" || !s.MissingSince.Equal(start) || s.MissingTerms != 1 || s.SteppingDown || s.Failures != 0 {
				t.Fatalf("status %+v, want stuck missing since the term began", s)
			}
			if h.logs.count("ERROR leading without a leader-only component", "term=2", "stuck (still running from term 1)") != 1 {
				t.Errorf("missing component not logged: %q", h.logs.lines)
			}
			time.Sleep(grace - time.Millisecond)
			synctest.Wait()
			if terms, _, _ := sd.calls(); len(terms) != 0 {
				t.Fatalf("stepped down before the grace: %v", terms)
			}
			h.awaitStopped(2)
			terms, errs, at := sd.calls()
			if len(terms) != 1 || terms[0] != 2 || at[0].Sub(start) != grace {
				t.Fatalf("step-downs %v at %v, want term 2 after %v", terms, at, grace)
			}
			if !errors.Is(errs[0], lifecycle.ErrMissingComponent) || !strings.Contains(errs[0].Error(), "stuck") {
				t.Errorf("reason %v", errs[0])
			}
			if s := h.m.Status(); s.StepDowns != 1 || s.Leading || len(s.Missing) != 0 {
				t.Errorf("after the step-down: %+v", s)
			}
			if h.logs.count("ERROR stepping down so that another replica leads", "term=2") != 1 {
				t.Errorf("step-down not logged")
			}
		})
	})
	t.Run("panicked", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sd := &stepDowns{}
			h := newHarness(t, lifecycle.Options{StepDownGrace: grace, StepDown: sd.stepDown}, func(h *harness) {
				if err := h.m.AddLeaderOnly(panicking{}); err != nil {
					t.Fatal(err)
				}
			})
			sd.h = h
			h.lead(1)
			synctest.Wait()
			s := h.m.Status()
			cs := mustStatus(t, s, "panicking")
			if !cs.Missing || cs.Panics != 1 || s.Panics != 1 || !errors.Is(s.Healthy(), lifecycle.ErrComponentFailed) {
				t.Fatalf("status %+v, component %+v: want the panicked component missing and counted", s, cs)
			}
			h.awaitStopped(1)
			if terms, _, _ := sd.calls(); len(terms) != 1 || terms[0] != 1 {
				t.Fatalf("step-downs %v, want term 1", terms)
			}
		})
	})
	t.Run("no step-down", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sd := &stepDowns{}
			h := newHarness(t, lifecycle.Options{StepDownGrace: grace}, func(h *harness) {
				if err := h.m.AddLeaderOnly(panicking{}); err != nil {
					t.Fatal(err)
				}
			})
			sd.h = h
			h.lead(1)
			time.Sleep(10 * grace)
			synctest.Wait()
			if terms, _, _ := sd.calls(); len(terms) != 0 {
				t.Fatalf("stepped down without StepDown: %v", terms)
			}
			if s := h.m.Status(); !s.Leading || s.Healthy() == nil || s.StepDowns != 0 {
				t.Errorf("status %+v", s)
			}
		})
	})
	t.Run("back in time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			sd := &stepDowns{}
			var slow *holder
			h := newHarness(t, lifecycle.Options{StopTimeout: time.Second, StepDownGrace: grace, StepDown: sd.stepDown}, func(h *harness) {
				slow = newHolder(h.bus, "slow", events.EventTypeConfigValidated)
				slow.required = nil
				slow.stopDelay = 2 * time.Second // returns 1s into term 2
				if err := h.m.AddLeaderOnly(slow); err != nil {
					t.Fatal(err)
				}
			})
			sd.h = h
			h.lead(1)
			h.awaitReady(1)
			h.lose(1, "test")
			h.awaitStopped(1)
			h.lead(2)
			h.awaitReady(2)
			time.Sleep(2 * grace)
			synctest.Wait()
			if terms, _, _ := sd.calls(); len(terms) != 0 {
				t.Fatalf("stepped down although the component came back: %v", terms)
			}
			s := h.m.Status()
			if len(s.Missing) != 0 || !s.MissingSince.IsZero() || s.Healthy() != nil || s.MissingTerms != 1 || s.Failures != 0 {
				t.Errorf("status %+v", s)
			}
			if h.logs.count("term no longer misses a leader-only component", "term=2") != 1 {
				t.Error("recovery not logged")
			}
		})
	})
}

// panicking is a leader-only component that panics at once.
type panicking struct{}

func (panicking) Name() string                { return "panicking" }
func (panicking) Start(context.Context) error { panic("kaboom") }
