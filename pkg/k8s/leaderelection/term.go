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
// termctx.FromContext, the one term accessor of the core (the term is stamped with
// termctx.NewContext; the lookup passes through termContext.Value, which checks the
// clock).
func TermFromContext(ctx context.Context) (term uint64, ok bool) {
	return termctx.FromContext(ctx)
}

// termContext is the context of one term. It ends when the elector steps down or when
// the parent ends, and by its own check of the local monotonic clock: as soon as
// renewDeadline has passed since the send time of the last successful renew, Err and
// Done report it ended, even if no goroutine has yet run to cancel it (a process resumed
// after SIGSTOP sees its term over at once). A timer cancels it at that moment too, so
// contexts derived from it end as well.
//
// The embedded context is a cancel-cause context, so context.Cause gives the reason
// (ErrRenewDeadlineMissed, ErrLeaseLost, or the parent's cause) once Err is non-nil, and
// derived contexts attach to it directly.
type termContext struct {
	context.Context
	cancel        context.CancelCauseFunc
	term          uint64
	renewDeadline time.Duration // 0: no clock check (election disabled)
	origin        time.Time     // monotonic reference for renewed
	now           func() time.Time
	clock         Clock // runs the timer

	// renewed is the send time of the last successful renew, in nanoseconds since origin.
	renewed atomic.Int64

	// timerMu guards timer.
	timerMu sync.Mutex
	timer   Timer
}

// newTermContext starts a term under parent whose first write was sent at start.
// renewDeadline 0 disables the clock check.
func newTermContext(parent context.Context, term uint64, start time.Time, renewDeadline time.Duration, clock Clock) *termContext {
	return newTermContextClock(parent, term, start, renewDeadline, clock.Now, clock)
}

// newTermContextClock is newTermContext with the clock read by the Err/Done check
// apart from the timer's clock, for tests of the lazy check.
func newTermContextClock(parent context.Context, term uint64, start time.Time, renewDeadline time.Duration, now func() time.Time, clock Clock) *termContext {
	inner, cancel := context.WithCancelCause(termctx.NewContext(parent, term))
	t := &termContext{
		Context:       inner,
		cancel:        cancel,
		term:          term,
		renewDeadline: renewDeadline,
		origin:        start,
		now:           now,
	}
	if renewDeadline > 0 {
		t.timerMu.Lock()
		t.clock = clock
		t.timer = clock.AfterFunc(t.remaining(), t.onTimer)
		t.timerMu.Unlock()
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

// Value returns the value for key; like Err, it first ends the term if its renew
// deadline has passed, which cancels every context derived from it at once. Lookups
// through derived contexts (TermFromContext among them) end here, so they see the
// expiry even before the timer ran.
func (t *termContext) Value(key any) any {
	t.checkClock()
	return t.Context.Value(key)
}

// checkClock ends a running term whose renew deadline has passed by the local clock.
func (t *termContext) checkClock() {
	if t.Context.Err() == nil && t.expired() {
		t.cancel(ErrRenewDeadlineMissed)
	}
}

// String describes the context for debugging.
func (t *termContext) String() string {
	return "leaderelection.termContext(term " + strconv.FormatUint(t.term, 10) + ")"
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

// onTimer ends the term at the renew deadline, or re-arms for the new one after renews.
func (t *termContext) onTimer() {
	t.timerMu.Lock()
	// Checked under timerMu: end cancels before it takes timerMu to stop the timer, so
	// a term that ended is never re-armed after that Stop.
	if t.Context.Err() != nil {
		t.timerMu.Unlock()
		return
	}
	left := t.remaining()
	if left > 0 {
		t.timer = t.clock.AfterFunc(left, t.onTimer)
	}
	t.timerMu.Unlock()
	if left <= 0 {
		t.cancel(ErrRenewDeadlineMissed)
	}
}

// end cancels the term with cause (a no-op if it ended already) and stops its timer.
func (t *termContext) end(cause error) {
	t.cancel(cause)
	t.timerMu.Lock()
	if t.timer != nil {
		t.timer.Stop()
	}
	t.timerMu.Unlock()
}
