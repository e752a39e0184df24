package leaderelection

import (
	"testing"
	"testing/synctest"
	"time"
)

// slowCreateScene is the history of chaos seed 4790: c has seen the lease of x, which
// is deleted by hand while x is cut off; after waiting x out, c sends a Create that is
// held on the way (a paused process, a slow network). With buffered its watch buffers
// events as a Kubernetes client's does; without, it skips to the latest state, here c's
// own, as a paused process's watch shows nothing of the time it was paused. Meanwhile d, a cold start,
// creates the lease and leads; after dLeads d is cut off and the lease is deleted by
// hand again; after afterDelete c's Create lands on the absent lease, while d still
// believes it leads. It returns c, d, and when c's Create was answered.
// With loseReply the Create's reply is lost (it was applied).
func slowCreateScene(t *testing.T, cl *cluster, dLeads, afterDelete time.Duration, buffered, loseReply bool) (c, d *candidate, sent, answered time.Time) {
	t.Helper()
	x := cl.start("x", nil)
	if l := cl.waitLeader(nil, time.Second); l != x {
		t.Fatalf("leader %s, want x", l.id)
	}
	hold := make(chan struct{})
	sentAt := make(chan time.Time, 1)
	c = cl.startWith("c", nil, func(s *testStore) {
		s.buffered, s.loseCreateReply = buffered, loseReply
		s.beforeCreate = func() {
			sentAt <- time.Now()
			<-hold
		}
	})
	time.Sleep(100 * time.Millisecond) // c sees x's lease
	x.store.setMode(modeHang)
	synctest.Wait() // x's watch closed: it does not see the delete
	cl.mem.remove()
	// c waits a LeaseDuration from the delete, then sends its Create, which is held.
	time.Sleep(DefaultLeaseDuration + 100*time.Millisecond)
	if n := c.store.count("Create"); n != 1 {
		t.Fatalf("c sent %d Creates, want 1 (held)", n)
	}
	d = cl.start("d", nil) // a cold start: creates the absent lease at once
	if l := cl.waitLeader(nil, time.Second); l != d {
		t.Fatalf("leader %s, want d", l.id)
	}
	time.Sleep(dLeads)
	d.store.setMode(modeHang) // d leads on, by its clock, for up to a RenewDeadline
	synctest.Wait()
	cl.mem.remove()
	time.Sleep(afterDelete)
	close(hold) // c's Create lands on the absent lease
	synctest.Wait()
	answered = time.Now()
	if r, err := cl.mem.Get(t.Context()); err != nil || r.HolderIdentity != "c" {
		t.Fatalf("lease %+v, %v; want c's Create applied", r, err)
	}
	return c, d, <-sentAt, answered
}

// TestSlowCreateWaitsOutUnseenHolders: an acquiring Create answered more than a
// RetryPeriod after it was sent (three seconds; c's watch shows nothing of d) may have landed after states its candidate never saw (here d's term, deleted by
// hand). The candidate must not lead at once: it keeps the lease, renewing it, and
// leads a LeaseDuration after the answer, when any holder of those states has reached
// its RenewDeadline. Before the fix c led at once beside d (the cluster's poller and
// c's OnStartedLeading report two leaders).
func TestSlowCreateWaitsOutUnseenHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		c, d, sent, answered := slowCreateScene(t, cl, 500*time.Millisecond, 2500*time.Millisecond, false, false)
		if answered.Sub(sent) <= DefaultRetryPeriod {
			t.Fatalf("c's Create took %v, want over a RetryPeriod", answered.Sub(sent))
		}
		checkHeld(t, cl, c, d, answered)
	})
}

// TestCreateAfterWatchedHolderWaits: c's Create is answered within a RetryPeriod, but
// its watch delivered d's lease and its delete, which came between the absence c acted
// on and c's Create: c must wait as above. Before the fix c led at once beside d.
func TestCreateAfterWatchedHolderWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		c, d, sent, answered := slowCreateScene(t, cl, 300*time.Millisecond, 300*time.Millisecond, true, false)
		if answered.Sub(sent) > DefaultRetryPeriod {
			t.Fatalf("c's Create took %v, want within a RetryPeriod", answered.Sub(sent))
		}
		checkHeld(t, cl, c, d, answered)
	})
}

// TestLostReplyCreateAfterWatchedHolder: as TestCreateAfterWatchedHolderWaits, but
// c's Create's reply is lost: c learns that it landed only from its watch, which showed
// d's lease and its delete before it. c must not take its own record back at once
// while d may still lead.
func TestLostReplyCreateAfterWatchedHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		c, d, _, answered := slowCreateScene(t, cl, 300*time.Millisecond, 300*time.Millisecond, true, true)
		l := cl.waitLeader(d, 3*DefaultLeaseDuration)
		t.Logf("%s leads %v after c's Create's lost answer", l.id, time.Since(answered))
		_, _, dEnded, _ := d.snapshot()
		_, cStarted, _, _ := c.snapshot()
		if len(dEnded) != 1 || len(cStarted) == 0 || cStarted[0].Before(dEnded[0]) {
			t.Errorf("d's term ended at %v, c's began at %v", dEnded, cStarted)
		}
	})
}

// checkHeld checks that c, whose Create was answered at answered, holds the lease
// without leading, renewing it, and leads a LeaseDuration after the answer, after d.
func checkHeld(t *testing.T, cl *cluster, c, d *candidate, answered time.Time) {
	t.Helper()
	if c.e.IsLeader() {
		t.Fatalf("c leads at once on a Create that may have landed after d's term")
	}
	if got := c.e.GetLeader(); got != "c" {
		t.Errorf("c sees leader %q while holding the lease, want c", got)
	}
	renews := c.store.count("Update")
	l := cl.waitLeader(d, DefaultLeaseDuration+DefaultRetryPeriod)
	if l != c {
		t.Fatalf("leader %s, want c", l.id)
	}
	if took := time.Since(answered); took < DefaultLeaseDuration {
		t.Errorf("c led %v after its Create's answer, want at least a LeaseDuration", took)
	}
	if n := c.store.count("Update") - renews; n < int(DefaultLeaseDuration/DefaultRetryPeriod)-1 {
		t.Errorf("c renewed %d times while waiting, want one every RetryPeriod", n)
	}
	_, _, dEnded, _ := d.snapshot()
	_, cStarted, _, _ := c.snapshot()
	if len(dEnded) != 1 || len(cStarted) != 1 || cStarted[0].Before(dEnded[0]) {
		// The poller and OnStartedLeading check it too.
		t.Errorf("d's term ended at %v, c's began at %v", dEnded, cStarted)
	}
	if got := c.e.Stats().SlowAcquires; got != 1 {
		t.Errorf("Stats().SlowAcquires = %d, want 1", got)
	}
}

// TestHeldTermNeedsItsRenews: while c holds the lease of a slow Create, its renews
// fail: the held term is given up and never starts, also when its time comes. Once the
// store answers again, c takes its lease back as any follower would (a LeaseDuration
// after it sees it again, as its watch was down).
func TestHeldTermNeedsItsRenews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		c, d, _, _ := slowCreateScene(t, cl, 500*time.Millisecond, 2500*time.Millisecond, false, false)
		c.store.setMode(modeFail)
		time.Sleep(DefaultLeaseDuration + 2*DefaultRetryPeriod)
		if terms, _, _, _ := c.snapshot(); len(terms) != 0 || c.e.IsLeader() {
			t.Fatalf("c started terms %v while its renews failed", terms)
		}
		c.store.setMode(modePass)
		healed := time.Now()
		if l := cl.waitLeader(d, DefaultLeaseDuration+2*DefaultRetryPeriod); l != c {
			t.Fatalf("leader %s, want c", l.id)
		}
		if took := time.Since(healed); took < DefaultLeaseDuration {
			t.Errorf("c led %v after the store answered again, want a LeaseDuration", took)
		}
	})
}

// TestHeldTermGivenUpOnAnotherHolder: while c holds the lease of a slow Create,
// someone writes another holder into it: the held term never starts, and c waits that
// holder out as a follower.
func TestHeldTermGivenUpOnAnotherHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		c, _, _, answered := slowCreateScene(t, cl, 500*time.Millisecond, 2500*time.Millisecond, false, false)
		time.Sleep(100 * time.Millisecond) // after c's first renew: its watch shows z
		r, err := cl.mem.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		r.HolderIdentity, r.Marker = "z", ""
		cl.mem.set(r)
		time.Sleep(time.Until(answered.Add(DefaultLeaseDuration + DefaultRetryPeriod)))
		if terms, _, _, _ := c.snapshot(); len(terms) != 0 || c.e.IsLeader() {
			t.Fatalf("c started terms %v after z took the lease", terms)
		}
		if got := c.e.GetLeader(); got != "z" {
			t.Errorf("c sees leader %q, want z", got)
		}
	})
}
