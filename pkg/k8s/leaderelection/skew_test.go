package leaderelection

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// errCutOff is what a lostReplyStore answers once its script has run.
var errCutOff = errors.New("test: cut off from the store")

// lostReplyStore plays one script on the Updates after arm: the first is applied but
// its reply is lost after replyDelay, the second and the Get after it pass (the second
// conflicts with the first), and from the third on every call fails (the candidate is
// cut off). It records the true send time of the first.
type lostReplyStore struct {
	LeaseStore
	replyDelay time.Duration

	// mu guards the fields below.
	mu      sync.Mutex
	armed   bool
	updates int
	gets    int
	lostAt  time.Time // true send time of the Update whose reply was lost
}

func (s *lostReplyStore) arm() {
	s.mu.Lock()
	s.armed = true
	s.mu.Unlock()
}

func (s *lostReplyStore) lostSent() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lostAt
}

// cutOff reports whether calls now fail: after the script's second Update and its Get.
func (s *lostReplyStore) cutOff() bool {
	return s.armed && (s.updates > 2 || (s.updates == 2 && s.gets > 0))
}

func (s *lostReplyStore) Update(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	s.mu.Lock()
	if !s.armed {
		s.mu.Unlock()
		return s.LeaseStore.Update(ctx, r)
	}
	s.updates++
	n, cut := s.updates, s.cutOff()
	if n == 1 {
		s.lostAt = time.Now()
	}
	s.mu.Unlock()
	switch {
	case cut:
		return LeaseRecord{}, errCutOff
	case n == 1:
		if _, err := s.LeaseStore.Update(ctx, r); err != nil {
			return LeaseRecord{}, err
		}
		select {
		case <-time.After(s.replyDelay):
		case <-ctx.Done():
		}
		return LeaseRecord{}, errInjected // applied, reply lost
	}
	return s.LeaseStore.Update(ctx, r)
}

func (s *lostReplyStore) Get(ctx context.Context) (LeaseRecord, error) {
	s.mu.Lock()
	cut := s.cutOff()
	if s.armed && s.updates == 2 {
		s.gets++
	}
	s.mu.Unlock()
	if cut {
		return LeaseRecord{}, errCutOff
	}
	return s.LeaseStore.Get(ctx)
}

func (s *lostReplyStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	s.mu.Lock()
	cut := s.cutOff()
	s.mu.Unlock()
	if cut {
		return nil, errCutOff
	}
	return s.LeaseStore.Watch(ctx)
}

// tightConfig is the tight timing of the chaos suite: 3s/2s/500ms (margin 1.5).
func tightConfig(c *Config) {
	c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 3*time.Second, 2*time.Second, 500*time.Millisecond
}

// TestRecognisedLostReplyCreditsItsOwnSend (test/chaos seed 2320 with clock skew): a
// renew goes through but its reply is lost late; the leader's retry conflicts with it,
// and the re-read recognises the first renew as the leader's own. The term must then
// count from the send time of that renew, not from the retry's: the follower's expiry
// wait started when it saw the first renew. The elector before the fix credited the
// retry's send time (it read the matched send through a pointer into the list of sends
// that confirming had just compacted), which moved the leader's deadline past the
// follower's expiry. Clocks run at 0.92 (leader) and 1.08 (follower), a ratio of 1.17,
// inside the tolerance LeaseDuration/RenewDeadline = 1.5.
func TestRecognisedLostReplyCreditsItsOwnSend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const slow, fast = 0.92, 1.08
		cl := newCluster(t)
		defer cl.stop()
		var ls *lostReplyStore
		a := cl.startWrapped("a", func(c *Config) {
			tightConfig(c)
			c.Clock = rateClock{start: time.Now(), rate: slow}
		}, func(s *testStore) {
			s.silent = true // a learns of its renews only from their replies and re-reads
		}, func(s LeaseStore) LeaseStore {
			ls = &lostReplyStore{LeaseStore: s, replyDelay: time.Second}
			return ls
		})
		// a's silent watch never shows its Create: it holds the lease a LeaseDuration
		// (by its slow clock) before it leads.
		if cl.waitLeader(nil, 4*time.Second) != a {
			t.Fatal("a did not lead")
		}
		b := cl.start("b", func(c *Config) {
			tightConfig(c)
			c.Clock = rateClock{start: time.Now(), rate: fast}
		})
		time.Sleep(5*time.Second + 200*time.Millisecond) // between two renews
		ls.arm()
		ctx := a.lastCtx()
		<-ctx.Done()
		ended := time.Now()
		// a's last write that went through is the one whose reply was lost: its term
		// ends RenewDeadline by its clock after that send.
		rd := 2 * time.Second
		want := ls.lostSent().Add(time.Duration(float64(rd) / slow))
		// Not earlier either: a recognised the renew as its own (a term counted from
		// the renew before it would have ended a RetryPeriod sooner).
		if d := ended.Sub(want); d < -time.Millisecond || d > time.Millisecond {
			t.Errorf("a's term ended %v after the send of its last applied renew, want %v (RenewDeadline by a clock at rate %v)",
				ended.Sub(ls.lostSent()), want.Sub(ls.lostSent()), slow)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, ErrRenewDeadlineMissed) {
			t.Errorf("a's term ended with %v, want ErrRenewDeadlineMissed", cause)
		}
		if cl.waitLeader(a, 10*time.Second) != b {
			t.Fatal("b did not take over")
		}
	})
}

// TestClockTolerance checks the documented bound (Config.ClockTolerance) at its edge,
// with the defaults (ε = 0.2): a leader is cut off from the store after a renew, and a
// follower takes the lease when it expires by its clock. With the leader's clock at
// rate 1−0.95ε and the follower's at 1+0.95ε the follower's term starts after the
// leader's ended; at 1∓1.05ε, beyond the tolerance, the terms overlap.
func TestClockTolerance(t *testing.T) {
	eps := Config{}.ClockTolerance()
	for _, tc := range []struct {
		name    string
		k       float64 // rates 1−kε (leader) and 1+kε (follower)
		overlap bool
	}{
		{"within", 0.95, false},
		{"beyond", 1.05, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slow, fast := 1-tc.k*eps, 1+tc.k*eps
				cl := newCluster(t)
				cl.overlapOK = tc.overlap
				defer cl.stop()
				a := cl.start("a", func(c *Config) { c.Clock = rateClock{start: time.Now(), rate: slow} })
				if cl.waitLeader(nil, time.Second) != a {
					t.Fatal("a did not lead")
				}
				b := cl.start("b", func(c *Config) { c.Clock = rateClock{start: time.Now(), rate: fast} })
				time.Sleep(30*time.Second + 300*time.Millisecond)
				a.store.setMode(modeFail) // cut off after its last renew
				renewSent, _, _ := a.store.times()
				ctx := a.lastCtx()
				<-ctx.Done()
				aEnd := time.Now()
				if cl.waitLeader(a, time.Minute) != b {
					t.Fatal("b did not take over")
				}
				_, started, _, _ := b.snapshot()
				overlap := aEnd.Sub(started[len(started)-1])
				t.Logf("rates %.3f (leader) and %.3f (follower): leader's term ended %v after its last renew was sent; overlap %v",
					slow, fast, aEnd.Sub(renewSent), overlap)
				if got := overlap > 0; got != tc.overlap {
					t.Errorf("terms overlap by %v; want overlap %v", overlap, tc.overlap)
				}
			})
		})
	}
}
