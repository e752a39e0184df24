package sharding

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// MemberLease is one replica's member Lease as a MemberStore reports it.
type MemberLease struct {
	// Identity is the replica's identity (its Lease's holderIdentity).
	Identity string
	// LeaseDuration is how long the others count the replica live after they saw its
	// lease change last.
	LeaseDuration time.Duration
	// Version changes with every write of the lease (its resourceVersion): a decimal
	// number that grows with every write of the ring's member Leases.
	Version string
	// Shape is the writer's Ring.Shape: replicas of different shapes must never lead
	// shards at once (docs/design/sharding.md, # Ring shape). "" for a lease written
	// without one (a Baton version before shapes were recorded): taken as every shape.
	Shape string
	// State is the writer's part in the ring; "" (a lease written without one) is
	// MemberActive.
	State MemberState
	// Incarnation names the writer's run (Config.Incarnation, or a random name per
	// run): the shard Leases it takes record the same, and a change of the member
	// Lease is a sign of life of this incarnation's shard terms only (see
	// docs/design/sharding-renewal.md). "" for a lease written without one.
	Incarnation string
	// Shards are the shards whose terms the writer led when it sent the write, as
	// ranges ("0-3,7"; "" for none): the write renews those terms only, and is a sign
	// of life of their holder for those shards only (see
	// docs/design/sharding-renewal.md). A claim that cannot be read claims every
	// shard.
	Shards string
	// HandOffs says that the writer takes one-write hand-overs
	// (leaderelection.HandOffs): only such a member is named holder by a hand-over;
	// one of a Baton version before them gets a release naming it.
	HandOffs bool
}

// MemberState is a member's part in the ring, as its member Lease says.
type MemberState string

const (
	// MemberActive: the member campaigns for its shards, or is about to: placement
	// counts it, and a member of another shape that sees it waits.
	MemberActive MemberState = "active"
	// MemberWaiting: the member saw an active member of another shape and leads no
	// shard: placement does not count it, and nobody waits for it.
	MemberWaiting MemberState = "waiting"
	// MemberLeaving: the member is handing its shards over and stopping: placement
	// does not count it, but a member of another shape still waits for it, until its
	// Lease is deleted (after its shard terms ended) or expires.
	MemberLeaving MemberState = "leaving"
)

// state returns m's state, MemberActive for a lease written without one.
func (m MemberLease) state() MemberState {
	if m.State == "" {
		return MemberActive
	}
	return m.State
}

// MemberEvent is one observation of a ring's member Leases.
type MemberEvent struct {
	// Members is every member Lease of the ring as of this event, in no order.
	Members []MemberLease
	// Err, when set, is why the watch broke: the event carries no members, and the
	// store closes the channel after it.
	Err error
}

// MemberStore keeps the member Leases of one ring: one per replica, which only that
// replica writes. Implementations are safe for concurrent use. Stores in this
// package: MemoryMembers, KubeMembers.
type MemberStore interface {
	// Renew writes lease.Identity's member lease with lease's duration, shape,
	// state and incarnation (lease.Version is not used), creating it when absent, with a new Version
	// every time, and returns that Version.
	Renew(ctx context.Context, lease MemberLease) (version string, err error)
	// Leave deletes identity's member lease; nil when it is absent.
	Leave(ctx context.Context, identity string) error
	// Expire deletes identity's member lease if its Version is still version (another
	// member's lease that expired, see Run); nil when it is absent or was written
	// since.
	Expire(ctx context.Context, identity, version string) error
	// Watch delivers every member lease of the ring at once, then again after every
	// change; a store may skip to the latest, but each event is the whole state at
	// one instant (every write before that instant is in it). The store closes the
	// channel when ctx ends or the watch breaks (after an event with Err set if it
	// knows why); the caller then watches again.
	Watch(ctx context.Context) (<-chan MemberEvent, error)
}

// MemoryMembers is an in-process MemberStore for the replicas of one process (tests,
// demos). The zero value is not usable; call NewMemoryMembers.
type MemoryMembers struct {
	// mu guards the fields below.
	mu       sync.Mutex
	version  uint64
	members  map[string]MemberLease
	watchers map[chan MemberEvent]struct{}
}

var _ MemberStore = (*MemoryMembers)(nil)

// NewMemoryMembers returns an empty MemoryMembers.
func NewMemoryMembers() *MemoryMembers {
	return &MemoryMembers{members: map[string]MemberLease{}, watchers: map[chan MemberEvent]struct{}{}}
}

// Renew creates or renews lease.Identity's member lease.
func (m *MemoryMembers) Renew(ctx context.Context, lease MemberLease) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if lease.Identity == "" {
		return "", fmt.Errorf("%w: renew of a member with no identity", ErrInvalidConfig)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
	lease.Version = strconv.FormatUint(m.version, 10)
	m.members[lease.Identity] = lease
	m.notifyLocked()
	return lease.Version, nil
}

// Leave deletes identity's member lease.
func (m *MemoryMembers) Leave(ctx context.Context, identity string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.members[identity]; ok {
		delete(m.members, identity)
		m.notifyLocked()
	}
	return nil
}

// Expire deletes identity's member lease if its Version is version.
func (m *MemoryMembers) Expire(ctx context.Context, identity, version string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.members[identity]; ok && l.Version == version {
		delete(m.members, identity)
		m.notifyLocked()
	}
	return nil
}

// Watch delivers the members now and after every change, skipping to the latest when
// the reader is slow. The channel is closed when ctx ends.
func (m *MemoryMembers) Watch(ctx context.Context) (<-chan MemberEvent, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan MemberEvent, 1)
	m.mu.Lock()
	m.watchers[ch] = struct{}{}
	ch <- MemberEvent{Members: m.snapshotLocked()}
	m.mu.Unlock()
	out := make(chan MemberEvent)
	// The relay hands the latest snapshot to the reader; writers only ever replace
	// the one waiting in ch, so they never block.
	go func() {
		defer close(out)
		defer func() {
			m.mu.Lock()
			delete(m.watchers, ch)
			m.mu.Unlock()
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-ch:
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (m *MemoryMembers) snapshotLocked() []MemberLease {
	out := make([]MemberLease, 0, len(m.members))
	for _, l := range m.members {
		out = append(out, l)
	}
	return out
}

// notifyLocked puts the latest snapshot in every watcher's slot, replacing one not
// yet taken.
func (m *MemoryMembers) notifyLocked() {
	for ch := range m.watchers {
		select {
		case <-ch:
		default:
		}
		ch <- MemberEvent{Members: m.snapshotLocked()}
	}
}

// liveness judges which members are live, by the local clock: a member is live from
// when its lease was seen until its LeaseDuration after the lease last changed (a new
// Version), as the elector judges a holder, so clocks of different nodes need not
// agree. Owned by the sharder's loop; not safe for concurrent use.
type liveness struct {
	seen   map[string]seenMember
	looked bool // a first view was observed
}

type seenMember struct {
	lease      MemberLease
	observedAt time.Time
	dead       bool // proven dead (kill) since lease was seen: not live
	// unvouched: the lease was seen on the first view and not written since, so
	// nothing shows that its member ran after this replica started looking.
	unvouched bool
	// joined is the Version of the first write seen of the lease's incarnation: its
	// join, or, for a member already there on this replica's first view, that view's.
	joined string
}

// expires returns when m stops counting live: its LeaseDuration after its lease was
// seen change.
func (m seenMember) expires() time.Time { return m.observedAt.Add(m.lease.LeaseDuration) }

// liveAt reports whether m counts live at now: not proven dead, not expired.
func (m seenMember) liveAt(now time.Time) bool { return !m.dead && now.Before(m.expires()) }

// observe takes a snapshot of the member leases seen at now. A lease's duration is
// bounded as the elector bounds a holder's (leaderelection.BoundLeaseDuration: at
// most MaxLeaseDuration, configured when it has none), so that a leftover or
// hand-written member Lease with a huge leaseDurationSeconds does not count live, and
// keep its share of shards without owner, for longer than an hour. It returns each
// lease seen in a new version whose duration was out of that range, as written, for
// the caller to log and count once per version.
func (l *liveness) observe(now time.Time, members []MemberLease, configured time.Duration) (outOfRange []MemberLease) {
	next := make(map[string]seenMember, len(members))
	for _, m := range members {
		prev, ok := l.seen[m.Identity]
		if ok && prev.lease.Version == m.Version {
			next[m.Identity] = prev
			continue
		}
		written := m
		var bad bool
		m.LeaseDuration, bad = leaderelection.BoundLeaseDuration(m.LeaseDuration, configured)
		if bad {
			outOfRange = append(outOfRange, written)
		}
		joined := m.Version
		if ok && prev.lease.Incarnation == m.Incarnation {
			joined = prev.joined
		}
		next[m.Identity] = seenMember{lease: m, observedAt: now, unvouched: !l.looked, joined: joined}
	}
	l.seen, l.looked = next, true
	return outOfRange
}

// memberWrites are where a member's lease stands in the order of the ring's member
// Lease writes (MemberLease.Version, a decimal number that grows with each): the
// first write seen of its incarnation, and its last.
type memberWrites struct{ joined, last uint64 }

// writes returns the members' memberWrites, leaving out those whose Version is not a
// decimal number (a MemberStore that breaks its contract: no move is judged withheld
// by them, see withholds).
func (l *liveness) writes() map[string]memberWrites {
	out := make(map[string]memberWrites, len(l.seen))
	for id, m := range l.seen {
		joined, err1 := strconv.ParseUint(m.joined, 10, 64)
		last, err2 := strconv.ParseUint(m.lease.Version, 10, 64)
		if err1 == nil && err2 == nil {
			out[id] = memberWrites{joined: joined, last: last}
		}
	}
	return out
}

// withholds reports whether, as far as writes tell, holder withholds its hand-overs
// to target (docs/design/sharding.md, # Hand-over targets): target has not written its
// lease since holder's incarnation joined, so holder may have seen it only on its
// first view. A holder's first view comes before its join write (it joins once its
// electors watch), so a target write after that join was watched by holder. The
// guess is wrong only for a target that wrote between the two, and then costs order
// (turns.go), never safety.
func withholds(writes map[string]memberWrites, holder, target string) bool {
	h, ok1 := writes[holder]
	t, ok2 := writes[target]
	return ok1 && ok2 && t.last < h.joined
}

// unvouched returns the members whose lease was seen only as it was on the first
// view, unwritten since, sorted: a member that died before this replica started
// looking looks like that until its lease expires here, a LeaseDuration after that
// first view (later than the others, who saw it renew, count it gone), so no shard
// is handed to one. A live member renews within a RetryPeriod.
func (l *liveness) unvouched() []string {
	var out []string
	for id, m := range l.seen {
		if m.unvouched {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// kill counts id dead until its lease is seen written again (a new Version: a new
// run of that identity); it reports whether id was counted live. With incarnation
// set, only a lease of that run is counted dead (a new run's lease seen before the
// old run's death was proven stays live).
func (l *liveness) kill(id, incarnation string) bool {
	m, ok := l.seen[id]
	if !ok || m.dead || incarnation != "" && m.lease.Incarnation != incarnation {
		return false
	}
	m.dead = true
	l.seen[id] = m
	return true
}

// incarnations returns the incarnation of each member not counted dead, other than
// self, whose lease records one, keyed by incarnation.
func (l *liveness) incarnations(self string) map[string]string {
	out := map[string]string{}
	for id, m := range l.seen {
		if id != self && !m.dead && m.lease.Incarnation != "" {
			out[m.lease.Incarnation] = id
		}
	}
	return out
}

// gone returns the leases, as last seen, of the members other than self not live at
// now: proven dead, or expired by the local clock.
func (l *liveness) gone(now time.Time, self string) []MemberLease {
	var out []MemberLease
	for id, m := range l.seen {
		if id != self && !m.liveAt(now) {
			out = append(out, m.lease)
		}
	}
	return out
}

// live returns the leases of the members live at now, sorted by identity.
func (l *liveness) live(now time.Time) []MemberLease {
	var out []MemberLease
	for _, m := range l.seen {
		if m.liveAt(now) {
			out = append(out, m.lease)
		}
	}
	slices.SortFunc(out, func(a, b MemberLease) int { return strings.Compare(a.Identity, b.Identity) })
	return out
}

// version returns the Version of id's lease as last seen, and whether it was seen.
func (l *liveness) version(id string) (string, MemberState, bool) {
	m, ok := l.seen[id]
	return m.lease.Version, m.lease.state(), ok
}

// nextExpiry returns the earliest instant after now at which a live member expires.
func (l *liveness) nextExpiry(now time.Time) (time.Time, bool) {
	var at time.Time
	ok := false
	for _, m := range l.seen {
		if end := m.expires(); m.liveAt(now) && (!ok || end.Before(at)) {
			at, ok = end, true
		}
	}
	return at, ok
}
