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
// Implementations must be safe for concurrent use, and Now, AfterFunc and Timer.Stop
// must never wait for a call of an AfterFunc's f to finish: the elector calls them with
// a lock held that f takes. Set one through Config.Clock to run an elector on another
// time base (tests, fault injection); nil means the real clock.
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

// clockOf returns config.Clock, or the real clock when it is nil.
func clockOf(config Config) Clock {
	if config.Clock == nil {
		return realClock{}
	}
	return config.Clock
}

// withTimeout returns a context of parent that ends with cause once d has passed on
// clock, and its cancel function. It is context.WithTimeoutCause on the elector's Clock
// instead of the runtime's, so that a candidate on another time base (Config.Clock)
// times its store calls as it times everything else.
func withTimeout(parent context.Context, clock Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	timer := clock.AfterFunc(d, func() { cancel(cause) })
	return ctx, func() {
		timer.Stop()
		cancel(context.Canceled)
	}
}
