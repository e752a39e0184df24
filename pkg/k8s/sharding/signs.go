package sharding

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// errMembersClosed is the error of a fresh read of the members whose watch closed
// before its first event.
var errMembersClosed = errors.New("sharding: member watch closed before its first event")

// signKey names the liveness of one incarnation of one member.
type signKey struct{ identity, incarnation string }

// quietRead is a fresh read of a member's Lease that showed no sign of life: the
// version it showed ("" for absent) and when it was sent.
type quietRead struct {
	version string
	sentAt  time.Time
}

// memberSigns is the liveness of the shard Leases' holders, kept on their member
// Leases (leaderelection.Liveness, given to every shard elector): for each (member,
// incarnation), when this replica last saw a sign that it may have renewed (see
// docs/design/sharding-renewal.md). Run's loop feeds it every view of the members;
// the shard electors read it. Safe for concurrent use.
type memberSigns struct {
	clock         leaderelection.Clock
	members       MemberStore
	leaseDuration time.Duration // the ring's, for the reuse of a quiet read

	// mu guards the fields below.
	mu       sync.Mutex
	looked   bool
	lookedAt time.Time              // the first view of the members
	current  map[string]MemberLease // by identity, as last seen
	signs    map[signKey]time.Time
	quiet    map[string]quietRead     // by identity, the last read that found it quiet
	reading  map[string]chan struct{} // by identity, closed when a read under way ends
}

var _ leaderelection.Liveness = (*memberSigns)(nil)

func newMemberSigns(clock leaderelection.Clock, members MemberStore, leaseDuration time.Duration) *memberSigns {
	return &memberSigns{clock: clock, members: members, leaseDuration: leaseDuration,
		current: map[string]MemberLease{}, signs: map[signKey]time.Time{},
		quiet: map[string]quietRead{}, reading: map[string]chan struct{}{}}
}

// signsKept bounds how long the sign of an incarnation no member Lease carries any
// more is kept: past it, the first look (earlier) answers for it, which gives the same
// take time once any lease duration (at most leaderelection.MaxLeaseDuration) passed.
const signsKept = leaderelection.MaxLeaseDuration

// observe takes in a whole view of the members seen at now: every member whose
// Lease appeared, changed version or went is a sign, at now, of the incarnation it
// carried and of the one it carries, and of the member without incarnation.
func (m *memberSigns) observe(now time.Time, members []MemberLease) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observeLocked(now, members)
}

func (m *memberSigns) observeLocked(now time.Time, members []MemberLease) {
	next := make(map[string]MemberLease, len(members))
	for _, l := range members {
		next[l.Identity] = l
	}
	for id, l := range next {
		if prev, had := m.current[id]; !had || prev.Version != l.Version {
			m.sign(now, id, prev, had)
			m.signs[signKey{id, l.Incarnation}] = now
		}
	}
	for id, prev := range m.current {
		if _, ok := next[id]; !ok {
			m.sign(now, id, prev, true)
		}
	}
	m.current = next
	if !m.looked {
		m.looked, m.lookedAt = true, now
	}
	for k, at := range m.signs {
		if cur, ok := next[k.identity]; (!ok || cur.Incarnation != k.incarnation) && k.incarnation != "" && now.Sub(at) > signsKept {
			delete(m.signs, k)
		}
	}
}

// sign records a change of id's Lease at now: a sign of the member without
// incarnation, and of prev's incarnation when had.
func (m *memberSigns) sign(now time.Time, id string, prev MemberLease, had bool) {
	m.signs[signKey{id, ""}] = now
	if had {
		m.signs[signKey{id, prev.Incarnation}] = now
	}
}

// LastSign is leaderelection.Liveness's: the last sign of holder's incarnation, or
// the first view of the members when it showed none since.
func (m *memberSigns) LastSign(holder, incarnation string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastSignLocked(holder, incarnation)
}

func (m *memberSigns) lastSignLocked(holder, incarnation string) (time.Time, bool) {
	if !m.looked {
		return time.Time{}, false
	}
	if at, ok := m.signs[signKey{holder, incarnation}]; ok {
		return at, true
	}
	return m.lookedAt, true
}

// Confirm is leaderelection.Liveness's: it lists the members afresh (the first event
// of a new member watch) and takes the view in. One read serves the shard electors
// that ask about one holder at once; a read that found holder quiet, sent a
// LeaseDuration after its last sign, answers later calls while holder's Lease stays
// at the version it showed and no sign came since (the holder's terms it covered are
// over for good).
func (m *memberSigns) Confirm(ctx context.Context, holder, incarnation string, sign time.Time) (bool, error) {
	for {
		m.mu.Lock()
		if at, known := m.lastSignLocked(holder, incarnation); !known || !at.Equal(sign) {
			m.mu.Unlock()
			return false, nil // a sign came since the caller looked
		}
		if q, ok := m.quiet[holder]; ok && q.version == m.current[holder].Version && !q.sentAt.Before(sign.Add(m.leaseDuration)) {
			m.mu.Unlock()
			return true, nil
		}
		wait, busy := m.reading[holder]
		if !busy {
			done := make(chan struct{})
			m.reading[holder] = done
			m.mu.Unlock()
			defer func() {
				m.mu.Lock()
				delete(m.reading, holder)
				m.mu.Unlock()
				close(done)
			}()
			return m.read(ctx, holder, incarnation, sign)
		}
		m.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// memberLister is a MemberStore that reads the members afresh without a watch
// (KubeMembers: a quorum list), for Confirm.
type memberLister interface {
	List(ctx context.Context) ([]MemberLease, error)
}

// read lists the members afresh and reports whether holder's incarnation showed no
// sign after sign.
func (m *memberSigns) read(ctx context.Context, holder, incarnation string, sign time.Time) (bool, error) {
	sentAt := m.clock.Now()
	members, err := m.list(ctx, holder)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observeLocked(m.clock.Now(), members)
	if after, _ := m.lastSignLocked(holder, incarnation); !after.Equal(sign) {
		return false, nil
	}
	m.quiet[holder] = quietRead{version: m.current[holder].Version, sentAt: sentAt}
	return true, nil
}

// list reads the members afresh: the store's List, or the first event of a new watch
// (a MemoryMembers' is its current state).
func (m *memberSigns) list(ctx context.Context, holder string) ([]MemberLease, error) {
	if l, ok := m.members.(memberLister); ok {
		members, err := l.List(ctx)
		if err != nil {
			return nil, fmt.Errorf("sharding: read member %s: %w", holder, err)
		}
		return members, nil
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := m.members.Watch(rctx)
	if err != nil {
		return nil, fmt.Errorf("sharding: read member %s: %w", holder, err)
	}
	var ev MemberEvent
	var ok bool
	select {
	case ev, ok = <-events:
	case <-ctx.Done():
	}
	cancel()
	for range events { // until the store closes it
	}
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case !ok:
		return nil, errMembersClosed
	case ev.Err != nil:
		return nil, fmt.Errorf("sharding: read member %s: %w", holder, ev.Err)
	}
	return ev.Members, nil
}
