package leaderelection

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// TermFromContext returns the term of the leadership ctx belongs to: ctx is the context
// given to OnStartedLeading or one derived from it. ok is false for other contexts.
// It also checks the term's renew deadline by the local clock: once it returned, Err of
// ctx reports the term over if the deadline has passed, also when ctx is a context
// derived from the term context (whose own Err does not look at the clock), so leader
// work that calls it before acting never acts on a term that is over. It is
// termctx.FromContext, the one term accessor of the core (the term context carries its
// term as a termctx.Carrier; the lookup ends in its Value, which checks the clock).
func TermFromContext(ctx context.Context) (term uint64, ok bool) {
	return termctx.FromContext(ctx)
}

// termContext is the context of one term. It ends when the elector steps down or when
// the parent ends, and by its own check of the local monotonic clock: as soon as
// renewDeadline has passed since the send time of the last successful renew, Err and
// Done report it ended, even if no goroutine has yet run to cancel it (a process resumed
// after SIGSTOP sees its term over at once). A timer (the campaign's termTimer) cancels
// it at that moment too, so contexts derived from it end as well.
//
// The embedded context is a cancel-cause context, so context.Cause gives the reason
// (ErrRenewDeadlineMissed, ErrLeaseLost, or the parent's cause) once Err is non-nil, and
// derived contexts attach to it directly. The term itself is carried by the term context
// (it is its own termctx.Carrier), so a term costs the struct, the cancel-cause context
// and its Done channel, and no wrapping context or timer of its own.
type termContext struct {
	context.Context
	cancel        context.CancelCauseFunc
	term          atomic.Uint64    // 0 while pending: the acquiring write under way
	renewDeadline time.Duration    // 0: no clock check (election disabled)
	origin        time.Time        // monotonic reference for renewed
	now           func() time.Time // the clock read by the check
	timer         *termTimer       // nil when renewDeadline is 0

	// renewed is the send time of the last successful renew, in nanoseconds since origin.
	renewed atomic.Int64
}

// newTermContext starts a term under parent whose first write was sent at start, on a
// timer of its own. renewDeadline 0 disables the clock check. For a single term (leading
// alone) and tests; a campaign times its terms with one termTimer (newTermContextOn).
func newTermContext(parent context.Context, term uint64, start time.Time, renewDeadline time.Duration, clock Clock) *termContext {
	return newTermContextClock(parent, term, start, renewDeadline, clock.Now, clock)
}

// newTermContextClock is newTermContext with the clock read by the Err/Done check
// apart from the timer's clock, for tests of the lazy check.
func newTermContextClock(parent context.Context, term uint64, start time.Time, renewDeadline time.Duration, now func() time.Time, clock Clock) *termContext {
	return newTermContextOn(parent, term, start, renewDeadline, newTermTimer(now, clock))
}

// newTermContextOn starts a term under parent whose first write was sent at start,
// timed by timer (which then times this term only). renewDeadline 0 disables the clock
// check and the timer.
func newTermContextOn(parent context.Context, term uint64, start time.Time, renewDeadline time.Duration, timer *termTimer) *termContext {
	inner, cancel := context.WithCancelCause(parent)
	t := &termContext{
		Context:       inner,
		cancel:        cancel,
		renewDeadline: renewDeadline,
		origin:        start,
		now:           timer.now,
	}
	t.term.Store(term)
	if renewDeadline > 0 {
		t.timer = timer
		timer.start(t)
	}
	return t
}

// Err returns a non-nil error once the term ended, including the moment the renew
// deadline has passed by the local clock.
func (t *termContext) Err() error {
	t.checkClock()
	return t.Context.Err()
}

// Done returns a channel closed when the term ends; if the renew deadline has passed by
// the local clock, it is closed before Done returns.
func (t *termContext) Done() <-chan struct{} {
	t.checkClock()
	return t.Context.Done()
}

// Value returns the value for key: the term context itself for termctx's key (it is a
// termctx.Carrier), nil for it while the term is pending, the parent's value for any
// other key. Like Err, it first ends the term
// if its renew deadline has passed, which cancels every context derived from it at
// once. Lookups through derived contexts (TermFromContext among them) end here, so they
// see the expiry even before the timer ran.
func (t *termContext) Value(key any) any {
	t.checkClock()
	if termctx.IsKey(key) {
		if t.Term() == 0 {
			return nil
		}
		return t
	}
	return t.Context.Value(key)
}

// Term returns the term, 0 while pending: termctx.FromContext reads it through Value.
func (t *termContext) Term() uint64 { return t.term.Load() }

// checkClock ends a running term whose renew deadline has passed by the local clock.
func (t *termContext) checkClock() {
	if t.Context.Err() == nil && t.expired() {
		t.cancel(ErrRenewDeadlineMissed)
	}
}

// String describes the context for debugging.
func (t *termContext) String() string {
	return "leaderelection.termContext(term " + strconv.FormatUint(t.Term(), 10) + ")"
}

// sinceRenew is the local time since the send time of the last successful renew.
func (t *termContext) sinceRenew() time.Duration {
	return t.now().Sub(t.origin) - time.Duration(t.renewed.Load())
}

func (t *termContext) remaining() time.Duration { return t.renewDeadline - t.sinceRenew() }

func (t *termContext) expired() bool { return t.renewDeadline > 0 && t.remaining() <= 0 }

// markRenewed records a successful renew sent at sent. It does not revive a term that
// already ended; it reports whether the term is still on.
func (t *termContext) markRenewed(sent time.Time) bool {
	if t.Err() != nil {
		return false
	}
	d := int64(sent.Sub(t.origin))
	for {
		old := t.renewed.Load()
		if d <= old || t.renewed.CompareAndSwap(old, d) {
			return true
		}
	}
}

// end cancels the term with cause (a no-op if it ended already) and stops its timer.
func (t *termContext) end(cause error) {
	t.cancel(cause)
	if t.timer != nil {
		t.timer.stop(t)
	}
}

// termTimer ends the terms of one campaign at their renew deadlines, one term at a
// time, on one timer: on the real clock a *time.Timer re-armed with Reset, so a term
// costs no timer and no callback; on any other Clock a new AfterFunc per arming, since
// only the Clock knows how its durations map to true time. It fires at the deadline of
// the term it times, ends the term if the deadline has passed by the term's clock, and
// otherwise re-arms for the deadline that renews moved.
type termTimer struct {
	now func() time.Time // the clock read by the terms' check

	// mu guards term and timer. Held while arming or stopping timer (the Clock's call),
	// never while ending a term.
	mu    sync.Mutex
	term  *termContext // the term timed, nil when none
	timer wakeTimer    // calls onTimer
}

func newTermTimer(now func() time.Time, clock Clock) *termTimer {
	tt := &termTimer{now: now}
	tt.timer = wakeTimer{clock: clock, f: tt.onTimer}
	return tt
}

// start times t, which replaces the term timed before (which has ended).
func (tt *termTimer) start(t *termContext) {
	tt.mu.Lock()
	tt.term = t
	tt.timer.reset(t.remaining())
	tt.mu.Unlock()
}

// onTimer ends the term timed at its renew deadline, or re-arms for the new one after
// renews. A late firing meant for an earlier term judges the current one, which is as
// good: it either re-arms for its deadline or ends it past that deadline.
func (tt *termTimer) onTimer() {
	tt.mu.Lock()
	t := tt.term
	// Checked under mu: end cancels before it takes mu to stop the timer, so a term that
	// ended is never re-armed after that stop.
	if t == nil || t.Context.Err() != nil {
		tt.mu.Unlock()
		return
	}
	left := t.remaining()
	if left > 0 {
		tt.timer.reset(left)
	}
	tt.mu.Unlock()
	if left <= 0 {
		t.cancel(ErrRenewDeadlineMissed)
	}
}

// stop stops the timer if it still times t: a late end of an earlier term (Resign's,
// racing the step-down) leaves the next term's timing alone.
func (tt *termTimer) stop(t *termContext) {
	tt.mu.Lock()
	if tt.term == t {
		tt.term = nil
		tt.timer.stop()
	}
	tt.mu.Unlock()
}
