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
// whose loseReply-th Update is applied but answers with errInjected (a lost reply).
type laggingStore struct {
	*MemoryStore
	lag       time.Duration
	loseReply int

	mu      sync.Mutex
	updates int
}

func (s *laggingStore) Update(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	out, err := s.MemoryStore.Update(ctx, r)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updates++
	if err == nil && s.updates == s.loseReply {
		return LeaseRecord{}, errInjected
	}
	return out, err
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
			queue <- timed{ev, time.Now()}
		}
	}()
	go func() {
		defer close(out)
		for t := range queue {
			select {
			case <-time.After(time.Until(t.at.Add(s.lag))):
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
		var mu sync.Mutex
		var terms []time.Time
		e, err := NewWithStore(testConfig("a"), store, Callbacks{OnStartedLeading: func(ctx context.Context) {
			mu.Lock()
			terms = append(terms, time.Now())
			mu.Unlock()
			<-ctx.Done()
		}}, testLogger(t))
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
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("no term within %v of the lost reply (terms started: %d, watches opened: %d)", bound, len(terms), e.Stats().Watches)
		}
		t.Logf("leading again %v after the lost reply", time.Since(lost))
	})
}
