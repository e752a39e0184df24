package leaderelection

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestResign: a leader that resigns ends its term with cause ErrResigned,
// releases the lease, and a follower takes over on the watch event, well
// before a LeaseDuration; the resigned candidate does not take the lease
// back, and Resign of a term not led does nothing.
func TestResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		if !a.e.IsLeader() {
			t.Fatal("a does not lead")
		}
		b := cl.start("b", nil)
		time.Sleep(time.Second)
		term := a.e.Term()
		if a.e.Resign(term + 1) {
			t.Fatal("Resign of a term not led returned true")
		}
		if !a.e.IsLeader() {
			t.Fatal("Resign of another term ended the term")
		}
		resignedAt := time.Now()
		if !a.e.Resign(term) {
			t.Fatal("Resign of the term led returned false")
		}
		if a.e.IsLeader() {
			t.Fatal("a still leads after Resign")
		}
		if a.e.Resign(term) {
			t.Error("a second Resign returned true")
		}
		ctx := a.lastCtx()
		if cause := context.Cause(ctx); !errors.Is(cause, ErrResigned) {
			t.Errorf("term cause %v, want ErrResigned", cause)
		}
		nl := cl.waitLeader(a, time.Second)
		if nl != b {
			t.Fatalf("%s leads after a resigned, want b", nl.id)
		}
		_, started, _, _ := b.snapshot()
		if took := started[0].Sub(resignedAt); took >= 100*time.Millisecond {
			t.Errorf("b took over %v after the resignation, want < 100ms", took)
		}
		// a must not grab the lease back: it holds off its next campaign,
		// and b renews.
		time.Sleep(30 * time.Second)
		if l := cl.leader(); l != b {
			t.Fatalf("leader %v 30s after the resignation, want b", l)
		}
	})
}

// TestResignDisabled: a replica leading alone has nobody to hand over to.
func TestResignDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, err := NewWithStore(Config{SingleReplica: true, Identity: "solo"}, nil, Callbacks{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Start(ctx) }()
		synctest.Wait()
		if e.Resign(1) || !e.IsLeader() {
			t.Error("Resign ended the term of a replica leading alone")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}

// TestHandOverToResignerTakenAtOnce: the LeaseDuration a resigned candidate holds its
// next campaign back does not delay a hand-over to it: another candidate chose it.
// Before, a hand-over to a candidate that had just resigned waited out its hold-back:
// in test/chaos/sharded's seed 3620, a replica whose shard term ended during a cut
// saw a one-write hand-off of that shard back 1.8s late, with 86ms of the term left,
// and the shard went ownerless for 3s more. Both a release naming it and a one-write
// hand-off (HandOffs) are taken at once.
func TestHandOverToResignerTakenAtOnce(t *testing.T) {
	for _, oneWrite := range []bool{false, true} {
		t.Run(map[bool]string{false: "release", true: "hand-off"}[oneWrite], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl := newCluster(t)
				defer cl.stop()
				start := func(id string) *candidate { return cl.start(id, nil) }
				if oneWrite {
					live := newFakeHandOffs()
					start = func(id string) *candidate { return startHandOffs(cl, live, id, func() bool { return true }) }
				}
				b := start("b")
				cl.waitLeader(nil, time.Second)
				a := start("a")
				time.Sleep(time.Second)
				if !b.e.Resign(b.e.Term()) {
					t.Fatal("b did not resign")
				}
				if l := cl.waitLeader(b, time.Second); l != a {
					t.Fatalf("%s leads after b resigned, want a", l.id)
				}
				handedAt := time.Now()
				if err := a.e.HandOver(context.Background(), "b"); err != nil {
					t.Fatal(err)
				}
				if l := cl.waitLeader(a, DefaultLeaseDuration); l != b {
					t.Fatalf("%v leads after a handed over to b, want b", l)
				}
				_, started, _, _ := b.snapshot()
				if took := started[len(started)-1].Sub(handedAt); took > promptly {
					t.Errorf("b led %v after a handed the lease to it, want at once (not after its resign's hold-back)", took)
				}
			})
		})
	}
}
