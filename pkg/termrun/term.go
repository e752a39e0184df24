package termrun

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// Func is one run of a work: it does the work under ctx, the run's context, and
// returns soon after ctx ends.
type Func func(ctx context.Context) error

// Term is the leader-only work of one term; create it with Runner.Term. Its
// methods are safe for concurrent use.
type Term struct {
	r        *Runner
	ctx      context.Context
	term     termctx.Term
	stepDown func(reason error)
	// steppedDown is set by the first work to ask stepDown: once per term.
	steppedDown atomic.Bool
	// works counts the goroutines of Go, waited for by Wait.
	works sync.WaitGroup
}

// Go runs Run(name, fn) on a goroutine of its own; Wait waits for it.
func (t *Term) Go(name string, fn Func) {
	t.works.Go(func() { _ = t.Run(name, fn) })
}

// Wait returns once every work started by Go has returned.
func (t *Term) Wait() { t.works.Wait() }

// Run runs fn, the work called name, for the term until a run returns nil
// while the term lasts, or the term ends: it restarts a failed run after
// RestartDelay, gives the term up after StepDownGrace of failures in a row and
// reports a run that overstays the term's end (see the package doc). It
// returns once the last run returned: nil for a clean end, or the last run's
// error when it failed as the term ended.
func (t *Term) Run(name string, fn Func) error { return t.run(name, fn, true) }

// Once runs fn, the work called name, once, as Run would, without a restart:
// a failure is reported, and returned. It is for work that must not run
// twice, such as a process's all-replica components, under Run's overstay
// rule.
func (t *Term) Once(name string, fn Func) error { return t.run(name, fn, false) }

func (t *Term) run(name string, fn Func, restart bool) error {
	returned := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() { t.watchOverstay(name, returned) })
	defer watcher.Wait()
	defer close(returned)

	var streak time.Time // when the failures in a row began; zero without
	for {
		start := time.Now()
		panicked, err := t.once(name, fn)
		ended := t.ctx.Err() != nil
		switch {
		case ended && CleanEnd(t.ctx, err):
			return nil
		case ended || !restart && err != nil:
			t.r.observe(Event{Kind: Failed, Work: name, Term: t.term, Err: err, Panicked: panicked})
			return err
		case err == nil:
			return nil // done for this term
		}
		t.r.observe(Event{Kind: Failed, Work: name, Term: t.term, Err: err, Panicked: panicked, Restart: true})
		now := time.Now()
		if streak.IsZero() || now.Sub(start) >= t.r.config.StepDownGrace {
			streak = now
		} else if now.Sub(streak) >= t.r.config.StepDownGrace {
			t.giveUp(name, now.Sub(streak))
		}
		if !t.sleep(t.r.config.RestartDelay) {
			return nil
		}
	}
}

// once runs fn once under a context of its own (Call); panicked is true for a
// panic and for an error wrapping ErrPanicked.
func (t *Term) once(name string, fn Func) (panicked bool, err error) {
	t.r.count(name, func(c *counters) { c.started.Add(1); c.running.Add(1) })
	defer t.r.count(name, func(c *counters) { c.running.Add(-1) })
	ctx, cancel := newRunContext(t.ctx)
	defer cancel(ErrRunEnded)
	err = Call(ctx, fn)
	return errors.Is(err, ErrPanicked), err
}

// Call returns fn(ctx), or for a panic an error wrapping ErrPanicked with the
// panic's value and stack.
func Call(ctx context.Context, fn Func) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v\n%s", ErrPanicked, p, debug.Stack())
		}
	}()
	return fn(ctx)
}

// CleanEnd reports whether err, returned by a run under ctx, is the normal end
// of the run: ctx ended, and err is nil, a context error or ctx's cause.
func CleanEnd(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Cause(ctx)))
}

// giveUp asks the step-down function to give the term up, once per term; a
// work failing for so long is named in the reason.
func (t *Term) giveUp(name string, failingFor time.Duration) {
	if t.stepDown == nil || !t.steppedDown.CompareAndSwap(false, true) {
		return
	}
	reason := fmt.Errorf("%w: %s has failed in a row for %s", ErrFailing, name, failingFor)
	t.r.observe(Event{Kind: SteppedDown, Work: name, Term: t.term, Err: reason})
	t.stepDown(reason)
}

// sleep waits d, and reports false if the term ended first.
func (t *Term) sleep(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.ctx.Done():
		return false
	case <-timer.C:
		return t.ctx.Err() == nil
	}
}

// watchOverstay reports the work once if it has not returned OverstayAfter
// after the term ended; returned is closed when Run returns.
func (t *Term) watchOverstay(name string, returned <-chan struct{}) {
	select {
	case <-returned:
		return
	case <-t.ctx.Done():
	}
	after := t.r.config.OverstayAfter
	timer := time.NewTimer(after)
	defer timer.Stop()
	select {
	case <-returned:
	case <-timer.C:
		t.r.observe(Event{Kind: Overstayed, Work: name, Term: t.term, Waited: after})
	}
}

// newRunContext is the context of one run: it ends when the run returns (cancel),
// and with the term, whose end it asks for first (termctx.Follow: a term's context
// may report its end in Err by a clock of its own before anything cancelled it).
func newRunContext(term context.Context) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(term)
	return termctx.Follow(ctx, term, func() { cancel(context.Cause(term)) }), cancel
}
