package leaderelection

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeLiveness is a Liveness for the cluster's candidates: each candidate it pumps
// renews its liveness record every RetryPeriod (pump), which the source shows at once,
// unless the candidate's record is hidden (a member watch that hangs silently): then
// only Confirm's fresh read shows it.
type fakeLiveness struct {
	// mu guards the fields below.
	mu      sync.Mutex
	looked  time.Time
	signs   map[string]time.Time // by holder+"/"+incarnation: the last sign shown
	truth   map[string]time.Time // the last renew made, shown or not
	hidden  map[string]bool
	gone    map[string]bool // candidates Gone reports
	reads   int
	readErr error
}

func newFakeLiveness() *fakeLiveness {
	return &fakeLiveness{looked: time.Now(), signs: map[string]time.Time{}, truth: map[string]time.Time{}, hidden: map[string]bool{},
		gone: map[string]bool{}}
}

func (f *fakeLiveness) Gone(candidate string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone[candidate]
}

func (f *fakeLiveness) LastSign(holder, inc string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at, ok := f.signs[holder+"/"+inc]; ok {
		return at, true
	}
	return f.looked, true
}

func (f *fakeLiveness) Confirm(_ context.Context, holder, inc string, sign time.Time) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.readErr != nil {
		return false, f.readErr
	}
	k := holder + "/" + inc
	if at, ok := f.signs[k]; ok && !at.Equal(sign) {
		return false, nil
	}
	if f.truth[k].After(f.signs[k]) {
		f.signs[k] = time.Now() // seen now, by the fresh read
		return false, nil
	}
	return true, nil
}

// renewed records a renew of k's record, shown unless hidden.
func (f *fakeLiveness) renewed(k string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.truth[k] = time.Now()
	if !f.hidden[k] {
		f.signs[k] = time.Now()
	}
}

func (f *fakeLiveness) set(fn func(f *fakeLiveness)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// pump renews c's liveness record every RetryPeriod while on() and tells c's elector,
// until ctx ends.
func (f *fakeLiveness) pump(ctx context.Context, c *candidate, inc string, on func() bool) {
	for ctx.Err() == nil {
		if on() {
			sent := time.Now()
			f.renewed(c.id + "/" + inc)
			c.e.LivenessRenewed(sent)
		}
		select {
		case <-ctx.Done():
		case <-time.After(DefaultRetryPeriod):
		}
	}
}

// withLiveness sets Liveness and an incarnation of id.
func withLiveness(l Liveness, inc string) func(*Config) {
	return func(c *Config) { c.Liveness, c.Incarnation = l, inc }
}

// TestLivenessLeaderWritesOnce: with Config.Liveness a leader whose liveness record
// is renewed writes the lease once (its acquisition) and keeps leading for 10
// LeaseDurations; the follower never takes it.
func TestLivenessLeaderWritesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeLiveness()
		a := cl.start("a", withLiveness(live, "a-1"))
		go live.pump(cl.ctx, a, "a-1", func() bool { return true })
		cl.waitLeader(nil, time.Second)
		b := cl.start("b", withLiveness(live, "b-1"))
		go live.pump(cl.ctx, b, "b-1", func() bool { return true })
		time.Sleep(10 * DefaultLeaseDuration)
		if !a.e.IsLeader() {
			t.Fatal("a stopped leading although its liveness record was renewed")
		}
		if n := a.store.count("Update") + a.store.count("Create"); n != 1 {
			t.Fatalf("a wrote the lease %d times in 10 LeaseDurations, want 1 (its acquisition): %v", n, a.store.counts())
		}
		if n := b.store.count("Update") + b.store.count("Create"); n != 0 {
			t.Fatalf("b wrote the lease %d times, want none: %v", n, b.store.counts())
		}
	})
}

// TestLivenessTermEndsAndReleases: a leader told of no renew of its liveness record
// stops leading RenewDeadline after its acquisition and releases the lease, so a
// follower takes it at once.
func TestLivenessTermEndsAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeLiveness()
		a := cl.start("a", withLiveness(live, "a-1"))
		cl.waitLeader(nil, time.Second)
		_, started, _, _ := a.snapshot()
		b := cl.start("b", withLiveness(live, "b-1"))
		go live.pump(cl.ctx, b, "b-1", func() bool { return true })
		cl.waitLeader(a, 2*DefaultLeaseDuration)
		_, _, endedAt, _ := a.snapshot()
		if len(endedAt) == 0 {
			t.Fatal("a's term did not end")
		}
		if d := endedAt[0].Sub(started[0]); d > DefaultRenewDeadline+promptly {
			t.Fatalf("a's term lasted %v, want at most RenewDeadline %v", d, DefaultRenewDeadline)
		}
		_, bStarted, _, _ := b.snapshot()
		if d := bStarted[0].Sub(endedAt[0]); d > promptly {
			t.Fatalf("b took the lease %v after a's term ended, want at once (a released it)", d)
		}
	})
}

// TestLivenessSilentHolderIsConfirmed: a holder cut off from the store whose
// liveness record stops changing loses the lease a LeaseDuration after its last sign,
// and only once the fresh read found the record quiet; while the read shows renews
// the watch hid, or fails, nobody takes it.
func TestLivenessSilentHolderIsConfirmed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeLiveness()
		var mu sync.Mutex
		aRenews := true
		aOn := func() bool { mu.Lock(); defer mu.Unlock(); return aRenews }
		a := cl.start("a", withLiveness(live, "a-1"))
		go live.pump(cl.ctx, a, "a-1", aOn)
		cl.waitLeader(nil, time.Second)
		b := cl.start("b", withLiveness(live, "b-1"))
		go live.pump(cl.ctx, b, "b-1", func() bool { return true })
		time.Sleep(DefaultLeaseDuration)
		// a's record keeps being renewed, but b's view hangs: the read finds it.
		live.set(func(f *fakeLiveness) { f.hidden["a/a-1"] = true })
		a.store.setMode(modeFail)
		time.Sleep(3 * DefaultLeaseDuration)
		if !a.e.IsLeader() || b.e.IsLeader() {
			t.Fatalf("a leads %v, b leads %v: b took the lease of a holder renewing unseen", a.e.IsLeader(), b.e.IsLeader())
		}
		live.set(func(f *fakeLiveness) { f.readErr = errors.New("read failed") })
		mu.Lock()
		aRenews = false
		stoppedAt := time.Now()
		mu.Unlock()
		time.Sleep(3 * DefaultLeaseDuration)
		if b.e.IsLeader() {
			t.Fatal("b took the lease while the fresh read of the holder's record failed")
		}
		// The first read that works shows a renew b had not seen (a's last one, after
		// b's last read): b waits a LeaseDuration from that read, reads again, takes.
		live.set(func(f *fakeLiveness) { f.readErr = nil })
		l := cl.waitLeader(a, DefaultLeaseDuration+3*DefaultRetryPeriod)
		if l != b {
			t.Fatalf("%s leads, want b", l.id)
		}
		_, _, endedAt, _ := a.snapshot()
		if len(endedAt) == 0 || endedAt[0].After(stoppedAt.Add(DefaultRenewDeadline)) {
			t.Fatalf("a's term ended at %v, want by RenewDeadline after its last renew", endedAt)
		}
		a.store.setMode(modePass)
	})
}

// TestLivenessTakesOwnLeaseBack: a candidate whose term missed its deadline while
// its writes failed (the lease still names it, and its release failed) takes the
// lease back when it can write again, by a LeaseDuration after its term ended (the
// hold-back of a release), without anyone else's help.
func TestLivenessTakesOwnLeaseBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeLiveness()
		var mu sync.Mutex
		aRenews := true
		a := cl.start("a", withLiveness(live, "a-1"))
		go live.pump(cl.ctx, a, "a-1", func() bool { mu.Lock(); defer mu.Unlock(); return aRenews })
		cl.waitLeader(nil, time.Second)
		cl.start("b", func(c *Config) { withLiveness(live, "b-1")(c); followOnly(c) })
		mu.Lock()
		aRenews = false
		mu.Unlock()
		a.store.setMode(modeFail) // the release after the missed deadline fails
		time.Sleep(DefaultRenewDeadline + DefaultRetryPeriod)
		if a.e.IsLeader() {
			t.Fatal("a leads past its deadline")
		}
		a.store.setMode(modePass)
		mu.Lock()
		aRenews = true
		mu.Unlock()
		cl.waitLeader(nil, 2*DefaultLeaseDuration)
		if terms, _, _, _ := a.snapshot(); len(terms) != 2 {
			t.Fatalf("a led %d terms, want 2 (it took its own lease back)", len(terms))
		}
	})
}

// TestLivenessConfig: Liveness needs an incarnation, and SingleReplica refuses it.
func TestLivenessConfig(t *testing.T) {
	live := newFakeLiveness()
	_, err := NewWithStore(Config{Identity: "a", LeaseName: "l", LeaseNamespace: "n", Liveness: live}, NewMemoryStore("l"), Callbacks{}, nil)
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "Incarnation" {
		t.Fatalf("Liveness without Incarnation: %v, want a ConfigError naming Incarnation", err)
	}
	_, err = NewWithStore(Config{Identity: "a", SingleReplica: true, Liveness: live}, nil, Callbacks{}, nil)
	if !errors.As(err, &ce) || ce.Field != "Liveness" {
		t.Fatalf("SingleReplica with Liveness: %v, want a ConfigError naming Liveness", err)
	}
}

// TestLivenessDeletedLeaseReleased: a lease deleted by hand under a leader whose
// liveness record stays renewed ends its term; while it may not campaign for the
// lease, it creates the lease as its release, so that the follower (which would wait
// for its liveness record to go quiet) takes it at once.
func TestLivenessDeletedLeaseReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeLiveness()
		a := cl.start("a", withLiveness(live, "a-1"))
		go live.pump(cl.ctx, a, "a-1", func() bool { return true })
		cl.waitLeader(nil, time.Second)
		b := cl.start("b", withLiveness(live, "b-1"))
		go live.pump(cl.ctx, b, "b-1", func() bool { return true })
		time.Sleep(DefaultRetryPeriod)
		a.e.SetCampaigning(false)
		deleted := time.Now()
		cl.mem.remove()
		if l := cl.waitLeader(a, DefaultRetryPeriod); l != b {
			t.Fatalf("%s leads, want b", l.id)
		}
		if _, started, _, _ := b.snapshot(); started[0].Sub(deleted) > promptly {
			t.Fatalf("b took the lease %v after the delete, want at once after a's release", started[0].Sub(deleted))
		}
	})
}

// TestLivenessHandOverToGoneCandidate: with Config.Liveness, a lease handed over to a
// candidate that never takes it waits for that candidate while the source counts it
// (half a LeaseDuration here, no leader), and is taken within milliseconds once the
// source reports it gone and says so (LivenessChanged), not a LeaseDuration after the
// release. (Before Liveness.Gone, the follower waited the LeaseDuration out.)
func TestLivenessHandOverToGoneCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeLiveness()
		a := cl.start("a", withLiveness(live, "a-1"))
		go live.pump(cl.ctx, a, "a-1", func() bool { return true })
		cl.waitLeader(nil, time.Second)
		b := cl.start("b", withLiveness(live, "b-1"))
		go live.pump(cl.ctx, b, "b-1", func() bool { return true })
		time.Sleep(time.Second)
		if err := a.e.HandOver(context.Background(), "ghost"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultLeaseDuration / 2)
		if l := cl.leader(); l != nil {
			t.Fatalf("%s took a lease handed to a candidate the source still counts", l.id)
		}
		gone := time.Now()
		live.set(func(f *fakeLiveness) { f.gone["ghost"] = true })
		a.e.LivenessChanged()
		b.e.LivenessChanged()
		nl := cl.waitLeader(nil, DefaultLeaseDuration)
		_, started, _, _ := nl.snapshot()
		if took := started[len(started)-1].Sub(gone); took > promptly {
			t.Fatalf("%s took the lease %v after its named candidate was reported gone, want at most %v", nl.id, took, promptly)
		}
	})
}
