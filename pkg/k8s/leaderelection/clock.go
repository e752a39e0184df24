package leaderelection

import (
	"context"
	"time"
)

// Clock is the time source of an Elector: every time read and timer of the election
// (expiry waits, the renew deadline of a term, backoff, watch and call timeouts) goes
// through it. The elector compares only instants read from one Clock (durations between
// its own readings), never with times read elsewhere, so a Clock needs a steady rate, not
// a correct wall time: time.Now's monotonic reading is what the real clock gives.
//
// Implementations must be safe for concurrent use. Set one through Config.Clock to run an
// elector on another time base (tests, fault injection); nil means the real clock.
type Clock interface {
	// Now returns the current time; the elector subtracts readings of it, so it must
	// not go backwards.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed on this clock, unless the
	// returned Timer is stopped first.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call of Clock.AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it did.
	Stop() bool
}

// realClock is the Clock of the runtime: time.Now and time.AfterFunc.
type realClock struct{}

func (realClock) Now() time.Time                            { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// withTimeout is context.WithTimeout on clock: the context ends when d has passed by
// clock, with context.Cause context.DeadlineExceeded. On the real clock it is
// context.WithTimeout itself, so the deadline reaches the store (and the API server).
func withTimeout(ctx context.Context, clock Clock, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := clock.(realClock); ok {
		return context.WithTimeout(ctx, d)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	t := clock.AfterFunc(d, func() { cancel(context.DeadlineExceeded) })
	return ctx, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// clockOf returns config.Clock, or the real clock when it is nil.
func clockOf(config Config) Clock {
	if config.Clock == nil {
		return realClock{}
	}
	return config.Clock
}
