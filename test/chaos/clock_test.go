package chaos

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// skewClock is a candidate's clock (leaderelection.Clock) built on the true time (the
// bubble's): it runs at rate (1 outside skew windows), so that d of its time passes in
// d/rate of true time, and its timers fire then. Its readings carry the monotonic
// reading of the true time it started from, so the elector's differences of them are
// the skewed durations. Safe for concurrent use.
type skewClock struct {
	// mu guards the fields below.
	mu          sync.Mutex
	anchorTrue  time.Time // true time of the last rate change
	anchorLocal time.Time // this clock's reading then
	rate        float64
	timers      map[*skewTimer]struct{} // pending
}

var _ leaderelection.Clock = (*skewClock)(nil)

func newSkewClock() *skewClock {
	now := time.Now()
	return &skewClock{anchorTrue: now, anchorLocal: now, rate: 1, timers: make(map[*skewTimer]struct{})}
}

func (c *skewClock) nowLocked() time.Time {
	return c.anchorLocal.Add(time.Duration(float64(time.Since(c.anchorTrue)) * c.rate))
}

// Now returns this clock's reading.
func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

// setRate makes the clock run at rate from now on and re-arms the pending timers.
func (c *skewClock) setRate(rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.nowLocked()
	c.anchorTrue, c.anchorLocal, c.rate = time.Now(), now, rate
	for t := range c.timers {
		t.armLocked()
	}
}

// skewTimer is a pending AfterFunc of a skewClock, on a true-time timer that is
// re-armed when the rate changes.
type skewTimer struct {
	c        *skewClock
	deadline time.Time // on c
	f        func()
	gen      int // of the true-time timer armed last; older ones do nothing
	t        *time.Timer
}

// AfterFunc calls f in its own goroutine when d has passed on this clock.
func (c *skewClock) AfterFunc(d time.Duration, f func()) leaderelection.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &skewTimer{c: c, deadline: c.nowLocked().Add(d), f: f}
	c.timers[t] = struct{}{}
	t.armLocked()
	return t
}

// armLocked (re)starts the true-time timer for what is left to the deadline at the
// current rate (rounded up, so it never fires early).
func (t *skewTimer) armLocked() {
	if t.t != nil {
		t.t.Stop()
	}
	t.gen++
	gen := t.gen
	left := max(0, float64(t.deadline.Sub(t.c.nowLocked())))
	t.t = time.AfterFunc(time.Duration(math.Ceil(left/t.c.rate)), func() { t.fire(gen) })
}

func (t *skewTimer) fire(gen int) {
	c := t.c
	c.mu.Lock()
	if _, pending := c.timers[t]; !pending || gen != t.gen {
		c.mu.Unlock()
		return
	}
	if c.nowLocked().Before(t.deadline) { // float rounding: not there yet
		t.armLocked()
		c.mu.Unlock()
		return
	}
	delete(c.timers, t)
	c.mu.Unlock()
	t.f()
}

// Stop cancels the call; it reports whether it was still pending.
func (t *skewTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, pending := c.timers[t]; !pending {
		return false
	}
	delete(c.timers, t)
	t.t.Stop()
	return true
}

// TestSkewClock: a timer fires after d/rate of true time, a rate change re-arms it for
// what is left, a stopped timer never fires, and readings advance at the rate.
func TestSkewClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newSkewClock()
		start, trueStart := c.Now(), time.Now()
		c.setRate(2)
		fired := make(chan time.Duration, 2)
		c.AfterFunc(10*time.Second, func() { fired <- time.Since(trueStart) })
		stopped := c.AfterFunc(time.Second, func() { fired <- -1 })
		if !stopped.Stop() || stopped.Stop() {
			t.Fatal("Stop: want true, then false")
		}
		time.Sleep(2 * time.Second) // 4s on c
		if got := c.Now().Sub(start); got != 4*time.Second {
			t.Fatalf("after 2s true at rate 2: clock advanced %v, want 4s", got)
		}
		c.setRate(0.5) // 6s left on c: 12s of true time
		if got := <-fired; got != 14*time.Second {
			t.Fatalf("timer fired after %v of true time, want 14s", got)
		}
		time.Sleep(time.Minute)
		select {
		case d := <-fired:
			t.Fatalf("stopped timer fired (%v)", d)
		default:
		}
	})
}

// beyondRate is the skew rate of the negative control: every skew window runs its
// candidate's clock at 1.6, so a fast follower next to a leader at the true rate
// differs by more than LeaseDuration/RenewDeadline = 1.5 (both configs).
const beyondRate = 1.6

// TestChaosSkewBeyondTolerance is the negative control of clock skew: at a rate beyond
// the elector's tolerance the suite must find two leaders (it finds them in a few
// percent of histories), or the skew fault or the checker does not work.
func TestChaosSkewBeyondTolerance(t *testing.T) {
	if testing.Short() {
		t.Skip("200 histories")
	}
	for _, cfg := range configs {
		if limit := float64(cfg.LeaseDuration) / float64(cfg.RenewDeadline); beyondRate <= limit {
			t.Fatalf("rate %v is not beyond LeaseDuration/RenewDeadline = %v", beyondRate, limit)
		}
	}
	var mu sync.Mutex
	var found []int64
	t.Run("history", func(t *testing.T) {
		for seed := int64(1); seed <= 200; seed++ {
			t.Run(strconv.FormatInt(seed, 10), func(t *testing.T) {
				t.Parallel()
				res := check(runMemory(t, seed, skewMode{on: true, rate: beyondRate}))
				for _, v := range res.violations {
					if v.kind == vOverlap {
						mu.Lock()
						found = append(found, seed)
						mu.Unlock()
						return
					}
				}
			})
		}
	})
	slices.Sort(found)
	if len(found) == 0 {
		t.Fatalf("no two leaders in 200 histories with every skew window at rate %v, beyond the tolerance", beyondRate)
	}
	t.Logf("two leaders at rate %v (beyond the tolerance) in %d of 200 histories, seeds %v", beyondRate, len(found), found)
}
