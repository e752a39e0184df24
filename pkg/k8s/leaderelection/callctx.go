package leaderelection

import (
	"context"
	"sync"
	"time"
)

// callContext is the context of one store call: it ends when its parent does, when
// stop is called, or once d has passed on the elector's Clock (Err DeadlineExceeded,
// as context.WithTimeout's). It is made lazily: until someone asks for Done, it is one
// struct whose Err checks the parent, stop and the clock, which is all an in-process
// store (MemoryStore) looks at, so such a call costs one allocation instead of a
// timer context and its timer. The first Done (a store that waits on the context, the
// Kubernetes one) makes the inner context: on the real clock context.WithDeadline at
// the deadline, as context.WithTimeout would have made; on another Clock a
// cancel-cause context that a timer on the Clock cancels at the deadline. From then on
// Done and Value are the inner context's, so contexts derived from the call attach to
// it directly and context.Cause gives the reason (DeadlineExceeded, Canceled after
// stop, or the parent's cause).
//
// Deadline is the call's deadline on the real clock, so it reaches the store; on any
// other Clock it is the parent's (the Clock's time base is not the runtime's).
type callContext struct {
	parent   context.Context
	clock    Clock
	at       time.Time // the deadline, read on clock
	deadline time.Time // the deadline on the real clock; zero on another Clock

	// mu guards the fields below. No call out (parent, clock, cancel) is made under it.
	mu     sync.Mutex
	err    error           // the first error Err reported (or stop set), sticky
	inner  context.Context // made by the first Done; nil before
	cancel context.CancelCauseFunc
	timer  Timer
}

// newCallContext returns the context of a store call that may take d on clock; the
// caller calls stop once the call returned.
func newCallContext(parent context.Context, clock Clock, d time.Duration) *callContext {
	now := clock.Now()
	c := &callContext{parent: parent, clock: clock, at: now.Add(d)}
	if isRealClock(clock) {
		c.deadline = c.at
		if pd, ok := parent.Deadline(); ok && pd.Before(c.deadline) {
			c.deadline = pd
		}
	}
	return c
}

// Deadline returns the call's deadline (the parent's when that is earlier), on the
// real clock; on another Clock the parent's.
func (c *callContext) Deadline() (time.Time, bool) {
	if !c.deadline.IsZero() {
		return c.deadline, true
	}
	return c.parent.Deadline()
}

// Err returns nil while the call may go on, then, for good, the first reason seen:
// the parent's error, DeadlineExceeded once the deadline has passed on the clock, or
// Canceled after stop.
func (c *callContext) Err() error {
	c.mu.Lock()
	err, inner := c.err, c.inner
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if inner != nil {
		err = inner.Err()
	} else {
		err = c.parent.Err()
	}
	if err == nil && !c.clock.Now().Before(c.at) {
		err = context.DeadlineExceeded
	}
	if err == nil {
		return nil
	}
	return c.end(err)
}

// end records err as the context's error unless one was recorded first, cancels the
// inner context with it, and returns the error recorded.
func (c *callContext) end(err error) error {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	err, cancel, timer := c.err, c.cancel, c.timer
	c.mu.Unlock()
	if timer != nil {
		timer.Stop()
	}
	// On the real clock the inner context ends itself at the deadline, with its own
	// DeadlineExceeded (the clock check here may see the deadline a moment earlier).
	if cancel != nil && (err != context.DeadlineExceeded || c.deadline.IsZero()) {
		cancel(err)
	}
	return err
}

// stop ends the call's context (Canceled) and releases its timer.
func (c *callContext) stop() { c.end(context.Canceled) }

// Done returns a channel closed when the context ends; the first call makes the
// inner context and its timer.
func (c *callContext) Done() <-chan struct{} {
	return c.materialize().Done()
}

// Value returns the inner context's value for key once Done was called, the parent's
// before: either way what a context derived from the call sees.
func (c *callContext) Value(key any) any {
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner != nil {
		return inner.Value(key)
	}
	return c.parent.Value(key)
}

// materialize returns the inner context, making it on the first call (newInner),
// ended at once if the context ended before.
func (c *callContext) materialize() context.Context {
	c.mu.Lock()
	inner := c.inner
	c.mu.Unlock()
	if inner != nil {
		return inner
	}
	made, cancel := c.newInner()
	c.mu.Lock()
	if c.inner != nil { // made meanwhile by another caller
		inner = c.inner
		c.mu.Unlock()
		cancel(context.Canceled)
		return inner
	}
	c.inner, c.cancel = made, cancel
	c.mu.Unlock()
	if err := c.Err(); err != nil { // ended before: end the inner context with it
		c.end(err)
		return made
	}
	if c.deadline.IsZero() {
		c.armTimer()
	}
	return made
}

// newInner makes the inner context: context.WithDeadline on the real clock, a
// cancel-cause context (armTimer ends it) on another Clock.
func (c *callContext) newInner() (context.Context, context.CancelCauseFunc) {
	if c.deadline.IsZero() {
		return context.WithCancelCause(c.parent)
	}
	made, cancel := context.WithDeadline(c.parent, c.deadline)
	return made, func(error) { cancel() }
}

// armTimer ends the context at the deadline on a Clock that is not the real one.
func (c *callContext) armTimer() {
	timer := c.clock.AfterFunc(c.at.Sub(c.clock.Now()), func() { c.end(context.DeadlineExceeded) })
	c.mu.Lock()
	ended := c.err != nil
	c.timer = timer
	c.mu.Unlock()
	if ended { // stop (or the deadline) came while the timer was armed
		timer.Stop()
	}
}

// String describes the context for debugging.
func (c *callContext) String() string { return "leaderelection.callContext" }
