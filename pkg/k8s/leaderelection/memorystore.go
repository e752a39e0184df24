package leaderelection

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection/internal/hand"
)

// MemoryStore is an in-process LeaseStore with the semantics of the Kubernetes one:
// Create fails with ErrConflict when the lease exists, Update is a strict
// compare-and-swap on the resourceVersion, and watchers see every change. It is the
// embedded default for single-process runs and the store of fast tests. The zero value
// is not usable; call NewMemoryStore. Safe for concurrent use.
//
// ResourceVersions come from a counter that never goes back, also across Delete, so
// terms stay strictly increasing when the lease is deleted and re-created.
//
// Writers never block on watchers: each watcher holds at most one undelivered event,
// and a newer event replaces it, so a slow watcher skips to the latest state.
type MemoryStore struct {
	name string

	// mu guards the fields below.
	mu       sync.Mutex
	version  uint64
	record   LeaseRecord
	exists   bool
	watchers map[chan LeaseEvent]struct{}
}

var _ LeaseStore = (*MemoryStore)(nil)

// Faults returns the hand operations of s (set, remove, restore, failWatches), for
// package leaderelectiontest, which alone (with this package) can make a hand.Key.
//
// Why is this here? They are faults for tests and demos, not part of the store's API;
// the Key keeps them out of reach of every other package, with no global to fill.
func (s *MemoryStore) Faults(hand.Key) hand.Faults[LeaseRecord] {
	return hand.Faults[LeaseRecord]{Set: s.set, Delete: s.remove, Restore: s.restore, FailWatches: s.failWatches}
}

// NewMemoryStore returns an empty store for the lease called name.
func NewMemoryStore(name string) *MemoryStore {
	return &MemoryStore{name: name, watchers: make(map[chan LeaseEvent]struct{})}
}

// String returns "memory/" and the lease name.
func (s *MemoryStore) String() string { return "memory/" + s.name }

// Get returns the lease or ErrLeaseNotFound.
func (s *MemoryStore) Get(ctx context.Context) (LeaseRecord, error) {
	if err := ctx.Err(); err != nil {
		return LeaseRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exists {
		return LeaseRecord{}, fmt.Errorf("get %s: %w", s, ErrLeaseNotFound)
	}
	return s.record, nil
}

// Create stores r as a new lease, or fails with ErrConflict when one exists.
func (s *MemoryStore) Create(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	if err := ctx.Err(); err != nil {
		return LeaseRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exists {
		return LeaseRecord{}, fmt.Errorf("create %s: %w", s, ErrConflict)
	}
	return s.storeLocked(r), nil
}

// Update overwrites the lease when r.ResourceVersion is the current one; otherwise it
// fails with ErrConflict (or ErrLeaseNotFound when there is no lease).
func (s *MemoryStore) Update(ctx context.Context, r LeaseRecord) (LeaseRecord, error) {
	if err := ctx.Err(); err != nil {
		return LeaseRecord{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exists {
		return LeaseRecord{}, fmt.Errorf("update %s: %w", s, ErrLeaseNotFound)
	}
	if r.ResourceVersion != s.record.ResourceVersion {
		return LeaseRecord{}, fmt.Errorf("update %s: resource version %q is not %q: %w",
			s, r.ResourceVersion, s.record.ResourceVersion, ErrConflict)
	}
	return s.storeLocked(r), nil
}

// set overwrites the lease by hand, creating it when absent, whatever its
// resourceVersion, and returns it with its new resourceVersion.
func (s *MemoryStore) set(r LeaseRecord) LeaseRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.storeLocked(r)
}

// remove deletes the lease by hand, if present. Watchers get a Deleted event carrying
// the last state and the resourceVersion of the delete.
func (s *MemoryStore) remove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.exists {
		return
	}
	s.version++
	last := s.record
	last.ResourceVersion = versionString(s.version)
	s.exists = false
	s.record = LeaseRecord{}
	s.notifyLocked(LeaseEvent{Record: last, Deleted: true})
}

// restore puts the store back to an earlier state, as an etcd restore from a backup
// does: the lease becomes r (absent when exists is false) at resourceVersion version,
// the counter goes on from there, and every watch gets an Err event and is closed (the
// API server restarts). version may be below versions already handed out.
func (s *MemoryStore) restore(version uint64, r LeaseRecord, exists bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.version, s.exists = version, exists
	s.record = LeaseRecord{}
	if exists {
		r.ResourceVersion = versionString(version)
		s.record = r
	}
	s.failWatchersLocked(fmt.Errorf("%s: %w", s, ErrHistoryRestored))
}

// failWatches ends every open watch with an event carrying err (e.g. a 410 Gone), then
// closes it, as an API server ending its watches does.
func (s *MemoryStore) failWatches(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failWatchersLocked(err)
}

func (s *MemoryStore) failWatchersLocked(err error) {
	for ch := range s.watchers {
		select { // room for the error: drop an undelivered state, the next watch re-lists
		case <-ch:
		default:
		}
		ch <- LeaseEvent{Err: err}
		close(ch)
		delete(s.watchers, ch)
	}
}

// Watch delivers the current state first, then every change, skipping to the latest
// when the reader is slow. The channel is closed by the store when ctx ends.
func (s *MemoryStore) Watch(ctx context.Context) (<-chan LeaseEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan LeaseEvent, 1)
	s.mu.Lock()
	ch <- s.currentLocked()
	s.watchers[ch] = struct{}{}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.watchers[ch]; ok {
			delete(s.watchers, ch)
			close(ch)
		}
	})
	return ch, nil
}

func (s *MemoryStore) currentLocked() LeaseEvent {
	if !s.exists {
		return LeaseEvent{Deleted: true, Record: LeaseRecord{ResourceVersion: versionString(s.version)}}
	}
	return LeaseEvent{Record: s.record}
}

func (s *MemoryStore) storeLocked(r LeaseRecord) LeaseRecord {
	s.version++
	r.ResourceVersion = versionString(s.version)
	s.record = r
	s.exists = true
	s.notifyLocked(LeaseEvent{Record: r})
	return r
}

// notifyLocked hands ev to every watcher without blocking: a watcher's buffer holds one
// event, and an undelivered older one is dropped for ev. Only holders of mu send, so
// the send after the drain always finds room.
func (s *MemoryStore) notifyLocked(ev LeaseEvent) {
	for ch := range s.watchers {
		select {
		case <-ch:
		default:
		}
		ch <- ev
	}
}

// versionString is v as a decimal resourceVersion.
func versionString(v uint64) string { return strconv.FormatUint(v, 10) }
