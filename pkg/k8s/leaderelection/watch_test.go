package leaderelection

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

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

// TestStartWaitsForAbandonedWatchStream: a watch whose open was abandoned but
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

// TestWatchErrorRelists: a watch error is counted and followed by a new watch
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
			cl.mem.failWatches(gone)
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
