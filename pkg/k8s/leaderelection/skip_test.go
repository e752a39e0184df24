package leaderelection

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// skippingStore is a MemoryStore whose watches are read by a slow reader: after the
// first event (the list), the reader stops reading until release is closed, so the
// MemoryStore's buffer of one keeps only the latest state and drops the ones before it,
// as it does for any slow watcher. beforeCreate runs once before the first Create
// reaches the store.
type skippingStore struct {
	*MemoryStore
	release      chan struct{}
	once         sync.Once
	beforeCreate func()
}

func (s *skippingStore) Create(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	s.once.Do(s.beforeCreate)
	return s.MemoryStore.Create(ctx, r)
}

func (s *skippingStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	in, err := s.MemoryStore.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan LeaseEvent, watchBuffer)
	out <- <-in // the list
	go func() {
		defer close(out)
		select {
		case <-s.release:
		case <-ctx.Done():
		}
		for ev := range in {
			out <- ev
		}
	}()
	return out, nil
}

// TestCreateNotVouchedBySkippingWatch (issue 25, defect 8): a watch that skipped states
// does not vouch for a Create. c finds the lease absent (a cold start) and sends a
// Create; before it lands, b creates the lease (b leads, then is cut off) and the
// lease is deleted by hand. c's watch reader is slow, so the MemoryStore skips b's
// create and the delete: the first event c's watch delivers after the list is c's own
// Create. c must not take that as "nothing before it" and lead at once beside b; it
// holds the lease a LeaseDuration, as for a Create that landed after unseen states.
func TestCreateNotVouchedBySkippingWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore("lease")
		store := &skippingStore{MemoryStore: mem, release: make(chan struct{})}
		store.beforeCreate = func() {
			now := time.Now()
			mem.set(LeaseRecord{HolderIdentity: "b", LeaseDuration: DefaultLeaseDuration,
				AcquireTime: now, RenewTime: now, Marker: holderMarker("b")})
			mem.remove()
		}
		var mu sync.Mutex
		var started time.Time
		e, err := NewWithStore(testConfig("c"), store, Callbacks{OnStartedLeading: func(ctx context.Context) {
			mu.Lock()
			started = time.Now()
			mu.Unlock()
			<-ctx.Done()
		}}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		begin := time.Now()
		go func() { done <- e.Start(ctx) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
		}()
		synctest.Wait() // c's Create has landed over the skipped states
		if r, err := mem.Get(context.Background()); err != nil || r.HolderIdentity != "c" {
			t.Fatalf("lease %+v, %v; want c's Create applied", r, err)
		}
		close(store.release) // the reader reads again: only c's own event is left
		time.Sleep(time.Second)
		if e.IsLeader() {
			t.Fatal("c leads on its Create's event, which its watch delivered after skipping b's create and the delete")
		}
		time.Sleep(DefaultLeaseDuration)
		mu.Lock()
		defer mu.Unlock()
		if started.IsZero() {
			t.Fatal("c does not lead a LeaseDuration after its Create")
		}
		if d := started.Sub(begin); d < DefaultLeaseDuration {
			t.Fatalf("c led %v after its Create, want at least %v", d, DefaultLeaseDuration)
		}
	})
}

// TestMemoryStoreMarksSkips: a MemoryStore watcher that reads every event sees no Gap;
// one that fell behind gets the latest state with Gap set.
func TestMemoryStoreMarksSkips(t *testing.T) {
	s := NewMemoryStore("lease")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := s.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-w; ev.Gap || !ev.Deleted {
		t.Fatalf("first event %+v, want the absence without Gap", ev)
	}
	s.set(LeaseRecord{HolderIdentity: "a"})
	if ev := <-w; ev.Gap || ev.Record.HolderIdentity != "a" {
		t.Fatalf("event %+v, want a's state without Gap", ev)
	}
	s.set(LeaseRecord{HolderIdentity: "b"})
	s.remove()
	s.set(LeaseRecord{HolderIdentity: "c"})
	if ev := <-w; !ev.Gap || ev.Record.HolderIdentity != "c" || ev.Record.ResourceVersion != "4" {
		t.Fatalf("event %+v after falling behind, want c's state (version 4) with Gap", ev)
	}
}
