package leaderelection

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// laggingStore is a MemoryStore whose watches deliver every event, the first too, lag
// after the store made it, in order and without skipping (a slow API server), and
// whose loseReply-th Update (and the next one after loseNext is set) is applied but
// answers with errInjected (a lost reply).
type laggingStore struct {
	*MemoryStore
	loseReply int

	mu       sync.Mutex
	lag      time.Duration // of the events the store makes from now
	updates  int
	loseNext bool // lose the reply of the next Update the store applies
}

func (s *laggingStore) Update(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	out, err := s.MemoryStore.Update(ctx, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates++
	if err == nil && (s.updates == s.loseReply || s.loseNext) {
		s.loseNext = false
		return LeaseRecord{}, errInjected
	}
	return out, err
}

func (s *laggingStore) lagNow() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lag
}

func (s *laggingStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	in, err := s.MemoryStore.Watch(ctx)
	if err != nil {
		return nil, err
	}
	type timed struct {
		ev LeaseEvent
		at time.Time
	}
	queue := make(chan timed, 1024) // read at once: the MemoryStore never skips
	out := make(chan LeaseEvent, watchBuffer)
	go func() {
		defer close(queue)
		for ev := range in {
			queue <- timed{ev, time.Now().Add(s.lagNow())}
		}
	}()
	go func() {
		defer close(out)
		for t := range queue {
			select {
			case <-time.After(time.Until(t.at)):
			case <-ctx.Done():
				for range queue {
				}
				return
			}
			out <- t.ev
		}
	}()
	return out, nil
}

// TestLaggingWatchLeadsAgainAfterLostReply (issue 25, defect 9): a sole candidate whose
// watch delivers every event 5s late, more than a RetryPeriod, loses the reply of its
// second Update. Its retry conflicts; the watch shows the lost renew only 5s later, and
// a new watch shows its first event 5s after it opens. A conflict that gives the watch
// only a RetryPeriod replaces it, again and again, before anything arrives, and the
// candidate never leads again; given the lag it has seen, it leads again.
func TestLaggingWatchLeadsAgainAfterLostReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &laggingStore{MemoryStore: NewMemoryStore("lease"), lag: 5 * time.Second, loseReply: 2}
		e, terms := startLagging(t, store)
		var lost time.Time
		for lost.IsZero() {
			time.Sleep(10 * time.Millisecond)
			store.mu.Lock()
			if store.updates >= 2 {
				lost = time.Now()
			}
			store.mu.Unlock()
		}
		const bound = 3 * DefaultLeaseDuration
		for time.Since(lost) < bound && !e.IsLeader() {
			time.Sleep(10 * time.Millisecond)
		}
		if !e.IsLeader() {
			t.Fatalf("no term within %v of the lost reply (terms started: %d, watches opened: %d)", bound, terms(), e.Stats().Watches)
		}
		t.Logf("leading again %v after the lost reply", time.Since(lost))
	})
}

// startLagging starts candidate a on store until the test ends; terms counts its terms.
func startLagging(t *testing.T, store LeaseStore) (e *Elector, terms func() int) {
	var mu sync.Mutex
	n := 0
	e, err := NewWithStore(testConfig("a"), store, Callbacks{OnStartedLeading: func(ctx context.Context) {
		mu.Lock()
		n++
		mu.Unlock()
		<-ctx.Done()
	}}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return e, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestUnmeasuredWatchLagDoesNotStall (issue 25, defect 9; test/chaos create-race seed
// 3): a lag that begins where the elector cannot measure it. a leads on a fast watch;
// then every event comes 5s late, the lease is deleted by hand, a creates it again and
// holds it until the Create's event, and the held renew's reply is lost, before the
// Create's late event could show the lag: the lag measured so far is nil. A watch
// given up before its first event shows that the lag is longer than its age; a given
// only the lag it measured gives every new watch up before its first event, forever.
func TestUnmeasuredWatchLagDoesNotStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := NewMemoryStore("lease")
		store := &laggingStore{MemoryStore: mem}
		e, terms := startLagging(t, store)
		time.Sleep(3 * time.Second)
		if !e.IsLeader() {
			t.Fatal("a does not lead")
		}
		store.mu.Lock()
		store.lag = 5 * time.Second
		store.mu.Unlock()
		mem.remove()
		for {
			if r, err := mem.Get(context.Background()); err == nil && r.HolderIdentity == "a" {
				break
			}
			time.Sleep(time.Millisecond)
		}
		store.mu.Lock()
		store.loseNext = true // the held lease's renew
		store.mu.Unlock()
		created := time.Now()
		const bound = 4 * DefaultLeaseDuration
		for time.Since(created) < bound && !e.IsLeader() {
			time.Sleep(10 * time.Millisecond)
		}
		if !e.IsLeader() {
			t.Fatalf("no term within %v of the re-create (terms: %d, watches opened: %d)", bound, terms(), e.Stats().Watches)
		}
		t.Logf("leading again %v after the re-create (terms: %d)", time.Since(created), terms())
	})
}
