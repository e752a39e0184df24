package leaderelection

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestDeletedLeaseRelistWaits: a follower that was cut off while the leader
// kept renewing, and that re-lists after the Lease was deleted, must not take the lease
// by the clock of its old observation: the leader (cut off too) still leads until its
// renew deadline.
func TestDeletedLeaseRelistWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		time.Sleep(time.Second)
		b.store.setMode(modeFail) // b sees nothing more of a's renews
		time.Sleep(12 * time.Second)
		a.store.setMode(modeHang) // a is cut off, inside its term
		synctest.Wait()           // its watch closed
		cl.mem.remove()
		time.Sleep(time.Second)
		b.store.setMode(modePass) // b re-lists within a backoff: the lease is absent
		time.Sleep(DefaultRenewDeadline)
		if a.e.IsLeader() {
			t.Fatal("a still leads past its renew deadline")
		}
		nl := cl.waitLeader(a, 3*DefaultLeaseDuration)
		a.store.setMode(modePass)
		t.Logf("%s leads after the delete", nl.id)
	})
}

// TestAbsentAgainAfterGap: a candidate that saw the lease absent, then
// lost contact while another created the lease and the lease was deleted again, must not
// create it on its first attempt after contact returns: it looks again and waits.
func TestAbsentAgainAfterGap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		c := cl.start("c", nil)
		time.Sleep(2 * time.Second)
		a.store.setMode(modeHang) // a is cut off and does not re-create the lease
		synctest.Wait()
		cl.mem.remove() // b and c see it absent, with a's last state: they wait
		synctest.Wait()
		time.Sleep(time.Second)
		b.store.setMode(modeFail) // b is cut off, still waiting out a's term
		if nl := cl.waitLeader(a, 2*DefaultLeaseDuration); nl != c {
			t.Fatalf("leader %s, want c", nl.id)
		}
		a.store.setMode(modePass)
		time.Sleep(5 * time.Second)
		c.store.setMode(modeHang) // c is cut off inside its term
		synctest.Wait()
		cl.mem.remove()
		b.store.setMode(modePass) // b's next Create would go through
		time.Sleep(DefaultRenewDeadline)
		if c.e.IsLeader() {
			t.Fatal("c still leads past its renew deadline")
		}
		c.store.setMode(modePass)
		cl.waitLeader(nil, 2*DefaultLeaseDuration)
	})
}
