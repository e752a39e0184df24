package leaderelection

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeHandOffs is a fakeLiveness with HandOffs: every renew its pump makes gets a
// version of its own, whose send Cited returns; HandOff cites a candidate's last
// one; Left reports a candidate marked left.
type fakeHandOffs struct {
	*fakeLiveness

	// mu guards the fields below.
	mu    sync.Mutex
	next  int
	sent  map[string]time.Time // by version
	last  map[string]string    // by candidate: the version of its last renew
	inc   map[string]string    // by candidate: its incarnation
	left  map[string]bool
	stale time.Duration // Cited answers this much earlier than the send
}

func newFakeHandOffs() *fakeHandOffs {
	return &fakeHandOffs{fakeLiveness: newFakeLiveness(), sent: map[string]time.Time{}, last: map[string]string{},
		inc: map[string]string{}, left: map[string]bool{}}
}

// renewedAs records a renew of candidate id's record, incarnation inc, sent at sent.
func (f *fakeHandOffs) renewedAs(id, inc string, sent time.Time) {
	f.renewed(id + "/" + inc)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	v := fmt.Sprint(f.next)
	f.sent[v], f.last[id], f.inc[id] = sent, v, inc
}

// pumpHandOffs renews c's record every RetryPeriod while on(), as fakeLiveness.pump.
func (f *fakeHandOffs) pumpHandOffs(ctx context.Context, c *candidate, inc string, on func() bool) {
	for ctx.Err() == nil {
		if on() {
			sent := time.Now()
			f.renewedAs(c.id, inc, sent)
			c.e.LivenessRenewed(sent)
		}
		select {
		case <-ctx.Done():
		case <-time.After(DefaultRetryPeriod):
		}
	}
}

func (f *fakeHandOffs) HandOff(candidate string) (string, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.last[candidate]
	return f.inc[candidate], v, ok
}

func (f *fakeHandOffs) Cited(cite string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.sent[cite]
	return at.Add(-f.stale), ok
}

// Accept is every candidate's: none leaves here.
func (f *fakeHandOffs) Accept() bool { return true }

func (f *fakeHandOffs) Left(holder, incarnation string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.left[holder] && f.inc[holder] == incarnation
}

func (f *fakeHandOffs) setHandOffs(fn func(f *fakeHandOffs)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

var _ HandOffs = (*fakeHandOffs)(nil)

// startHandOffs starts candidate id, incarnation id+"-1", with live as its Liveness
// and HandOffs, its record renewed every RetryPeriod while on().
func startHandOffs(cl *cluster, live *fakeHandOffs, id string, on func() bool) *candidate {
	c := cl.start(id, withLiveness(live, id+"-1"))
	go live.pumpHandOffs(cl.ctx, c, id+"-1", on)
	return c
}

// TestHandOffIsOneWrite: with HandOffs, a hand-over is one write, the holder's: the
// new holder leads on its event, at once, with no write of its own, and leads on
// while its liveness record is renewed; once its renewals stop, its term ends by
// RenewDeadline after the send of the last one (the hand-off cited the one before).
func TestHandOffIsOneWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeHandOffs()
		on := func() bool { return true }
		a := startHandOffs(cl, live, "a", on)
		cl.waitLeader(nil, time.Second)
		var mu sync.Mutex
		bRenews := true
		b := startHandOffs(cl, live, "b", func() bool { mu.Lock(); defer mu.Unlock(); return bRenews })
		time.Sleep(DefaultRetryPeriod + time.Second)
		if err := a.e.HandOver(context.Background(), "b"); err != nil {
			t.Fatal(err)
		}
		if l := cl.waitLeader(a, promptly); l != b {
			t.Fatalf("%s leads, want b", l.id)
		}
		_, _, aEnded, _ := a.snapshot()
		_, bStarted, _, _ := b.snapshot()
		if d := bStarted[0].Sub(aEnded[0]); d > promptly {
			t.Fatalf("b led %v after a's term ended, want at once", d)
		}
		if n := a.store.count("Update") + a.store.count("Create"); n != 2 {
			t.Fatalf("a wrote the lease %d times, want 2 (its acquisition and the hand-off): %v", n, a.store.counts())
		}
		if n := b.store.count("Update") + b.store.count("Create"); n != 0 {
			t.Fatalf("b wrote the lease %d times, want none: %v", n, b.store.counts())
		}
		if st := b.e.Stats(); st.HandedOffTerms != 1 {
			t.Fatalf("b's HandedOffTerms = %d, want 1", st.HandedOffTerms)
		}
		time.Sleep(5 * DefaultLeaseDuration)
		if !b.e.IsLeader() {
			t.Fatal("b stopped leading although its liveness record was renewed")
		}
		mu.Lock()
		bRenews = false
		mu.Unlock()
		var lastRenew time.Time
		live.setHandOffs(func(f *fakeHandOffs) { lastRenew = f.sent[f.last["b"]] })
		time.Sleep(DefaultLeaseDuration)
		if _, _, ended, _ := b.snapshot(); len(ended) != 1 || ended[0].After(lastRenew.Add(DefaultRenewDeadline+promptly)) {
			t.Fatalf("b's term ended at %v, want by RenewDeadline after its last renew at %v", ended, lastRenew)
		}
	})
}

// TestHandOffSeenLateIsTakenWithAWrite: a hand-off whose cited send is more than a
// RenewDeadline old by the time the new holder sees it (a watch that lagged, a
// paused process) starts no term by itself: the new holder takes the lease with a
// write of its own, as a release naming it, and leads from that write.
func TestHandOffSeenLateIsTakenWithAWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeHandOffs()
		on := func() bool { return true }
		a := startHandOffs(cl, live, "a", on)
		cl.waitLeader(nil, time.Second)
		b := startHandOffs(cl, live, "b", on)
		time.Sleep(DefaultRetryPeriod + time.Second)
		live.setHandOffs(func(f *fakeHandOffs) { f.stale = DefaultRenewDeadline })
		if err := a.e.HandOver(context.Background(), "b"); err != nil {
			t.Fatal(err)
		}
		if l := cl.waitLeader(a, promptly); l != b {
			t.Fatalf("%s leads, want b", l.id)
		}
		if n := b.store.count("Update"); n != 1 {
			t.Fatalf("b wrote the lease %d times, want 1 (its take): %v", n, b.store.counts())
		}
		if st := b.e.Stats(); st.HandedOffTerms != 0 {
			t.Fatalf("b's HandedOffTerms = %d, want 0", st.HandedOffTerms)
		}
	})
}

// TestHandOffToLeaverTakenAtOnce: a hand-off to a candidate that never takes it is
// waited for as any holder's lease while the source counts that candidate (a
// LeaseDuration from its signs), and taken at once by a campaigning follower once
// the source reports that the candidate left without claiming it (Left).
func TestHandOffToLeaverTakenAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		live := newFakeHandOffs()
		on := func() bool { return true }
		a := startHandOffs(cl, live, "a", on)
		cl.waitLeader(nil, time.Second)
		c := startHandOffs(cl, live, "c", on)
		live.renewedAs("ghost", "g-1", time.Now()) // a member that never runs an elector
		time.Sleep(time.Second)
		if err := a.e.HandOver(context.Background(), "ghost"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(DefaultLeaseDuration / 2)
		if l := cl.leader(); l != nil {
			t.Fatalf("%s took a hand-off to a candidate the source still counts", l.id)
		}
		live.setHandOffs(func(f *fakeHandOffs) { f.left["ghost"] = true })
		left := time.Now()
		c.e.LivenessChanged()
		if l := cl.waitLeader(nil, promptly); l != c {
			t.Fatalf("%s leads, want c", l.id)
		}
		if _, started, _, _ := c.snapshot(); started[0].Sub(left) > promptly {
			t.Fatalf("c took the hand-off %v after the source reported ghost left, want at once", started[0].Sub(left))
		}
	})
}
