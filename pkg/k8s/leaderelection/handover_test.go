package leaderelection

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestHandOver: the leader hands the lease to a named follower, which takes it on the
// release's watch event; the other follower keeps waiting; the old leader follows.
func TestHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		c := cl.start("c", nil)
		time.Sleep(3 * time.Second)
		ctx := a.lastCtx()
		before, _ := cl.mem.Get(context.Background())
		called := time.Now()
		if err := a.e.HandOver(context.Background(), "c"); err != nil {
			t.Fatalf("HandOver: %v", err)
		}
		if !errors.Is(context.Cause(ctx), ErrHandedOver) || a.e.IsLeader() {
			t.Fatalf("after HandOver: IsLeader %v, cause %v", a.e.IsLeader(), context.Cause(ctx))
		}
		nl := cl.waitLeader(a, time.Second)
		_, started, _, _ := nl.snapshot()
		took := started[0].Sub(called)
		t.Logf("handed over to %s in %v (1ms store latency)", nl.id, took)
		if nl != c || took > 10*time.Millisecond {
			t.Fatalf("new leader %s after %v, want c within 10ms", nl.id, took)
		}
		rec, _ := cl.mem.Get(context.Background())
		if rec.HolderIdentity != "c" || rec.PreferredHolder != "" || rec.LeaseTransitions != before.LeaseTransitions+1 ||
			rec.Marker != holderMarker("c") {
			t.Fatalf("lease after the hand-over %+v", rec)
		}
		time.Sleep(time.Minute)
		if cl.leader() != c || a.e.GetLeader() != "c" || b.e.GetLeader() != "c" {
			t.Fatalf("leader %v, a sees %q, b sees %q; want c", cl.leader(), a.e.GetLeader(), b.e.GetLeader())
		}
		if st := a.e.Stats(); st.HandOvers != 1 {
			t.Errorf("a: stats %+v, want 1 hand-over", st)
		}

		// Bad calls.
		for _, tc := range []struct {
			e      *Elector
			target string
			want   error
		}{
			{a.e, "b", ErrNotLeader}, {c.e, "c", ErrInvalidHandOver}, {c.e, "", ErrInvalidHandOver},
		} {
			if err := tc.e.HandOver(context.Background(), tc.target); !errors.Is(err, tc.want) {
				t.Errorf("%s.HandOver(%q) = %v, want %v", tc.e.Identity(), tc.target, err, tc.want)
			}
		}
	})
}

// TestHandOverBeforeAndAfterStart: HandOver of an elector that is not running reports
// ErrNotLeader.
func TestHandOverBeforeAndAfterStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := NewWithStore(testConfig("a"), NewMemoryStore("lease"), Callbacks{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.HandOver(context.Background(), "b"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("HandOver before Start = %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- e.Start(ctx) }()
		time.Sleep(time.Second)
		cancel()
		<-done
		if err := e.HandOver(context.Background(), "b"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("HandOver after Start = %v", err)
		}
		single, _ := NewWithStore(Config{SingleReplica: true, Identity: "s"}, nil, Callbacks{}, nil)
		if err := single.HandOver(context.Background(), "b"); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("HandOver of a single replica = %v", err)
		}
	})
}

// TestHandOverToAbsentCandidate: a hand-over to a candidate that never comes is taken by
// another one a LeaseDuration after the release, not sooner.
func TestHandOverToAbsentCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		cl.start("b", nil)
		time.Sleep(3 * time.Second)
		if err := a.e.HandOver(context.Background(), "ghost"); err != nil {
			t.Fatal(err)
		}
		_, _, released := a.store.times()
		time.Sleep(DefaultLeaseDuration - 10*time.Millisecond)
		if l := cl.leader(); l != nil {
			t.Fatalf("%s took a lease handed to another candidate before a LeaseDuration", l.id)
		}
		nl := cl.waitLeader(nil, time.Second)
		_, started, _, _ := nl.snapshot()
		t.Logf("%s took over %v after the release", nl.id, started[len(started)-1].Sub(released))
	})
}

// TestPreferredHolderSetByHand: someone names a follower as the lease's preferredHolder
// (as Kubernetes' coordinated leader election does); the leader ends its term and
// releases, and that follower takes the lease at once.
func TestPreferredHolderSetByHand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		cl.start("b", nil)
		c := cl.start("c", nil)
		time.Sleep(3 * time.Second)
		ctx := a.lastCtx()
		rec, _ := cl.mem.Get(context.Background())
		rec.PreferredHolder = "c"
		rec.Strategy = "OldestEmulationVersion"
		set := cl.mem.set(rec)
		at := time.Now()
		nl := cl.waitLeader(a, time.Second)
		_, started, _, _ := nl.snapshot()
		if nl != c || started[0].Sub(at) > 10*time.Millisecond {
			t.Fatalf("new leader %s after %v, want c at once", nl.id, started[0].Sub(at))
		}
		if !errors.Is(context.Cause(ctx), ErrHandedOver) {
			t.Fatalf("a's term ended with %v, want ErrHandedOver", context.Cause(ctx))
		}
		now, _ := cl.mem.Get(context.Background())
		if now.Strategy != set.Strategy || now.PreferredHolder != "" || now.HolderIdentity != "c" {
			t.Fatalf("lease %+v: want strategy kept, preferred holder cleared, holder c", now)
		}
	})
}

// TestForeignClear: another writer clears the holder of a Baton leader's lease, as
// client-go's release after losing the lease does. The leader's term ends; it may take
// the lease back at once (its term is over and nobody else held it), but no other
// candidate may take it before an unknown holder's wait: the last holder's (Baton's)
// lease duration from the clear.
func TestForeignClear(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		time.Sleep(3 * time.Second)
		ctx := a.lastCtx()
		rec, _ := cl.mem.Get(context.Background())
		now := time.Now()
		rec.HolderIdentity, rec.LeaseDuration, rec.AcquireTime, rec.RenewTime = "", time.Second, now, now
		cl.mem.set(rec) // the marker stays "holder:a", as client-go keeps annotations
		synctest.Wait()
		if !errors.Is(context.Cause(ctx), ErrLeaseLost) {
			t.Fatalf("a's term ended with %v, want ErrLeaseLost", context.Cause(ctx))
		}
		if nl := cl.waitLeader(nil, time.Second); nl != a {
			t.Fatalf("%s took the cleared lease, want a back", nl.id)
		}

		// Now b is cut off from seeing a, and a's lease is cleared again while a is cut
		// off too: b must wait as for an unknown holder.
		a.store.setMode(modeHang)
		synctest.Wait()
		rec, _ = cl.mem.Get(context.Background())
		now = time.Now()
		rec.HolderIdentity, rec.LeaseDuration, rec.AcquireTime, rec.RenewTime = "", time.Second, now, now
		cl.mem.set(rec)
		time.Sleep(DefaultLeaseDuration - 10*time.Millisecond)
		if b.e.IsLeader() {
			t.Fatal("b took a lease cleared by a foreign writer before an unknown holder's wait")
		}
		if nl := cl.waitLeader(a, time.Second); nl != b {
			t.Fatalf("new leader %s, want b", nl.id)
		}
		a.store.setMode(modePass)
	})
}
