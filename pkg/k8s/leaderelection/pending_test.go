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

// TestAcquireUnderPendingTerm: the acquiring write runs under the context of the term it
// may start, pending: the store finds no term in it and the elector not leading. A
// write the store holds ends a RenewDeadline after its send, with cause
// ErrRenewDeadlineMissed, and no term starts; the next attempt leads, and its term
// lasts while renews go through (the pending context of the failed write, ended, does
// not end it).
func TestAcquireUnderPendingTerm(t *testing.T) {
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
		n, ok := TermFromContext(term)
		if !ok || n == 0 || n != e.Term() {
			t.Fatalf("term context carries %d, %v; elector's term %d", n, ok, e.Term())
		}
		time.Sleep(3 * cfg.withDefaults().RenewDeadline)
		if term.Err() != nil || !e.IsLeader() {
			t.Fatalf("term ended while renews went through: %v", context.Cause(term))
		}
	})
}
