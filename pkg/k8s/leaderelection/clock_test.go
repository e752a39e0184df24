package leaderelection

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"
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

// countingSource is a rand.Source that counts its draws (test only).
type countingSource struct {
	src   rand.Source
	draws atomic.Int64
}

func (s *countingSource) Uint64() uint64 {
	s.draws.Add(1)
	return s.src.Uint64()
}

// TestJitterSource: the retry jitter comes from Config.JitterSource, so an elector
// whose store keeps failing retries at the same instants for the same seed, and at
// others for another seed.
func TestJitterSource(t *testing.T) {
	gaps := func(seed uint64) ([]time.Duration, int64) {
		var out []time.Duration
		src := &countingSource{src: rand.NewPCG(seed, 1)}
		synctest.Test(t, func(t *testing.T) {
			store := newTestStore(NewMemoryStore("lease"), 0)
			store.setMode(modeFail)
			cfg := testConfig("a")
			cfg.JitterSource = src
			e, err := NewWithStore(cfg, store, Callbacks{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				_ = e.Start(ctx)
			}()
			time.Sleep(20 * time.Second)
			cancel()
			<-done
			store.mu.Lock()
			defer store.mu.Unlock()
			for i := 1; i < len(store.watchTimes); i++ {
				out = append(out, store.watchTimes[i].Sub(store.watchTimes[i-1]))
			}
		})
		return out, src.draws.Load()
	}
	a, drawsA := gaps(7)
	b, _ := gaps(7)
	c, _ := gaps(8)
	if len(a) < 5 || drawsA < int64(len(a)) {
		t.Fatalf("seed 7: %d retries, %d draws from the source; want at least 5 retries, one draw each", len(a), drawsA)
	}
	if !slices.Equal(a, b) {
		t.Errorf("seed 7 twice: retry gaps %v and %v, want equal", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("seeds 7 and 8: same retry gaps %v, want different jitter", a)
	}
}
