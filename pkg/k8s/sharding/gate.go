package sharding

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// recentRecords is how many states of a shard's Lease a gate remembers by version:
// the elector writes on a state it saw a moment ago, never on an old one.
const recentRecords = 16

// gate is the LeaseStore a shard's elector runs on: the shard's own store, with the
// elector's acquiring writes held back unless the sharder lets this replica campaign
// for the shard. Renews, releases and the takeover of a hand-over that names this
// replica pass. So every replica follows every shard (its elector watches the Lease
// and knows when its holder stopped renewing) but campaigns only for its own; a
// refused write costs no request and the elector retries it later as after any
// failed write.
type gate struct {
	store    leaderelection.LeaseStore
	self     string
	mayTake  func() bool    // whether placement gives this replica the shard now
	refused  *atomic.Uint64 // the sharder's count of refused writes
	warmOnce sync.Once
	warm     chan struct{} // closed when the elector has read its first watch event

	// mu guards recent.
	mu     sync.Mutex
	recent []leaderelection.LeaseRecord // the latest states seen, oldest first
}

var _ leaderelection.LeaseStore = (*gate)(nil)

func newGate(store leaderelection.LeaseStore, self string, mayTake func() bool, refused *atomic.Uint64) *gate {
	return &gate{store: store, self: self, mayTake: mayTake, refused: refused, warm: make(chan struct{})}
}

func (g *gate) String() string { return g.store.String() }

func (g *gate) Get(ctx context.Context) (leaderelection.LeaseRecord, error) {
	r, err := g.store.Get(ctx)
	if err == nil {
		g.saw(r)
	}
	return r, err
}

func (g *gate) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if r.HolderIdentity == g.self && !g.mayTake() {
		g.refused.Add(1)
		return leaderelection.LeaseRecord{}, fmt.Errorf("create %s: %w", g.store, ErrNotPlaced)
	}
	out, err := g.store.Create(ctx, r)
	if err == nil {
		g.saw(out)
	}
	return out, err
}

// Update passes every write but an acquisition by this replica of a shard placed
// elsewhere: a write of this replica's identity on a state it does not hold, unless
// that state names it as the preferred holder (a hand-over to it).
func (g *gate) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if r.HolderIdentity == g.self && !g.mayTake() {
		prev, ok := g.state(r.ResourceVersion)
		if !ok || (prev.HolderIdentity != g.self && prev.PreferredHolder != g.self) {
			g.refused.Add(1)
			return leaderelection.LeaseRecord{}, fmt.Errorf("update %s: %w", g.store, ErrNotPlaced)
		}
	}
	out, err := g.store.Update(ctx, r)
	if err == nil {
		g.saw(out)
	}
	return out, err
}

// Watch relays the store's watch, remembering the states it carries, and marks the
// gate warm once the elector has taken the first one.
func (g *gate) Watch(ctx context.Context) (<-chan leaderelection.LeaseEvent, error) {
	in, err := g.store.Watch(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan leaderelection.LeaseEvent)
	go func() {
		defer close(out)
		for ev := range in {
			if ev.Err == nil && !ev.Deleted {
				g.saw(ev.Record)
			}
			select {
			case out <- ev:
				g.warmOnce.Do(func() { close(g.warm) })
			case <-ctx.Done():
				for range in { // until the store closes it
				}
				return
			}
		}
	}()
	return out, nil
}

func (g *gate) saw(r leaderelection.LeaseRecord) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.recent) == recentRecords {
		g.recent = g.recent[1:]
	}
	g.recent = append(g.recent, r)
}

// state returns the latest state seen at version.
func (g *gate) state(version string) (leaderelection.LeaseRecord, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.recent) - 1; i >= 0; i-- {
		if g.recent[i].ResourceVersion == version {
			return g.recent[i], true
		}
	}
	return leaderelection.LeaseRecord{}, false
}
