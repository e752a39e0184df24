package leaderelection

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/termctx"
)

// TestTermContextAnswersTheCoreAccessor: the elector's term context carries
// its term for the core's one accessor, termctx.FromContext, also through
// derived contexts.
func TestTermContextAnswersTheCoreAccessor(t *testing.T) {
	tc := newTermContext(context.Background(), termctx.Term{Number: 15}, time.Now(), 0, realClock{})
	defer tc.cancel(nil)
	derived, cancel := context.WithCancel(tc)
	defer cancel()
	for name, ctx := range map[string]context.Context{"term context": tc, "derived": derived} {
		if n, ok := termctx.FromContext(ctx); !ok || n != 15 {
			t.Errorf("%s: termctx.FromContext = %d, %v; want 15, true", name, n, ok)
		}
	}
	if _, ok := termctx.FromContext(context.Background()); ok {
		t.Error("termctx.FromContext found a term in a plain context")
	}
}

// TestTermContextCarriesLeaseAndToken: a term's context names its Lease, its number and
// the token the acquiring write put on the Lease (holder and acquireTime), as the
// Lease has them while the term runs.
func TestTermContextCarriesLeaseAndToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := NewMemoryStore("baton")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan termctx.Term, 1)
		e, err := NewWithStore(Config{Identity: "replica-0", LeaseName: "baton", LeaseNamespace: "ns"}, store,
			Callbacks{OnStartedLeading: func(ctx context.Context) {
				term, _ := termctx.Get(ctx)
				got <- term
				<-ctx.Done()
			}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- e.Start(ctx) }()
		term := <-got
		lease, err := store.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		want := termctx.Term{Lease: termctx.Lease{Namespace: "ns", Name: "baton"}, Number: e.Term(),
			Token: termctx.Token{Holder: "replica-0", Acquired: lease.AcquireTime}}
		if term != want || term.Token.Acquired.IsZero() {
			t.Errorf("term context carries %+v, want %+v", term, want)
		}
		cancel()
		<-done
	})
}
