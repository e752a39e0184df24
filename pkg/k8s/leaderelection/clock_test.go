package leaderelection

import (
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// rateClock runs at rate times the runtime clock from its start (test only).
type rateClock struct {
	start time.Time
	rate  float64
}

func (c rateClock) Now() time.Time {
	return c.start.Add(time.Duration(float64(time.Since(c.start)) * c.rate))
}

// AfterFunc rounds up: a timer must not fire before d has passed on c.
func (c rateClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(time.Duration(math.Ceil(float64(d)/c.rate)), f)
}

// TestConfigClock: the elector times everything by Config.Clock. A follower whose clock
// runs twice as fast takes a dead leader's lease after about LeaseDuration/2 (7.5s of
// true time, not 15s), and a leader whose clock runs twice as fast and cannot renew
// ends its term RenewDeadline/2 (5s) after its last renew. A rate of 2 is beyond the
// margin of the defaults (LeaseDuration/RenewDeadline = 1.5), so the cluster poller is
// not run across the two leaders' windows here: each half runs alone.
func TestConfigClock(t *testing.T) {
	t.Run("follower", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cl := newCluster(t)
			defer cl.stop()
			a := cl.start("a", nil)
			if cl.waitLeader(nil, time.Second) != a {
				t.Fatal("a did not lead")
			}
			b := cl.start("b", func(c *Config) { c.Clock = rateClock{start: time.Now(), rate: 2} })
			time.Sleep(time.Minute)
			a.cancel() // no release: the lease stays a's until it expires
			<-a.done
			stopped := time.Now()
			if cl.waitLeader(a, time.Minute) != b {
				t.Fatal("b did not take over")
			}
			// a renewed at most a RetryPeriod before it stopped; b waits 15s/2 by its
			// clock from the last renew it saw.
			if d := time.Since(stopped); d < 5*time.Second || d > 8*time.Second {
				t.Errorf("b took over %v after a stopped, want 5.5s to 7.5s (LeaseDuration/2 after a's last renew)", d)
			}
		})
	})
	t.Run("leader", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			cl := newCluster(t)
			defer cl.stop()
			a := cl.start("a", func(c *Config) { c.Clock = rateClock{start: time.Now(), rate: 2} })
			if cl.waitLeader(nil, time.Second) != a {
				t.Fatal("a did not lead")
			}
			time.Sleep(time.Minute + 300*time.Millisecond) // between two renews
			renewSent, _, _ := a.store.times()
			a.store.setMode(modeFail)
			ctx := a.lastCtx()
			<-ctx.Done()
			if d := time.Since(renewSent); d != 5*time.Second {
				t.Errorf("term ended %v after its last renew was sent, want 5s (RenewDeadline/2)", d)
			}
		})
	})
}
