package leaderelection

import (
	"context"
	"testing"
	"time"
)

// termCycle runs an elector with all three callbacks on a MemoryStore, on the real
// clock, and returns a function that makes one more term: it clears the lease's holder
// by hand, the elector steps down (OnStoppedLeading), campaigns again and leads a new
// term (OnStartedLeading). The callbacks only signal; the harness's own allocations are
// the store's Set.
func termCycle(tb testing.TB) func() {
	tb.Helper()
	store := NewMemoryStore("alloc")
	started := make(chan struct{}, 1)
	stopped := make(chan struct{}, 1)
	e, err := NewWithStore(Config{Identity: "a", LeaseName: "alloc", LeaseNamespace: "test"}, store, Callbacks{
		OnStartedLeading: func(ctx context.Context) { started <- struct{}{}; <-ctx.Done() },
		OnStoppedLeading: func() { stopped <- struct{}{} },
		OnNewLeader:      func(string) {},
	}, nil)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Start: %v", err)
		}
	})
	// One timer, reset per term: a time.After per term would count the harness's own
	// allocations as the elector's.
	timeout := time.NewTimer(time.Hour)
	tb.Cleanup(func() { timeout.Stop() })
	wait := func(ch <-chan struct{}, what string) {
		timeout.Reset(10 * time.Second)
		select {
		case <-ch:
		case <-timeout.C:
			tb.Fatalf("no %s within 10s", what)
		}
	}
	wait(started, "first term")
	return func() {
		rec, err := store.Get(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		rec.HolderIdentity = ""
		store.Set(rec)
		wait(stopped, "step-down")
		wait(started, "new term")
	}
}

// TestTermAllocations guards the heap allocations of an elector's term (step-down,
// campaign, acquiring write, term start; every goroutine of the process, the
// MemoryStore's included): at most 5 per term, 7 under the race detector, against 4
// measured both ways when the bound was set, and 20 before (a timeout context and a
// timer for the acquiring write, a term context wrapping a stamped context with a
// timer and a callback of its own, a wake-up timer per wait of the loop, a goroutine,
// closure and channel for OnStartedLeading, log arguments, the holder marker, the
// notifier's queue and the resourceVersion string, all per term). What a term costs
// now: its term context (struct, cancel-cause context and its cancel function, Done's
// channel), which the acquiring write already runs under.
func TestTermAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count: not in -short")
	}
	term := termCycle(t)
	for range 10 { // the queues and buffers grow to their size
		term()
	}
	n := testing.AllocsPerRun(200, term)
	t.Logf("%.1f allocations per term", n)
	bound := 5.0
	if raceEnabled {
		bound = 7
	}
	if n > bound {
		t.Fatalf("a term of the elector costs %.1f allocations, want at most %.0f", n, bound)
	}
}

// BenchmarkTerm reports the allocations of an elector's term (see
// TestTermAllocations) and its time: step-down, campaign, acquiring write, term start.
func BenchmarkTerm(b *testing.B) {
	term := termCycle(b)
	term()
	b.ReportAllocs()
	for b.Loop() {
		term()
	}
}
