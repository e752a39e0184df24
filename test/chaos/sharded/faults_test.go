package sharded

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// Errors of a node's calls under a fault.
var (
	errCrashed = errors.New("sharded chaos: replica crashed")
	errCut     = errors.New("sharded chaos: replica cut off from the store")
)

// node is one replica's way to the stores and to the fenced register, with the faults
// of that replica: crashed (for good), cut off (calls fail at once or hang until their
// context ends; watches close, new ones fail), paused (calls, replies, watch
// deliveries and register writes held until it resumes; the elector's timers keep
// running, so its terms end on time by its clock, as a resumed process's lazy check
// reports) and lagging watches (every event delivered lag late).
type node struct {
	id string

	// mu guards the fields below.
	mu      sync.Mutex
	crashed bool
	diedAt  time.Time // when the replica's process died (die), zero if it did not
	cut     bool
	hang    bool          // a cut makes calls hang until their context ends
	cutting chan struct{} // closed when a cut or crash starts: watches end
	paused  bool
	resumed chan struct{} // closed when a pause ends
	lag     time.Duration
	leases  []*nodeLease // by shard
}

func newNode(id string, shards int) *node {
	return &node{id: id, cutting: make(chan struct{}), resumed: make(chan struct{}), leases: make([]*nodeLease, shards)}
}

// stores wraps shared for this node.
func (n *node) stores(shared sharding.Stores) sharding.Stores {
	return sharding.Stores{
		Shard: func(i int) leaderelection.LeaseStore {
			l := &nodeLease{inner: shared.Shard(i), n: n, cold: map[string]bool{}}
			n.mu.Lock()
			n.leases[i] = l
			n.mu.Unlock()
			return l
		},
		Members: &nodeMembers{inner: shared.Members, n: n},
	}
}

func (n *node) crash() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.crashed && !n.cut {
		close(n.cutting)
	}
	n.crashed = true
}

// die crashes the replica and ends its process: its shard work ends at once (its
// terms are recorded as ended now), as for a process the kubelet reports dead.
func (n *node) die() {
	n.crash()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.diedAt.IsZero() {
		n.diedAt = time.Now()
	}
}

// deathTime is when the replica's process died, zero if it did not.
func (n *node) deathTime() time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.diedAt
}

func (n *node) setCut(on, hang bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if on && !n.cut && !n.crashed {
		close(n.cutting)
	}
	if !on && n.cut && !n.crashed {
		n.cutting = make(chan struct{})
	}
	n.cut, n.hang = on, hang
}

func (n *node) setPaused(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !on && n.paused {
		close(n.resumed)
		n.resumed = make(chan struct{})
	}
	n.paused = on
}

func (n *node) setLag(d time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.lag = d
}

// holdWhilePaused waits until the node is not paused; false when ctx ended first.
func (n *node) holdWhilePaused(ctx context.Context) bool {
	for {
		n.mu.Lock()
		paused, resumed := n.paused, n.resumed
		n.mu.Unlock()
		if !paused {
			return true
		}
		select {
		case <-resumed:
		case <-ctx.Done():
			return false
		}
	}
}

// enter is the start of every call: held while paused, failed when crashed or cut.
func (n *node) enter(ctx context.Context) error {
	if !n.holdWhilePaused(ctx) {
		return ctx.Err()
	}
	n.mu.Lock()
	crashed, cut, hang := n.crashed, n.cut, n.hang
	n.mu.Unlock()
	switch {
	case crashed:
		return errCrashed
	case cut && hang:
		<-ctx.Done()
		return errCut
	case cut:
		return errCut
	}
	return nil
}

// leave is the end of every call: a reply is held while paused, and lost when a cut or
// crash began while the call was under way (the write may have been applied).
func (n *node) leave(ctx context.Context, err error) error {
	n.holdWhilePaused(ctx)
	n.mu.Lock()
	down := n.crashed || n.cut
	n.mu.Unlock()
	if down && err == nil {
		return errCut
	}
	return err
}

// watching returns the channel closed when the node's watches must end, nil when they
// cannot start.
func (n *node) watching() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.crashed || n.cut {
		return nil
	}
	return n.cutting
}

// relay hands the events of in on, each held while the node is paused and delayed by
// the node's lag, until ctx ends or a cut or crash starts (then it closes out).
func relay[E any](ctx context.Context, n *node, in <-chan E, stop func()) <-chan E {
	out := make(chan E)
	cutting := n.watching()
	go func() {
		defer close(out)
		defer func() {
			stop()
			for range in { // until the store closes it
			}
		}()
		for {
			var ev E
			var ok bool
			select {
			case ev, ok = <-in:
			case <-cutting:
				return
			}
			if !ok {
				return
			}
			n.mu.Lock()
			lag := n.lag
			n.mu.Unlock()
			if lag > 0 {
				select {
				case <-time.After(lag):
				case <-cutting:
					return
				case <-ctx.Done():
					return
				}
			}
			if !n.holdWhilePaused(ctx) {
				return
			}
			select {
			case out <- ev:
			case <-cutting:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// nodeLease is one shard's Lease as one node reaches it. It also records whether the
// node's elector had seen the Lease (a state of it, not its absence) before each of
// its creates, to tell the elector's documented cold-start window.
type nodeLease struct {
	inner leaderelection.LeaseStore
	n     *node

	// mu guards the fields below.
	mu   sync.Mutex
	saw  bool
	cold map[string]bool // resourceVersions of creates sent before the node saw the Lease
}

func (l *nodeLease) String() string { return l.inner.String() }

func (l *nodeLease) seen() {
	l.mu.Lock()
	l.saw = true
	l.mu.Unlock()
}

func (l *nodeLease) coldStart(term uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cold[formatTerm(term)]
}

func (l *nodeLease) Get(ctx context.Context) (leaderelection.LeaseRecord, error) {
	if err := l.n.enter(ctx); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	r, err := l.inner.Get(ctx)
	if err = l.n.leave(ctx, err); err == nil {
		l.seen()
	}
	return r, err
}

func (l *nodeLease) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if err := l.n.enter(ctx); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	l.mu.Lock()
	cold := !l.saw
	l.mu.Unlock()
	out, err := l.inner.Create(ctx, r)
	if err == nil && cold {
		l.mu.Lock()
		l.cold[out.ResourceVersion] = true
		l.mu.Unlock()
	}
	if err = l.n.leave(ctx, err); err == nil {
		l.seen()
	}
	return out, err
}

func (l *nodeLease) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	if err := l.n.enter(ctx); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	out, err := l.inner.Update(ctx, r)
	if err = l.n.leave(ctx, err); err == nil {
		l.seen()
	}
	return out, err
}

func (l *nodeLease) Watch(ctx context.Context) (<-chan leaderelection.LeaseEvent, error) {
	if err := l.n.enter(ctx); err != nil {
		return nil, err
	}
	if l.n.watching() == nil {
		return nil, errCut
	}
	wctx, cancel := context.WithCancel(ctx)
	in, err := l.inner.Watch(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	out := relay(wctx, l.n, in, cancel)
	seen := make(chan leaderelection.LeaseEvent)
	go func() { // marks the Lease seen when a state of it is handed on
		defer close(seen)
		for ev := range out {
			if ev.Err == nil && !ev.Deleted {
				l.seen()
			}
			select {
			case seen <- ev:
			case <-ctx.Done():
				for range out {
				}
				return
			}
		}
	}()
	return seen, nil
}

// nodeMembers is the ring's member Leases as one node reaches them.
type nodeMembers struct {
	inner sharding.MemberStore
	n     *node
}

func (m *nodeMembers) Renew(ctx context.Context, id string, d time.Duration) error {
	if err := m.n.enter(ctx); err != nil {
		return err
	}
	return m.n.leave(ctx, m.inner.Renew(ctx, id, d))
}

func (m *nodeMembers) Leave(ctx context.Context, id string) error {
	if err := m.n.enter(ctx); err != nil {
		return err
	}
	return m.n.leave(ctx, m.inner.Leave(ctx, id))
}

func (m *nodeMembers) Watch(ctx context.Context) (<-chan sharding.MemberEvent, error) {
	if err := m.n.enter(ctx); err != nil {
		return nil, err
	}
	if m.n.watching() == nil {
		return nil, errCut
	}
	wctx, cancel := context.WithCancel(ctx)
	in, err := m.inner.Watch(wctx)
	if err != nil {
		cancel()
		return nil, err
	}
	return relay(wctx, m.n, in, cancel), nil
}
