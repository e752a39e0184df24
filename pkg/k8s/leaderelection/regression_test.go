package leaderelection

import (
	"context"
	"errors"
	"sync/atomic"
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
		v, _ := parseVersion(snapshot.ResourceVersion)
		cl.mem.Restore(v, snapshot, true)
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
		if rec.HolderIdentity != nl.id {
			t.Fatalf("lease %+v, want held by %s", rec, nl.id)
		}
		if term := nl.e.Term(); term <= bTerm {
			t.Errorf("term %d after the rewind, want above every term before (%d)", term, bTerm)
		}
		var resets uint64
		for _, c := range []*candidate{a, b} {
			resets += c.e.Stats().VersionResets
		}
		if resets < 2 {
			t.Errorf("%d version resets counted, want one per candidate", resets)
		}
	})
}

// TestDerivedContextSeesLazyExpiry (defect 7): a context derived from the term context
// reports the end of the term as soon as anything on its chain is asked, even before the
// timer ran (a process resumed after SIGSTOP).
func TestDerivedContextSeesLazyExpiry(t *testing.T) {
	start := time.Now()
	clock := &fakeClock{now: start}
	tc := newTermContextClock(context.Background(), 7, start, 10*time.Second, clock.Now, realClock{})
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

// lingeringStore is a MemoryStore whose first Watch hangs until its context ends, then
// returns a channel anyway, which its producer closes only an hour later, like a watch
// stream whose connection dies slowly.
type lingeringStore struct {
	*MemoryStore
	calls  atomic.Int32
	closed atomic.Bool // the lingering channel was closed
}

func (s *lingeringStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	if s.calls.Add(1) > 1 {
		return s.MemoryStore.Watch(ctx)
	}
	<-ctx.Done()
	out := make(chan LeaseEvent)
	go func() {
		time.Sleep(time.Hour)
		s.closed.Store(true)
		close(out)
	}()
	return out, nil
}

// TestStartWaitsForAbandonedWatchStream (defect 7): a watch whose open was abandoned but
// which returned a channel is drained until the store closes it, and Start waits for
// that: nothing of the store's watch outlives Start.
func TestStartWaitsForAbandonedWatchStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &lingeringStore{MemoryStore: NewMemoryStore("lease")}
		e, err := NewWithStore(testConfig("a"), store, Callbacks{}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- e.Start(ctx) }()
		time.Sleep(DefaultRenewDeadline + 2*DefaultRetryPeriod)
		if !e.IsLeader() {
			t.Fatal("not leading through the second watch")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if !store.closed.Load() {
			t.Fatal("Start returned while the abandoned watch's stream was still open")
		}
	})
}

// TestWatchErrorRelists (defect 7): a watch error is counted and followed by a new watch
// (a re-list); the follower keeps following.
func TestWatchErrorRelists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		time.Sleep(time.Second)
		gone := errors.New("too old resource version (410)")
		for range 3 {
			cl.mem.FailWatches(gone)
			time.Sleep(10 * time.Second)
		}
		for _, c := range []*candidate{a, b} {
			st := c.e.Stats()
			if st.WatchErrors != 3 || st.Watches != 4 {
				t.Errorf("%s: stats %+v, want 3 watch errors and 4 watches", c.id, st)
			}
		}
		if cl.leader() != a || b.e.GetLeader() != "a" {
			t.Fatal("leadership changed over watch errors")
		}
	})
}

// TestRestoreToOwnOldWrite (chaos seeds 282, 444, 1475): a candidate cut off for long
// finds the lease restored to its own last write, byte for byte (versions repeat after
// an etcd restore). It must not take it back at once, since another candidate may have
// led over it meanwhile: its write is older than a RenewDeadline, and its watch was
// down. (Its next term may repeat the number of a term it never saw: terms are only
// increasing over the versions each candidate saw.)
func TestRestoreToOwnOldWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		cl.termsMayRepeat = true
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		b := cl.start("b", nil)
		time.Sleep(2 * time.Second) // between a's renews
		aLast, _ := cl.mem.Get(context.Background())
		a.store.setMode(modeHang) // a is cut off; its last write is aLast
		if nl := cl.waitLeader(a, time.Minute); nl != b {
			t.Fatalf("leader %s, want b", nl.id)
		}
		time.Sleep(5 * time.Second)
		b.store.setMode(modeHang) // b is cut off inside its term
		synctest.Wait()
		v, _ := parseVersion(aLast.ResourceVersion)
		cl.mem.Restore(v, aLast, true)
		a.store.setMode(modePass) // a sees exactly its own old write
		time.Sleep(DefaultRenewDeadline)
		if b.e.IsLeader() {
			t.Fatal("b still leads past its renew deadline")
		}
		b.store.setMode(modePass)
		cl.waitLeader(nil, 2*DefaultLeaseDuration)
	})
}

// TestAbsentAgainAfterGap (chaos seed 82): a candidate that saw the lease absent, then
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
		cl.mem.Delete() // b and c see it absent, with a's last state: they wait
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
		cl.mem.Delete()
		b.store.setMode(modePass) // b's next Create would go through
		time.Sleep(DefaultRenewDeadline)
		if c.e.IsLeader() {
			t.Fatal("c still leads past its renew deadline")
		}
		c.store.setMode(modePass)
		cl.waitLeader(nil, 2*DefaultLeaseDuration)
	})
}

// TestRestoredRelease (chaos seed 2397): the store is restored to a Baton release at the
// version a follower last saw, while the leader is cut off inside its term. Neither the
// follower (same version, other state) nor a candidate that starts now (a release on
// its first look) may take it at once.
func TestRestoredRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		cl.termsMayRepeat = true
		defer cl.stop()
		a := cl.start("a", nil)
		time.Sleep(time.Second)
		cl.start("b", nil)
		time.Sleep(2 * time.Second)
		a.store.setMode(modeHang)
		synctest.Wait()
		rec, _ := cl.mem.Get(context.Background())
		rel := rec
		rel.HolderIdentity, rel.LeaseDuration = "", time.Second
		rel.Marker = releaseMarker(rec.LeaseTransitions, "a")
		v, _ := parseVersion(rec.ResourceVersion)
		cl.mem.Restore(v, rel, true)
		cl.start("d", nil)
		time.Sleep(DefaultRenewDeadline)
		if a.e.IsLeader() {
			t.Fatal("a still leads past its renew deadline")
		}
		a.store.setMode(modePass)
		cl.waitLeader(nil, 2*DefaultLeaseDuration)
	})
}

// TestAcquireOvertakenBeforeReply: the reply to a's acquiring Create is slow; meanwhile
// the Lease is deleted by hand and b, starting cold, creates it at once and leads. a's
// watch has shown both before a reads its reply: a must not start a term from a write
// the store has already moved past (found by test/chaos on the real API server, seed 1).
func TestAcquireOvertakenBeforeReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		hold := make(chan struct{})
		a := cl.startWith("a", nil, func(s *testStore) { s.afterCreate = func() { <-hold } })
		time.Sleep(100 * time.Millisecond)
		if r, err := cl.mem.Get(context.Background()); err != nil || r.HolderIdentity != "a" {
			t.Fatalf("lease %+v, %v; want a's Create applied", r, err)
		}
		cl.mem.Delete()
		b := cl.start("b", nil)
		if l := cl.waitLeader(nil, time.Second); l != b {
			t.Fatalf("leader %s, want b (a cold start creates the lease at once)", l.id)
		}
		bTerm := b.e.Term()
		close(hold) // a reads its reply now; its watch has shown the delete and b's lease
		time.Sleep(DefaultRetryPeriod)
		if terms, _, _, _ := a.snapshot(); len(terms) != 0 {
			t.Errorf("a started terms %v from a write the store had moved past (b leads term %d)", terms, bTerm)
		}
		if !b.e.IsLeader() || b.e.Term() != bTerm {
			t.Errorf("b: IsLeader %v term %d, want term %d kept", b.e.IsLeader(), b.e.Term(), bTerm)
		}
		if got := a.e.GetLeader(); got != "b" {
			t.Errorf("a sees leader %q, want b", got)
		}
	})
}

// TestAcquirePreferredHolderBeforeReply: while the reply to a's acquiring Create is
// slow, someone names b as the lease's preferredHolder (a's write otherwise intact).
// a's term starts, as the lease still holds its write, and is handed to b at once: what
// the watch showed before the reply is judged like any later event.
func TestAcquirePreferredHolderBeforeReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		hold := make(chan struct{})
		a := cl.startWith("a", nil, func(s *testStore) { s.afterCreate = func() { <-hold } })
		time.Sleep(100 * time.Millisecond)
		r, err := cl.mem.Get(context.Background())
		if err != nil || r.HolderIdentity != "a" {
			t.Fatalf("lease %+v, %v; want a's Create applied", r, err)
		}
		b := cl.start("b", nil) // waits a LeaseDuration for a
		time.Sleep(100 * time.Millisecond)
		r.PreferredHolder = "b"
		cl.mem.Set(r)
		released := time.Now()
		close(hold)
		nl := cl.waitLeader(a, time.Second)
		if nl != b {
			t.Fatalf("leader %s, want b", nl.id)
		}
		if terms, _, _, _ := a.snapshot(); len(terms) != 1 {
			t.Errorf("a: terms %v, want the one of its write", terms)
		}
		if took := time.Since(released); took > 10*time.Millisecond {
			t.Errorf("b took the lease %v after a's reply, want at watch speed", took)
		}
	})
}

// scriptedWatchStore is a MemoryStore whose watches deliver script, as one list and the
// events that followed it, all waiting at once, before the store's own events after
// its current state.
type scriptedWatchStore struct {
	*MemoryStore
	script []LeaseEvent
}

func (s *scriptedWatchStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	in, err := s.MemoryStore.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan LeaseEvent, len(s.script))
	for _, ev := range s.script {
		out <- ev
	}
	<-in // the current state: the script's last event
	go func() {
		defer close(out)
		for ev := range in {
			out <- ev
		}
	}()
	return out, nil
}

// TestAcquireReadsPendingEvents: a candidate's first look shows the lease absent, but
// its watch already holds the events that followed: b took the lease, then it was
// deleted. The candidate must judge the latest state before it writes: b may still
// lead (cut off), so it waits b's lease duration instead of re-creating it at once.
func TestAcquireReadsPendingEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore("lease")
		now := time.Now()
		held := mem.Set(LeaseRecord{HolderIdentity: "b", LeaseDuration: DefaultLeaseDuration,
			AcquireTime: now, RenewTime: now, Marker: holderMarker("b")})
		mem.Delete()
		last := held
		last.ResourceVersion = "2"
		store := &scriptedWatchStore{MemoryStore: mem, script: []LeaseEvent{
			{Deleted: true}, {Record: held}, {Record: last, Deleted: true},
		}}
		e, err := NewWithStore(testConfig("a"), store, Callbacks{}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Start(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(time.Second)
		if e.IsLeader() {
			t.Fatal("a leads at once, over b's lease deleted under it")
		}
		if _, err := mem.Get(context.Background()); !errors.Is(err, ErrLeaseNotFound) {
			t.Fatalf("lease written within a second: %v", err)
		}
		time.Sleep(DefaultLeaseDuration)
		if !e.IsLeader() {
			t.Fatal("a does not lead after b's lease duration")
		}
	})
}
