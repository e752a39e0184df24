package leaderelection_test

import (
	"context"
	"testing"
	"time"

	"github.com/baton-dev/baton/pkg/controller/leaderelection"
	"github.com/baton-dev/baton/pkg/controller/leadership"
	busevents "github.com/baton-dev/baton/pkg/events"
	k8sle "github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// TestTermAllocations guards the heap allocations of a term of the adapter: the
// elector's term (step-down, campaign, acquiring write, term start) and the three
// events it publishes (LostLeadership, NewLeaderObserved, BecameLeader) on a started
// bus with a subscriber of each; every goroutine of the process counts, the
// MemoryStore's and the subscriber's included. At most 9 per term, 11 under the race
// detector, against 7 measured both ways when the bound was set (24 before): the
// elector's 4 (its term context; see the elector's TestTermAllocations) and the 3
// events.
func TestTermAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count: not in -short")
	}
	store := k8sle.NewMemoryStore("alloc")
	bus := busevents.NewEventBusWithLogger(0, discard())
	bus.Start()
	defer bus.Stop()
	le, err := leaderelection.NewWithStore(config("a"), store, bus, leaderelection.Callbacks{}, discard())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	became := busevents.Subscribe[*leadership.BecameLeaderEvent](ctx, bus, "became", 4)
	lost := busevents.Subscribe[*leadership.LostLeadershipEvent](ctx, bus, "lost", 4)
	observed := busevents.Subscribe[*leadership.NewLeaderObservedEvent](ctx, bus, "observed", 4)
	done := make(chan error, 1)
	go func() { done <- le.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	// One timer, reset per wait: a time.After per term would count the harness's
	// own allocations as the term's.
	timeout := time.NewTimer(time.Hour)
	defer timeout.Stop()
	receive(t, timeout, observed, "first NewLeaderObservedEvent")
	receive(t, timeout, became, "first BecameLeaderEvent")
	term := func() {
		rec, err := store.Get(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		rec.HolderIdentity = ""
		store.Set(rec)
		receive(t, timeout, lost, "LostLeadershipEvent")
		receive(t, timeout, observed, "NewLeaderObservedEvent")
		receive(t, timeout, became, "BecameLeaderEvent")
	}
	for range 10 { // the queues and buffers grow to their size
		term()
	}
	n := testing.AllocsPerRun(200, term)
	t.Logf("%.1f allocations per term", n)
	bound := 9.0
	if raceEnabled {
		bound = 11
	}
	if n > bound {
		t.Fatalf("a term of the adapter costs %.1f allocations, want at most %.0f", n, bound)
	}
}

// receive takes one value from ch within 10s, on timeout (reset here).
func receive[T any](t *testing.T, timeout *time.Timer, ch <-chan T, what string) {
	t.Helper()
	timeout.Reset(10 * time.Second)
	select {
	case <-ch:
	case <-timeout.C:
		t.Fatalf("no %s within 10s", what)
	}
}
