package leaderelection

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

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
		cl.mem.remove()
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
// the watch showed before the reply is judged like any later event. a's watch buffers
// events as a Kubernetes client's does: a MemoryStore's own buffer of one would skip
// a's Create for the later state (LeaseEvent.Gap), and a Create whose own event was
// skipped is held a LeaseDuration (TestCreateNotVouchedBySkippingWatch).
func TestAcquirePreferredHolderBeforeReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		hold := make(chan struct{})
		a := cl.startWith("a", nil, func(s *testStore) { s.buffered, s.afterCreate = true, func() { <-hold } })
		time.Sleep(100 * time.Millisecond)
		r, err := cl.mem.Get(context.Background())
		if err != nil || r.HolderIdentity != "a" {
			t.Fatalf("lease %+v, %v; want a's Create applied", r, err)
		}
		b := cl.start("b", nil) // waits a LeaseDuration for a
		time.Sleep(100 * time.Millisecond)
		r.PreferredHolder = "b"
		cl.mem.set(r)
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
		held := mem.set(LeaseRecord{HolderIdentity: "b", LeaseDuration: DefaultLeaseDuration,
			AcquireTime: now, RenewTime: now, Marker: holderMarker("b")})
		mem.remove()
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

// createSeen is what pendingStore saw of one Create: the context it ran under.
type createSeen struct {
	hasTerm, leading bool
	sent, ended      time.Time // ended: zero if the call returned before its context ended
	err, cause       error     // the context's, when it ended
}

// pendingStore is a MemoryStore whose first Create hangs until its context ends; it
// records what each Create saw of its context.
type pendingStore struct {
	*MemoryStore
	e *Elector

	mu    sync.Mutex
	seen  []createSeen
	calls int
}

func (s *pendingStore) Create(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	_, hasTerm := termctx.FromContext(ctx)
	c := createSeen{hasTerm: hasTerm, leading: s.e.IsLeader(), sent: time.Now()}
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if first {
		<-ctx.Done()
		c.ended, c.err, c.cause = time.Now(), ctx.Err(), context.Cause(ctx)
	}
	s.mu.Lock()
	s.seen = append(s.seen, c)
	s.mu.Unlock()
	if first {
		return LeaseRecord{}, ctx.Err()
	}
	return s.MemoryStore.Create(ctx, r)
}

// TestAcquiringWriteHasNoTerm: the acquiring write carries no term and the elector does
// not lead while it is under way. A write the store holds is abandoned a RenewDeadline
// after its send, with cause ErrRenewDeadlineMissed, and no term starts; the next
// attempt leads, and its term lasts while renews go through.
func TestAcquiringWriteHasNoTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &pendingStore{MemoryStore: NewMemoryStore("lease")}
		started := make(chan context.Context, 1)
		cfg := testConfig("a")
		e, err := NewWithStore(cfg, store, Callbacks{OnStartedLeading: func(ctx context.Context) {
			started <- ctx
			<-ctx.Done()
		}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		store.e = e
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- e.Start(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Start: %v", err)
			}
		}()
		var term context.Context
		select {
		case term = <-started:
		case <-time.After(time.Minute):
			t.Fatal("no term within a minute")
		}
		store.mu.Lock()
		seen := append([]createSeen(nil), store.seen...)
		store.mu.Unlock()
		if len(seen) != 2 {
			t.Fatalf("%d Creates, want 2 (one held, one through)", len(seen))
		}
		held := seen[0]
		if held.hasTerm || held.leading || seen[1].hasTerm || seen[1].leading {
			t.Errorf("acquiring writes saw a term %v %v, a leader %v %v; want neither",
				held.hasTerm, seen[1].hasTerm, held.leading, seen[1].leading)
		}
		if d := held.ended.Sub(held.sent); d != cfg.withDefaults().RenewDeadline {
			t.Errorf("held write's context ended after %v, want the RenewDeadline", d)
		}
		if !errors.Is(held.err, context.Canceled) || !errors.Is(held.cause, ErrRenewDeadlineMissed) {
			t.Errorf("held write's context: Err %v, Cause %v", held.err, held.cause)
		}
		n, ok := termctx.FromContext(term)
		if !ok || n == 0 || n != e.Term() {
			t.Fatalf("term context carries %d, %v; elector's term %d", n, ok, e.Term())
		}
		time.Sleep(3 * cfg.withDefaults().RenewDeadline)
		if term.Err() != nil || !e.IsLeader() {
			t.Fatalf("term ended while renews went through: %v", context.Cause(term))
		}
	})
}

// TestCreateLeadsOnItsWatchEvent: a Create's answer proves only that the lease was
// absent when it landed. A candidate whose watch delivers the Create's own event leads
// at once; one whose watch never shows it (a silent watch) holds the lease, renewing
// it, and leads a LeaseDuration after the answer, as for a slow Create.
func TestCreateLeadsOnItsWatchEvent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		a := cl.start("a", nil)
		if cl.waitLeader(nil, 10*time.Millisecond) != a {
			t.Fatal("a did not lead at once on its Create")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		cl := newCluster(t)
		defer cl.stop()
		start := time.Now()
		a := cl.startWith("a", nil, func(s *testStore) { s.silent = true })
		time.Sleep(DefaultLeaseDuration - 100*time.Millisecond)
		if a.e.IsLeader() || a.e.GetLeader() != "a" {
			t.Fatalf("before a LeaseDuration: a leads %v, sees leader %q; want holding", a.e.IsLeader(), a.e.GetLeader())
		}
		if n := a.store.count("Update"); n == 0 {
			t.Error("a did not renew the lease it holds")
		}
		if cl.waitLeader(nil, time.Second) != a {
			t.Fatal("a did not lead after a LeaseDuration")
		}
		if d := time.Since(start); d < DefaultLeaseDuration {
			t.Errorf("a led %v after its start, before a LeaseDuration", d)
		}
	})
}
