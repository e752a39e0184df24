package leaderelection

import (
	"context"
	"strconv"
	"testing"
	"testing/synctest"
	"time"
)

// The regression tests of the defects of issue 9, each failing on the elector before
// its fix. The cluster's poller fails any of them on two leaders at once.

// TestDeletedLeaseRelistWaits (defect 1): a follower that was cut off while the leader
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
		cl.mem.Delete()
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

// TestLostRenewReply (defect 3): the reply to a renew that went through is lost and the
// leader's watch is silent; the retry conflicts with the leader's own write. The leader
// must recognise its write and keep its term.
func TestLostRenewReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.startWith("a", nil, func(s *testStore) { s.silent = true })
		time.Sleep(time.Second)
		cl.start("b", nil)
		time.Sleep(time.Second)
		term := a.e.Term()
		a.store.mu.Lock()
		a.store.loseReplies = 1
		a.store.mu.Unlock()
		time.Sleep(time.Minute)
		if !a.e.IsLeader() || a.e.Term() != term {
			terms, _, _, _ := a.snapshot()
			t.Fatalf("a: IsLeader %v, term %d (terms %v), want term %d kept", a.e.IsLeader(), a.e.Term(), terms, term)
		}
	})
}

// rewind moves the store back to an earlier state and resourceVersion, as an etcd
// restore from a backup does, and ends every watch (the API server restarts).
func rewind(s *MemoryStore, to LeaseRecord) {
	v, _ := parseVersion(to.ResourceVersion)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version, s.record, s.exists = v, to, true
	for ch := range s.watchers {
		delete(s.watchers, ch)
		close(ch)
	}
}

// TestVersionGoesBackwards (defect 4): after the store's history is rewound below the
// versions every candidate has seen, the candidates must not wedge: one leads again,
// under a term above each of its earlier terms, and never two at once.
func TestVersionGoesBackwards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		time.Sleep(5 * time.Second)
		snapshot, err := cl.mem.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Minute)
		a.store.setMode(modeHang)
		if nl := cl.waitLeader(a, time.Minute); nl != b {
			t.Fatalf("leader %s, want b", nl.id)
		}
		a.store.setMode(modePass)
		time.Sleep(time.Minute)
		bTerm := b.e.Term()
		if v, _ := parseVersion(snapshot.ResourceVersion); v >= bTerm {
			t.Fatalf("snapshot version %d not below b's term %d", v, bTerm)
		}
		rewind(cl.mem, snapshot)
		restoredAt := time.Now()
		time.Sleep(time.Second)
		if l := cl.leader(); l != nil {
			t.Fatalf("%s still leads a second after the history was rewound", l.id)
		}
		nl := cl.waitLeader(nil, 5*DefaultLeaseDuration)
		t.Logf("%s leads %v after the rewind", nl.id, time.Since(restoredAt))
		for _, c := range []*candidate{a, b} {
			terms, _, _, _ := c.snapshot()
			for i := 1; i < len(terms); i++ {
				if terms[i] <= terms[i-1] {
					t.Errorf("%s: terms %v not increasing", c.id, terms)
				}
			}
		}
		rec, _ := cl.mem.Get(context.Background())
		if rec.HolderIdentity != nl.id || rec.ResourceVersion == "" {
			t.Fatalf("lease %+v, want held by %s", rec, nl.id)
		}
		if _, err := strconv.ParseUint(rec.ResourceVersion, 10, 64); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDerivedContextSeesLazyExpiry (defect 7): a context derived from the term context
// reports the end of the term as soon as anything on its chain is asked, even before the
// timer ran (a process resumed after SIGSTOP).
func TestDerivedContextSeesLazyExpiry(t *testing.T) {
	start := time.Now()
	clock := &fakeClock{now: start}
	tc := newTermContextClock(context.Background(), 7, start, 10*time.Second, clock.Now)
	defer tc.end(context.Canceled)
	child, cancel := context.WithCancel(tc)
	defer cancel()
	grandchild, cancel2 := context.WithTimeout(child, time.Hour)
	defer cancel2()
	clock.now = start.Add(10 * time.Second)
	if term, ok := TermFromContext(grandchild); !ok || term != 7 {
		t.Fatalf("TermFromContext = %d, %v", term, ok)
	}
	if grandchild.Err() == nil || child.Err() == nil {
		t.Fatalf("derived contexts live past the renew deadline: child %v, grandchild %v", child.Err(), grandchild.Err())
	}
}
