package termrun_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-dev/baton/pkg/termctx"
	"github.com/baton-dev/baton/pkg/termrun"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder keeps the Events of a Runner and the step-downs of its Terms.
type recorder struct {
	mu        sync.Mutex
	events    []termrun.Event
	at        []time.Time
	stepDowns []error
}

func (r *recorder) observe(ev termrun.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
	r.at = append(r.at, time.Now())
}

func (r *recorder) stepDown(reason error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stepDowns = append(r.stepDowns, reason)
}

// of returns the events of kind k and when each came.
func (r *recorder) of(k termrun.Kind) ([]termrun.Event, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var evs []termrun.Event
	var at []time.Time
	for i, ev := range r.events {
		if ev.Kind == k {
			evs = append(evs, ev)
			at = append(at, r.at[i])
		}
	}
	return evs, at
}

func (r *recorder) steps() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.stepDowns...)
}

func newRunner(t *testing.T, config termrun.Config, rec *recorder) *termrun.Runner {
	t.Helper()
	config.Observe = rec.observe
	r, err := termrun.New(config)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var term7 = termctx.Term{Lease: termctx.Lease{Namespace: "ns", Name: "ring-shard-3"}, Shard: 3, Shards: 8, Number: 7}

// TestRestartAfterAnErrorAndAPanic: a work that fails by an error, then by a
// panic, runs again RestartDelay after each failure, under the same term, and
// ends when a run returns nil; each failure is one Failed event with Restart set.
func TestRestartAfterAnErrorAndAPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 3 * time.Second
		rec := &recorder{}
		r := newRunner(t, termrun.Config{RestartDelay: delay}, rec)
		ctx, cancel := context.WithCancel(termctx.With(context.Background(), term7))
		defer cancel()
		var starts []time.Time
		var terms []termctx.Term
		err := r.Term(ctx, rec.stepDown).Run("w", func(ctx context.Context) error {
			starts = append(starts, time.Now())
			tm, _ := termctx.Get(ctx)
			terms = append(terms, tm)
			switch len(starts) {
			case 1:
				return errors.New("transient")
			case 2:
				panic("boom")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run = %v, want nil after a run returned nil", err)
		}
		if len(starts) != 3 || starts[1].Sub(starts[0]) != delay || starts[2].Sub(starts[1]) != delay {
			t.Fatalf("runs at %v, want 3 runs %v apart", starts, delay)
		}
		for _, tm := range terms {
			if tm != term7 {
				t.Errorf("a run's context carries %+v, want %+v", tm, term7)
			}
		}
		failed, _ := rec.of(termrun.Failed)
		if len(failed) != 2 || failed[0].Panicked || !failed[1].Panicked || !errors.Is(failed[1].Err, termrun.ErrPanicked) ||
			!strings.Contains(failed[1].Err.Error(), "boom") || !failed[0].Restart || !failed[1].Restart ||
			failed[0].Work != "w" || failed[0].Term != term7 {
			t.Fatalf("failures %+v, want an error then a panic, both restarted", failed)
		}
		if st := r.Stats(); st.Started != 3 || st.Failed != 2 || st.Panicked != 1 || st.Running != 0 || st.StepDowns != 0 {
			t.Errorf("stats %+v", st)
		}
		if len(rec.steps()) != 0 {
			t.Errorf("stepped down after two failures in %v", 2*delay)
		}
	})
}

// TestStepDownAfterGrace: a work that fails at once every run asks to give
// the term up at the first failure StepDownGrace after the first, once, and
// goes on restarting until the term ends.
func TestStepDownAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay, grace = time.Second, 10 * time.Second
		rec := &recorder{}
		r := newRunner(t, termrun.Config{RestartDelay: delay, StepDownGrace: grace}, rec)
		ctx, cancel := context.WithCancel(termctx.With(context.Background(), term7))
		done := make(chan error)
		begin := time.Now()
		go func() {
			done <- r.Term(ctx, rec.stepDown).Run("crashy", func(context.Context) error { return errors.New("no") })
		}()
		time.Sleep(grace - time.Millisecond)
		synctest.Wait()
		if len(rec.steps()) != 0 {
			t.Fatalf("stepped down before the grace")
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		steps := rec.steps()
		if len(steps) != 1 || !errors.Is(steps[0], termrun.ErrFailing) || !strings.Contains(steps[0].Error(), "crashy") {
			t.Fatalf("step-downs %v, want one naming the work", steps)
		}
		evs, at := rec.of(termrun.SteppedDown)
		if len(evs) != 1 || at[0].Sub(begin) != grace {
			t.Fatalf("SteppedDown events %+v at %v, want one at +%v", evs, at, grace)
		}
		time.Sleep(5*grace + delay/2) // between two runs
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if n := len(rec.steps()); n != 1 {
			t.Errorf("%d step-downs in one term, want 1", n)
		}
		if st := r.Stats(); st.StepDowns != 1 || st.Failed != 61 || st.Started != 61 {
			t.Errorf("stats %+v, want 61 runs failed, 1 step-down", st)
		}
	})
}

// TestARunThatLastsTheGraceEndsTheStreak: failures far apart never give the
// term up; nor does a nil step-down.
func TestARunThatLastsTheGraceEndsTheStreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const grace = 10 * time.Second
		rec := &recorder{}
		r := newRunner(t, termrun.Config{StepDownGrace: grace}, rec)
		ctx, cancel := context.WithCancel(termctx.With(context.Background(), term7))
		var wg sync.WaitGroup
		term := r.Term(ctx, rec.stepDown)
		wg.Go(func() {
			_ = term.Run("slow-fail", func(context.Context) error {
				time.Sleep(grace)
				return errors.New("after a while")
			})
		})
		wg.Go(func() {
			_ = r.Term(ctx, nil).Run("crashy", func(context.Context) error { return errors.New("no") })
		})
		time.Sleep(10 * grace)
		cancel()
		wg.Wait()
		if steps := rec.steps(); len(steps) != 0 {
			t.Errorf("step-downs %v, want none", steps)
		}
		if st := r.Stats(); st.StepDowns != 0 {
			t.Errorf("stats %+v, want no step-down", st)
		}
	})
}

// TestOverstayReportedOnce: a run that returns 15s after its term ended is
// reported once, OverstayAfter after the end, and Run waits for it; a run
// that returns at once is not reported.
func TestOverstayReportedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const after, lag = 4 * time.Second, 15 * time.Second
		rec := &recorder{}
		var logs strings.Builder
		var logMu sync.Mutex
		r := newRunner(t, termrun.Config{OverstayAfter: after, Logger: slog.New(slog.NewTextHandler(lockedWriter{&logMu, &logs}, nil))}, rec)
		ctx, cancel := context.WithCancel(termctx.With(context.Background(), term7))
		term := r.Term(ctx, nil)
		term.Go("slow", func(ctx context.Context) error {
			<-ctx.Done()
			time.Sleep(lag)
			return nil
		})
		term.Go("quick", func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		time.Sleep(time.Second)
		end := time.Now()
		cancel()
		term.Wait()
		if took := time.Since(end); took != lag {
			t.Errorf("Wait returned %v after the end, want %v (the slow work)", took, lag)
		}
		evs, at := rec.of(termrun.Overstayed)
		if len(evs) != 1 || evs[0].Work != "slow" || evs[0].Waited != after || at[0].Sub(end) != after {
			t.Fatalf("overstays %+v at %v, want slow's once at +%v", evs, at, after)
		}
		if st := r.Stats(); st.Overstays != 1 || st.Failed != 0 || st.Running != 0 {
			t.Errorf("stats %+v", st)
		}
		if ws := r.WorkStats(); len(ws) != 2 || ws["slow"].Overstays != 1 || ws["slow"].Started != 1 ||
			ws["quick"].Overstays != 0 || ws["quick"].Started != 1 {
			t.Errorf("stats by work %+v, want slow's overstay counted, quick's not", ws)
		}
		logMu.Lock()
		defer logMu.Unlock()
		if n := strings.Count(logs.String(), "has not returned since its term ended"); n != 1 ||
			!strings.Contains(logs.String(), "work=slow shard=3 term=7") {
			t.Errorf("%d overstay lines in %q, want 1 naming work, shard and term", n, logs.String())
		}
	})
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *strings.Builder
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestEndOfTerm: once the term ended, nil, a context error and the term's cause
// are a clean end; any other error is a failure, not restarted, and Run returns
// it.
func TestEndOfTerm(t *testing.T) {
	cause := errors.New("lease lost")
	for _, tc := range []struct {
		name   string
		ret    func(ctx context.Context) error
		failed bool
	}{
		{"nil", func(context.Context) error { return nil }, false},
		{"wrapped ctx.Err", func(ctx context.Context) error { return fmt.Errorf("stopping: %w", ctx.Err()) }, false},
		{"cause", func(ctx context.Context) error { return context.Cause(ctx) }, false},
		{"deadline", func(context.Context) error { return context.DeadlineExceeded }, false},
		{"other", func(context.Context) error { return errors.New("flush failed") }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rec := &recorder{}
				r := newRunner(t, termrun.Config{}, rec)
				ctx, cancel := context.WithCancelCause(termctx.With(context.Background(), term7))
				var gotCause error
				done := make(chan error)
				go func() {
					done <- r.Term(ctx, nil).Run("w", func(ctx context.Context) error {
						<-ctx.Done()
						gotCause = context.Cause(ctx)
						return tc.ret(ctx)
					})
				}()
				synctest.Wait()
				cancel(cause)
				err := <-done
				if !errors.Is(gotCause, cause) {
					t.Errorf("the run's context has cause %v, want the term's %v", gotCause, cause)
				}
				failed, _ := rec.of(termrun.Failed)
				if tc.failed != (err != nil) || tc.failed != (len(failed) == 1) || len(failed) > 1 {
					t.Fatalf("Run = %v, failures %+v; want failed %v", err, failed, tc.failed)
				}
				if tc.failed && failed[0].Restart {
					t.Errorf("a failure at the end of the term is marked for restart")
				}
				if st := r.Stats(); st.Started != 1 {
					t.Errorf("%d runs, want 1", st.Started)
				}
			})
		})
	}
}

// clockContext is a term context that reports its end by a clock of its own
// before anything cancelled it, as an elector's term context does.
type clockContext struct {
	context.Context
	cancel   context.CancelCauseFunc
	deadline time.Time
}

var errDeadline = errors.New("renew deadline missed")

func (c *clockContext) check() {
	if !time.Now().Before(c.deadline) {
		c.cancel(errDeadline)
	}
}
func (c *clockContext) Err() error            { c.check(); return c.Context.Err() }
func (c *clockContext) Done() <-chan struct{} { c.check(); return c.Context.Done() }

// TestRunContextSeesTheTermsClock: a run's context reports the term over as
// soon as the term's context does by its own clock, with the term's cause, and
// ends when the run returns.
func TestRunContextSeesTheTermsClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner, cancel := context.WithCancelCause(termctx.With(context.Background(), term7))
		defer cancel(nil)
		term := &clockContext{Context: inner, cancel: cancel, deadline: time.Now().Add(time.Hour)}
		r := newRunner(t, termrun.Config{}, &recorder{})
		var runCtx context.Context
		err := r.Term(term, nil).Run("w", func(ctx context.Context) error {
			runCtx = ctx
			time.Sleep(time.Hour) // no timer ends the term: only its clock says so
			if ctx.Err() == nil || !errors.Is(context.Cause(ctx), errDeadline) {
				return fmt.Errorf("run context: Err %v, cause %v past the term's deadline", ctx.Err(), context.Cause(ctx))
			}
			select {
			case <-ctx.Done():
			default:
				return errors.New("Err set while Done is open")
			}
			return ctx.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(context.Cause(runCtx), errDeadline) {
			t.Errorf("cause after the run %v", context.Cause(runCtx))
		}
	})
}

// TestAFailedRunsContextEnds: what a failed run left under its context ends
// with the run, not with the term.
func TestAFailedRunsContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRunner(t, termrun.Config{}, &recorder{})
		ctx, cancel := context.WithCancel(termctx.With(context.Background(), term7))
		defer cancel()
		var first context.Context
		err := r.Term(ctx, nil).Run("w", func(ctx context.Context) error {
			if first == nil {
				first = ctx
				return errors.New("fail once")
			}
			return nil
		})
		if err != nil || first.Err() == nil || !errors.Is(context.Cause(first), termrun.ErrRunEnded) || ctx.Err() != nil {
			t.Fatalf("Run %v; the failed run's context: %v (cause %v); the term's: %v", err, first.Err(), context.Cause(first), ctx.Err())
		}
	})
}

// TestNewRefusesBadConfig: each negative duration is named.
func TestNewRefusesBadConfig(t *testing.T) {
	_, err := termrun.New(termrun.Config{RestartDelay: -1, StepDownGrace: -time.Second, OverstayAfter: -time.Minute})
	if !errors.Is(err, termrun.ErrInvalidConfig) {
		t.Fatalf("error %v, want ErrInvalidConfig", err)
	}
	for _, want := range []string{"RestartDelay: -1ns is negative", "StepDownGrace: -1s is negative", "OverstayAfter: -1m0s is negative"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if _, err := termrun.New(termrun.Config{}); err != nil {
		t.Errorf("zero config: %v", err)
	}
}

// TestOnceDoesNotRestart: Once reports a failure while the term lasts and
// returns it, without a second run; a panic is a failure too.
func TestOnceDoesNotRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		r := newRunner(t, termrun.Config{}, rec)
		ctx, cancel := context.WithCancel(termctx.With(context.Background(), term7))
		defer cancel()
		term := r.Term(ctx, rec.stepDown)
		boom := errors.New("boom")
		if err := term.Once("err", func(context.Context) error { return boom }); !errors.Is(err, boom) {
			t.Errorf("Once = %v, want the run's error", err)
		}
		if err := term.Once("panic", func(context.Context) error { panic("p") }); !errors.Is(err, termrun.ErrPanicked) {
			t.Errorf("Once = %v, want ErrPanicked", err)
		}
		time.Sleep(time.Minute)
		failed, _ := rec.of(termrun.Failed)
		if len(failed) != 2 || failed[0].Restart || failed[1].Restart || !failed[1].Panicked {
			t.Errorf("failures %+v, want two, not restarted", failed)
		}
		if st := r.Stats(); st.Started != 2 || st.Failed != 2 || st.Panicked != 1 {
			t.Errorf("stats %+v, want 2 runs, both failed", st)
		}
	})
}
