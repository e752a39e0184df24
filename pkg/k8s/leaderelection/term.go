package leaderelection

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// termContext is the context of one term, given to OnStartedLeading. It ends when the
// elector steps down or the parent ends, and when RenewDeadline has passed since the
// send time of the last successful renew, by the elector's clock: a timer cancels it
// then, and Err, Done and Value check the clock themselves first, so a process resumed
// after SIGSTOP sees its term over at once, before any timer ran. context.Cause gives
// the reason (ErrRenewDeadlineMissed, ErrLeaseLost, ErrHandedOver, ErrResigned, or the
// parent's cause). termctx.Get gives the term: the Lease, the number and the token.
type termContext struct {
	context.Context // termctx.NewContext on a cancel-cause context of the parent
	cancel          context.CancelCauseFunc
	term            uint64
	renewDeadline   time.Duration // 0: no clock check (election disabled)
	clock           Clock

	// mu guards lastRenew and timer.
	mu        sync.Mutex
	lastRenew time.Time // send time of the last successful renew (or of the acquire)
	timer     Timer     // nil when renewDeadline is 0 or once the term ended
}

// newTermContext starts term under parent; its acquiring write was sent at start.
// renewDeadline 0 disables the clock check.
func newTermContext(parent context.Context, term termctx.Term, start time.Time, renewDeadline time.Duration, clock Clock) *termContext {
	inner, cancel := context.WithCancelCause(parent)
	t := &termContext{
		Context:       termctx.With(inner, term),
		cancel:        cancel,
		term:          term.Number,
		renewDeadline: renewDeadline,
		clock:         clock,
		lastRenew:     start,
	}
	if renewDeadline > 0 {
		t.mu.Lock()
		t.timer = clock.AfterFunc(t.remainingLocked(), t.onTimer)
		t.mu.Unlock()
	}
	return t
}

// termOf is term as the term context carries it: the Lease, the number, and the
// token of the acquisition and the Lease's UID, read from the last write the store
// confirmed (the acquiring write, or a renew since, which keeps its holder and
// acquireTime).
func (c *campaign) termOf(term uint64) termctx.Term {
	t := termctx.Term{Lease: termctx.Lease{Namespace: c.e.config.LeaseNamespace, Name: c.e.config.LeaseName}, Number: term}
	if w := c.writes.confirmed; c.writes.hasConfirmed && w.HolderIdentity == c.self {
		t.Token = termctx.Token{Holder: c.self, Acquired: w.AcquireTime}
		t.LeaseUID = w.UID
	}
	return t
}

// Err returns a non-nil error once the term ended, including the moment the renew
// deadline has passed by the clock.
func (t *termContext) Err() error {
	t.checkClock()
	return t.Context.Err()
}

// Done returns a channel closed when the term ends; if the renew deadline has passed by
// the clock, it is closed before Done returns.
func (t *termContext) Done() <-chan struct{} {
	t.checkClock()
	return t.Context.Done()
}

// Value is the wrapped context's Value after the clock check.
//
// Why is this here? Every lookup through a context derived from the term context
// (termctx.FromContext among them) ends here, so leader work that reads its term
// before acting sees a term past its deadline ended, and so do all contexts derived
// from it, even before the timer ran.
func (t *termContext) Value(key any) any {
	t.checkClock()
	return t.Context.Value(key)
}

// Term returns the term.
func (t *termContext) Term() uint64 { return t.term }

// String describes the context for debugging.
func (t *termContext) String() string {
	return "leaderelection.termContext(term " + strconv.FormatUint(t.term, 10) + ")"
}

// checkClock ends a running term whose renew deadline has passed by the clock.
func (t *termContext) checkClock() {
	if t.renewDeadline > 0 && t.Context.Err() == nil && t.sinceRenew() >= t.renewDeadline {
		t.cancel(ErrRenewDeadlineMissed)
	}
}

// sinceRenew is the time since the send time of the last successful renew.
func (t *termContext) sinceRenew() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.clock.Now().Sub(t.lastRenew)
}

func (t *termContext) remainingLocked() time.Duration {
	return t.renewDeadline - t.clock.Now().Sub(t.lastRenew)
}

// onTimer ends the term at its renew deadline, or re-arms for the deadline that renews
// moved.
func (t *termContext) onTimer() {
	t.mu.Lock()
	left := t.remainingLocked()
	if left > 0 && t.timer != nil {
		t.timer = t.clock.AfterFunc(left, t.onTimer)
	}
	t.mu.Unlock()
	if left <= 0 {
		t.cancel(ErrRenewDeadlineMissed)
	}
}

// markRenewed records a successful renew sent at sent. It does not revive a term that
// already ended; it reports whether the term is still on.
func (t *termContext) markRenewed(sent time.Time) bool {
	if t.Err() != nil {
		return false
	}
	t.mu.Lock()
	if sent.After(t.lastRenew) {
		t.lastRenew = sent
	}
	t.mu.Unlock()
	return true
}

// end cancels the term with cause (a no-op if it ended already) and stops its timer.
func (t *termContext) end(cause error) {
	t.cancel(cause)
	t.mu.Lock()
	timer := t.timer
	t.timer = nil
	t.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
}
