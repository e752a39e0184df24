package leaderelection

import "time"

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

// isRealClock reports whether clock is the real clock, whose timers are *time.Timer and
// may be re-armed with Reset.
func isRealClock(clock Clock) bool {
	_, ok := clock.(realClock)
	return ok
}

// wakeTimer calls f once a duration given to reset has passed on clock, re-arming one
// timer: on the real clock a *time.Timer reset in place (no allocation), on any other
// Clock a new AfterFunc after stopping the last. Used by one goroutine at a time (the
// campaign's loop, or a termTimer under its mutex); a call of f from an arming
// replaced too late may still come.
type wakeTimer struct {
	clock Clock
	f     func()
	timer Timer // nil before the first reset
}

// reset makes the timer fire once d has passed, instead of when it was set to.
func (w *wakeTimer) reset(d time.Duration) {
	if rt, ok := w.timer.(*time.Timer); ok && isRealClock(w.clock) {
		rt.Reset(d)
		return
	}
	w.stop()
	w.timer = w.clock.AfterFunc(d, w.f)
}

// stop stops the timer if it is armed.
func (w *wakeTimer) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
