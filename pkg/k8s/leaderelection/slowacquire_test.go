package leaderelection

import (
	"testing"
	"testing/synctest"
	"time"
)

// slowCreateScene is the history of chaos seed 4790: c has seen the lease of x, which
// is deleted by hand while x is cut off; after waiting x out, c sends a Create that is
// held on the way (a paused process). Meanwhile d, a cold start, creates the lease and
// leads, is cut off, and the lease is deleted by hand again. c's Create then lands on
// the absent lease, answered three seconds after it was sent, while d still believes it
// leads. It returns c, d, and when c's Create was answered.
func slowCreateScene(t *testing.T, cl *cluster) (c, d *candidate, answered time.Time) {
	t.Helper()
	x := cl.start("x", nil)
	if l := cl.waitLeader(nil, time.Second); l != x {
		t.Fatalf("leader %s, want x", l.id)
	}
	hold := make(chan struct{})
	c = cl.startWith("c", nil, func(s *testStore) { s.beforeCreate = func() { <-hold } })
	time.Sleep(100 * time.Millisecond) // c sees x's lease
	x.store.setMode(modeHang)
	synctest.Wait() // x's watch closed: it does not see the delete
	cl.mem.Delete()
	// c waits a LeaseDuration from the delete, then sends its Create, which is held.
	time.Sleep(DefaultLeaseDuration + 100*time.Millisecond)
	if n := c.store.count("Create"); n != 1 {
		t.Fatalf("c sent %d Creates, want 1 (held)", n)
	}
	d = cl.start("d", nil) // a cold start: creates the absent lease at once
	if l := cl.waitLeader(nil, time.Second); l != d {
		t.Fatalf("leader %s, want d", l.id)
	}
	time.Sleep(500 * time.Millisecond)
	d.store.setMode(modeHang) // d leads on, by its clock, for up to a RenewDeadline
	synctest.Wait()
	cl.mem.Delete()
	time.Sleep(2500 * time.Millisecond)
	close(hold) // c's Create lands on the absent lease
	synctest.Wait()
	answered = time.Now()
	if r, err := cl.mem.Get(t.Context()); err != nil || r.HolderIdentity != "c" {
		t.Fatalf("lease %+v, %v; want c's Create applied", r, err)
	}
	return c, d, answered
}

// TestSlowCreateWaitsOutUnseenHolders: an acquiring Create answered more than a
// RetryPeriod after it was sent may have landed after states its candidate never saw
// (here d's term, deleted by hand). The candidate must not lead at once: it keeps the
// lease, renewing it, and leads a LeaseDuration after the answer, when any holder of
// those states has reached its RenewDeadline. Before the fix c led at once beside d
// (the cluster's poller and c's OnStartedLeading report two leaders).
func TestSlowCreateWaitsOutUnseenHolders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		c, d, answered := slowCreateScene(t, cl)
		if c.e.IsLeader() {
			t.Fatalf("c leads at once on a Create answered after %v", 3*time.Second)
		}
		if got := c.e.GetLeader(); got != "c" {
			t.Errorf("c sees leader %q while holding the lease, want c", got)
		}
		renews := c.store.count("Update")
		l := cl.waitLeader(d, DefaultLeaseDuration+DefaultRetryPeriod)
		if l != c {
			t.Fatalf("leader %s, want c", l.id)
		}
		started := time.Since(answered)
		if started < DefaultLeaseDuration {
			t.Errorf("c led %v after its slow Create's answer, want at least a LeaseDuration", started)
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
	})
}
