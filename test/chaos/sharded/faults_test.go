package sharded

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// Errors of a node's calls under a fault.
var (
	errCrashed = errors.New("sharded chaos: replica crashed")
	errCut     = errors.New("sharded chaos: replica cut off from the store")
	// errMemberFail is the error of a member Lease renewal failed by the fault.
	errMemberFail = errors.New("sharded chaos: member lease renewal failed")
)

// node is one replica's way to the stores and to the fenced register, with the faults
// of that replica: crashed (for good), cut off (calls fail at once or hang until their
// context ends; watches close, new ones fail), paused (calls, replies, watch
// deliveries and register writes held until it resumes; the elector's timers keep
// running, so its terms end on time by its clock, as a resumed process's lazy check
// reports) and lagging watches (every event delivered lag late). Every call, reply
// and watch delivery also takes a seeded latency below netLatency, so that what the
// replicas do never happens at one instant of fake time, where the order of
// goroutines would decide it, and a seed replays exactly.
type node struct {
	id   string
	seed uint64

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
	// memberFail makes the member Lease's renewals fail while the shard Leases' calls
	// go through (a fault of the Lease that carries the shard terms).
	memberFail bool
}

func newNode(id string, shards int, seed uint64) *node {
	return &node{id: id, seed: seed, cutting: make(chan struct{}), resumed: make(chan struct{}), leases: make([]*nodeLease, shards)}
}

// netLatency bounds the seeded latency of every call of a node (each way), every
// watch delivery and every fenced write: random per stream of calls, it orders what
// would otherwise happen at one instant of fake time (two replicas' writes, the
// deliveries a resume releases, an event and a timer), so that the order does not
// depend on goroutine scheduling and a seed replays exactly.
const netLatency = time.Millisecond

// Kinds of latency stream of a node: one per operation of each store, so that the
// latencies of one operation's calls do not depend on the order in which calls of
// another operation (on another goroutine) drew theirs.
const (
	opGet uint64 = iota + 1
	opCreate
	opUpdate
	opWatch
	opRenew
	opLeave
	opEvents // the deliveries of one watch
	opExpire
)

// latency is one seeded stream of latencies. Safe for concurrent use; the calls that
// draw from one stream are sequential (one elector's calls of one operation, one
// watch's deliveries), so the order of its draws is the seed's.
type latency struct {
	// mu guards rng.
	mu  sync.Mutex
	rng *rand.Rand
}

// stream returns the latency stream of the node's operation op on store (0 the
// members, 1+i shard i), the n-th of its kind (watches: one per Watch call).
func (n *node) stream(store int, op, nth uint64) *latency {
	return &latency{rng: rand.New(rand.NewPCG(n.seed^0x1a7e9c7, replicaNumber(n.id)<<48|uint64(store)<<32|op<<24|nth))}
}

// next draws the next latency, in [0, netLatency).
func (l *latency) next() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Duration(l.rng.Int64N(int64(netLatency)))
}

// wait sleeps d, or until ctx ends; it reports whether d passed.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stores wraps shared for this node.
func (n *node) stores(shared sharding.Stores) sharding.Stores {
	return sharding.Stores{
		Shard: func(i int) leaderelection.LeaseStore {
			l := newNodeLease(shared.Shard(i), n, i)
			n.mu.Lock()
			n.leases[i] = l
			n.mu.Unlock()
			return l
		},
		Members: newNodeMembers(shared.Members, n),
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

func (n *node) setMemberFail(on bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.memberFail = on
}

// stopped reports whether the node was crashed or cut off (and not yet back).
func (n *node) stopped() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.crashed || n.cut
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

// trip is the latencies of one call, drawn when it starts (before a pause can hold
// it: calls a resume releases together would draw in the order the scheduler runs
// them).
type trip struct{ req, reply time.Duration }

func (l *latency) trip() trip { return trip{req: l.next(), reply: l.next()} }

// enter is the start of every call: held while paused, then the request's latency,
// then failed when crashed or cut.
func (n *node) enter(ctx context.Context, tr trip) error {
	if !n.holdWhilePaused(ctx) {
		return ctx.Err()
	}
	if !wait(ctx, tr.req) {
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

// leave is the end of every call: a reply is held while paused (until ctx ends), then
// takes its latency (lost if ctx ends meanwhile), and is lost when a cut or crash
// began while the call was under way (the write may have been applied).
func (n *node) leave(ctx context.Context, err error, tr trip) error {
	if n.holdWhilePaused(ctx) && !wait(ctx, tr.reply) && err == nil {
		return ctx.Err()
	}
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

// relay hands the events of in on, each after a latency from net, delayed by the
// node's lag, and held while the node is paused (with a new latency after the
// resume, so that the deliveries a resume releases arrive at distinct instants),
// until ctx ends or cutting closes (a cut or crash started: it closes out).
func relay[E any](ctx context.Context, n *node, in <-chan E, stop func(), cutting <-chan struct{}, net *latency) <-chan E {
	out := make(chan E)
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
			d := n.lag + net.next()
			n.mu.Unlock()
			for {
				select {
				case <-time.After(d):
				case <-cutting:
					return
				case <-ctx.Done():
					return
				}
				n.mu.Lock()
				paused, resumed := n.paused, n.resumed
				n.mu.Unlock()
				if !paused {
					break
				}
				select {
				case <-resumed:
				case <-cutting:
					return
				case <-ctx.Done():
					return
				}
				d = net.next()
			}
			select {
			case <-cutting:
				return // cut at the instant of delivery: never delivered (a seed replays)
			default:
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
	inner                         leaderelection.LeaseStore
	n                             *node
	shard                         int
	get, create, update, watchNet *latency

	// mu guards the fields below.
	mu      sync.Mutex
	saw     bool
	cold    map[string]bool // resourceVersions of creates sent before the node saw the Lease
	watches uint64          // Watch calls so far, to seed each watch's deliveries
}

func newNodeLease(inner leaderelection.LeaseStore, n *node, shard int) *nodeLease {
	return &nodeLease{
		inner: inner, n: n, shard: shard, cold: map[string]bool{},
		get: n.stream(1+shard, opGet, 0), create: n.stream(1+shard, opCreate, 0),
		update: n.stream(1+shard, opUpdate, 0), watchNet: n.stream(1+shard, opWatch, 0),
	}
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
	tr := l.get.trip()
	if err := l.n.enter(ctx, tr); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	r, err := l.inner.Get(ctx)
	if err = l.n.leave(ctx, err, tr); err == nil {
		l.seen()
	}
	return r, err
}

func (l *nodeLease) Create(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	tr := l.create.trip()
	if err := l.n.enter(ctx, tr); err != nil {
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
	if err = l.n.leave(ctx, err, tr); err == nil {
		l.seen()
	}
	return out, err
}

func (l *nodeLease) Update(ctx context.Context, r leaderelection.LeaseRecord) (leaderelection.LeaseRecord, error) {
	tr := l.update.trip()
	if err := l.n.enter(ctx, tr); err != nil {
		return leaderelection.LeaseRecord{}, err
	}
	out, err := l.inner.Update(ctx, r)
	if err = l.n.leave(ctx, err, tr); err == nil {
		l.seen()
	}
	return out, err
}

func (l *nodeLease) Watch(ctx context.Context) (<-chan leaderelection.LeaseEvent, error) {
	l.mu.Lock()
	l.watches++
	events := l.n.stream(1+l.shard, opEvents, l.watches)
	l.mu.Unlock()
	in, wctx, cancel, cutting, err := openWatch(l.n, ctx, l.watchNet.trip(), l.inner.Watch)
	if err != nil {
		return nil, err
	}
	out := relay(wctx, l.n, in, cancel, cutting, events)
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

// openWatch opens a watch of the store with open under the node's faults: it returns
// the store's channel, the watch's context and its cancel, and the channel that
// closes when a cut or crash ends the watch.
func openWatch[E any](n *node, ctx context.Context, tr trip, open func(context.Context) (<-chan E, error)) (<-chan E, context.Context, context.CancelFunc, <-chan struct{}, error) {
	if err := n.enter(ctx, tr); err != nil {
		return nil, nil, nil, nil, err
	}
	cutting := n.watching()
	if cutting == nil {
		return nil, nil, nil, nil, errCut
	}
	wctx, cancel := context.WithCancel(ctx)
	in, err := open(wctx)
	if err != nil {
		cancel()
		return nil, nil, nil, nil, err
	}
	drain := func() {
		cancel()
		for range in { // until the store closes it
		}
	}
	if err := n.leave(ctx, nil, tr); err != nil {
		drain()
		return nil, nil, nil, nil, err
	}
	return in, wctx, cancel, cutting, nil
}

// nodeMembers is the ring's member Leases as one node reaches them.
type nodeMembers struct {
	inner                      sharding.MemberStore
	n                          *node
	renew, leave, open, expire *latency

	// mu guards watches.
	mu      sync.Mutex
	watches uint64 // Watch calls so far, to seed each watch's deliveries
}

func newNodeMembers(inner sharding.MemberStore, n *node) *nodeMembers {
	return &nodeMembers{inner: inner, n: n, renew: n.stream(0, opRenew, 0), leave: n.stream(0, opLeave, 0),
		open: n.stream(0, opWatch, 0), expire: n.stream(0, opExpire, 0)}
}

func (m *nodeMembers) Renew(ctx context.Context, l sharding.MemberLease) (string, error) {
	tr := m.renew.trip()
	if err := m.n.enter(ctx, tr); err != nil {
		return "", err
	}
	m.n.mu.Lock()
	failing := m.n.memberFail
	m.n.mu.Unlock()
	if failing {
		return "", m.n.leave(ctx, errMemberFail, tr)
	}
	version, err := m.inner.Renew(ctx, l)
	if err = m.n.leave(ctx, err, tr); err != nil {
		return "", err
	}
	return version, nil
}

func (m *nodeMembers) Leave(ctx context.Context, id string) error {
	tr := m.leave.trip()
	if err := m.n.enter(ctx, tr); err != nil {
		return err
	}
	return m.n.leave(ctx, m.inner.Leave(ctx, id), tr)
}

func (m *nodeMembers) Expire(ctx context.Context, id, version string) error {
	tr := m.expire.trip()
	if err := m.n.enter(ctx, tr); err != nil {
		return err
	}
	return m.n.leave(ctx, m.inner.Expire(ctx, id, version), tr)
}

func (m *nodeMembers) Watch(ctx context.Context) (<-chan sharding.MemberEvent, error) {
	m.mu.Lock()
	m.watches++
	events := m.n.stream(0, opEvents, m.watches)
	m.mu.Unlock()
	in, wctx, cancel, cutting, err := openWatch(m.n, ctx, m.open.trip(), m.inner.Watch)
	if err != nil {
		return nil, err
	}
	return relay(wctx, m.n, in, cancel, cutting, events), nil
}
