package deploymentscheduler

import "time"

// limiter lets one action through per interval: the second of two actions
// waits until interval has passed since the first. The zero value with an
// interval set lets the first action through at once; Start makes a fresh
// one for every term.
type limiter struct {
	interval time.Duration
	last     time.Time // when the last action was let through
	used     bool      // whether any was
}

// wait returns how long an action at now must wait; 0 means it may go.
func (l *limiter) wait(now time.Time) time.Duration {
	if !l.used {
		return 0
	}
	if d := l.last.Add(l.interval).Sub(now); d > 0 {
		return d
	}
	return 0
}

// take records an action at now.
func (l *limiter) take(now time.Time) { l.last, l.used = now, true }
