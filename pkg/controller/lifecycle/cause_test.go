package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/controller/lifecycle"
)

// causeHarness runs a Manager with a grabber (leader-only) and an
// all-replica component that both hand out their context; with
// termContext, each term's source is a context the test ends with a cause.
type causeHarness struct {
	*harness
	runs, all chan context.Context
	srcs      chan context.CancelCauseFunc
}

func newCauseHarness(t *testing.T, opts lifecycle.Options, termContext bool, more ...lifecycle.Component) *causeHarness {
	c := &causeHarness{runs: make(chan context.Context, 8), all: make(chan context.Context, 1), srcs: make(chan context.CancelCauseFunc, 8)}
	if termContext {
		opts.TermContext = func(uint64) (context.Context, bool) {
			src, end := context.WithCancelCause(context.Background())
			c.srcs <- end
			return src, true
		}
	}
	c.harness = newHarness(t, opts, func(h *harness) {
		all := funcComponent{name: "all", fn: func(ctx context.Context) error { c.all <- ctx; <-ctx.Done(); return ctx.Err() }}
		for _, err := range []error{h.m.AddLeaderOnly(&ctxGrabber{got: c.runs}), h.m.AddAllReplica(all)} {
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, comp := range more {
			if err := h.m.AddLeaderOnly(comp); err != nil {
				t.Fatal(err)
			}
		}
	})
	return c
}

// checkCause fails unless context.Cause(ctx) is each of want and none of not.
func checkCause(t *testing.T, what string, ctx context.Context, want []error, not ...error) {
	t.Helper()
	cause := context.Cause(ctx)
	for _, w := range want {
		if !errors.Is(cause, w) {
			t.Errorf("%s: cause %v, want %v", what, cause, w)
		}
	}
	for _, n := range not {
		if errors.Is(cause, n) {
			t.Errorf("%s: cause %v is %v", what, cause, n)
		}
	}
}

// TestTermContextCause: the term's context ends with a cause that says why:
// leadership lost (by event, by a newer term, or by the end of the source,
// whose cause it wraps), or the manager stopped; the all-replica context
// ends with the manager's stop.
func TestTermContextCause(t *testing.T) {
	errSource := errors.New("source: lease taken")
	for _, tc := range []struct {
		name        string
		termContext bool
		end         func(c *causeHarness)
		want        []error
		not         error
		text        string // the cause's message contains it
	}{
		{"lost leadership event", false, func(c *causeHarness) { c.lose(1, "lease taken") },
			[]error{lifecycle.ErrLeadershipLost}, lifecycle.ErrManagerStopped, "lease taken"},
		{"newer term", false, func(c *causeHarness) { c.lead(2) },
			[]error{lifecycle.ErrLeadershipLost}, lifecycle.ErrManagerStopped, "superseded by term 2"},
		{"source ended", true, func(c *causeHarness) { (<-c.srcs)(errSource) },
			[]error{lifecycle.ErrLeadershipLost, errSource}, lifecycle.ErrManagerStopped, "source: lease taken"},
		{"manager stopped", false, func(c *causeHarness) { c.stop() },
			[]error{lifecycle.ErrManagerStopped}, lifecycle.ErrLeadershipLost, ""},
		{"manager stopped with a source", true, func(c *causeHarness) { c.stop() },
			[]error{lifecycle.ErrManagerStopped}, lifecycle.ErrLeadershipLost, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCauseHarness(t, lifecycle.Options{}, tc.termContext)
				c.lead(1)
				run := <-c.runs
				tc.end(c)
				<-run.Done()
				checkCause(t, "term 1", run, tc.want, tc.not)
				if cause := context.Cause(run); !strings.Contains(cause.Error(), tc.text) {
					t.Errorf("cause %q lacks %q", cause, tc.text)
				}
				c.stop()
				checkCause(t, "all-replica", <-c.all, []error{lifecycle.ErrManagerStopped})
			})
		})
	}
}

// TestStepDownCause: a term the Manager steps down from (a leader-only
// component failed in it) ends with ErrSteppedDown wrapping the reason,
// even when the step-down ends the source first; a refused step-down
// leaves the term running, and its later end is a lost leadership.
func TestStepDownCause(t *testing.T) {
	const grace = time.Second
	errResigned := errors.New("source: resigned")
	failing := funcComponent{name: "failing", fn: func(ctx context.Context) error {
		lifecycle.Subscribed(ctx)
		return errBoom
	}}
	for _, tc := range []struct {
		name        string
		termContext bool
		agree       bool
		want        []error
		not         error
	}{
		{"without a source", false, true, []error{lifecycle.ErrSteppedDown, lifecycle.ErrMissingComponent}, lifecycle.ErrLeadershipLost},
		{"source ended by the step-down", true, true, []error{lifecycle.ErrSteppedDown, lifecycle.ErrMissingComponent}, lifecycle.ErrLeadershipLost},
		{"refused", false, false, []error{lifecycle.ErrLeadershipLost}, lifecycle.ErrSteppedDown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var c *causeHarness
				asked := make(chan struct{}, 1)
				stepDown := func(term uint64, _ error) bool {
					asked <- struct{}{}
					if !tc.agree {
						return false
					}
					if tc.termContext {
						(<-c.srcs)(errResigned) // as the elector's Resign does, before it returns
					}
					c.lose(term, "resigned")
					return true
				}
				c = newCauseHarness(t, lifecycle.Options{StepDownGrace: grace, StepDown: stepDown}, tc.termContext, failing)
				c.lead(1)
				run := <-c.runs
				<-asked
				if !tc.agree {
					synctest.Wait()
					if run.Err() != nil {
						t.Fatalf("the term ended on a refused step-down: %v", context.Cause(run))
					}
					c.lose(1, "lease taken")
				}
				<-run.Done()
				checkCause(t, "term 1", run, tc.want, tc.not)
			})
		})
	}
}

// TestReturningTheCauseIsACleanStop: a component that returns its
// context's cause once the context ended stopped cleanly.
func TestReturningTheCauseIsACleanStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		returned := make(chan error, 1)
		cause := funcComponent{name: "cause", fn: func(ctx context.Context) error {
			lifecycle.Subscribed(ctx)
			<-ctx.Done()
			err := context.Cause(ctx)
			returned <- err
			return err
		}}
		c := newCauseHarness(t, lifecycle.Options{}, false, cause)
		c.lead(1)
		c.lose(1, "lease taken")
		c.awaitStopped(1)
		if err := <-returned; !errors.Is(err, lifecycle.ErrLeadershipLost) {
			t.Fatalf("returned %v, want the cause", err)
		}
		if s := c.m.Status(); s.Failures != 0 || mustStatus(t, s, "cause").State != lifecycle.StateStopped {
			t.Errorf("status %+v, want a clean stop", s)
		}
	})
}

// valueError is an error of a type == cannot compare (it holds a slice):
// the runtime must neither panic on it nor mistake two of them for one.
type valueError struct{ parts []string }

func (e valueError) Error() string { return strings.Join(e.parts, ", ") }

// TestCausesAcrossTerms: each term's context ends with the cause of its own
// end, whatever ended the terms before: a lost-leadership reason or a
// source's cause equal to the last term's may be reused, but a new one is
// never answered with the one before. Five terms per case, each ended as
// the case says.
func TestCausesAcrossTerms(t *testing.T) {
	errA, errB := errors.New("source: a"), errors.New("source: b")
	for _, tc := range []struct {
		name        string
		termContext bool
		// end ends term n; it returns what the cause's message must contain
		// and what its cause must wrap.
		end func(c *causeHarness, n uint64) (string, error)
	}{
		{"lost leadership reasons", false, func(c *causeHarness, n uint64) (string, error) {
			reason := []string{"lease taken", "lease taken", "renew failed", "lease taken", "renew failed"}[n-1]
			c.lose(n, reason)
			return reason, lifecycle.ErrLeadershipLost
		}},
		{"source causes", true, func(c *causeHarness, n uint64) (string, error) {
			err := []error{errA, errA, errB, errA, errB}[n-1]
			(<-c.srcs)(err)
			c.lose(n, "source ended")
			return err.Error(), err
		}},
		{"uncomparable source causes", true, func(c *causeHarness, n uint64) (string, error) {
			text := []string{"x", "x", "y", "y", "x"}[n-1]
			(<-c.srcs)(valueError{parts: []string{"source", text}})
			c.lose(n, "source ended")
			return "source, " + text, lifecycle.ErrLeadershipLost
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCauseHarness(t, lifecycle.Options{}, tc.termContext)
				for n := uint64(1); n <= 5; n++ {
					c.lead(n)
					run := <-c.runs
					text, want := tc.end(c, n)
					<-run.Done()
					what := fmt.Sprintf("term %d", n)
					checkCause(t, what, run, []error{lifecycle.ErrLeadershipLost, want})
					if cause := context.Cause(run); !strings.HasSuffix(cause.Error(), ": "+text) {
						t.Errorf("%s: cause %q, want it to end in %q", what, cause, text)
					}
					if rep := c.awaitStopped(n); !tc.termContext && rep.Reason != "lost leadership: "+text {
						t.Errorf("%s: stop reason %q, want %q", what, rep.Reason, "lost leadership: "+text)
					}
				}
			})
		})
	}
}
