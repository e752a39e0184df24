package sharding

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
)

// errMembersClosed is the error of a fresh read of the members whose watch closed
// before its first event.
var errMembersClosed = errors.New("sharding: member watch closed before its first event")

// signKey names the liveness of one incarnation of one member for one shard.
type signKey struct {
	identity, incarnation string
	shard                 int
}

// quietRead is a fresh read of a member's Lease that showed no sign of life: the
// version it showed ("" for absent) and when it was sent.
type quietRead struct {
	version string
	sentAt  time.Time
}

// memberSigns is the liveness of the shard Leases' holders, kept on their member
// Leases: for each (member, incarnation, shard), when this replica last saw a sign
// that the member may have renewed that shard's term: a change of its member Lease
// while it claimed the shard (MemberLease.Shards) for that incarnation, before or
// after the change (see docs/design/sharding-renewal.md). Run's loop feeds it every
// view of the members; each shard elector reads it through its shardLiveness. Safe
// for concurrent use.
type memberSigns struct {
	clock         leaderelection.Clock
	members       MemberStore
	shards        int           // the ring's S: a claim that cannot be read claims every shard
	leaseDuration time.Duration // the ring's, for the reuse of a quiet read

	// mu guards the fields below.
	mu       sync.Mutex
	looked   bool
	lookedAt time.Time              // the first view of the members
	current  map[string]MemberLease // by identity, as last seen
	signs    map[signKey]time.Time
	prunedAt time.Time
	quiet    map[string]quietRead     // by identity, the last read that found it quiet
	reading  map[string]chan struct{} // by identity, closed when a read under way ends
	own      []ownWrite               // this run's last writes of its member Lease, oldest first
}

// ownWrite is a write of this run's member Lease that succeeded: the version it got
// and when it was sent.
type ownWrite struct {
	version string
	sentAt  time.Time
}

// ownWritesKept bounds the own writes remembered for Cited: one per RetryPeriod,
// and a hand-off cites a version at most a RenewDeadline old.
const ownWritesKept = 16

// wrote records a write of this run's member Lease, sent at sentAt, that got version.
func (m *memberSigns) wrote(version string, sentAt time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.own) == ownWritesKept {
		m.own = append(m.own[:0], m.own[1:]...)
	}
	m.own = append(m.own, ownWrite{version, sentAt})
}

// cited returns when this run sent the write of its member Lease that got version.
func (m *memberSigns) cited(version string) (time.Time, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.own {
		if w.version == version {
			return w.sentAt, true
		}
	}
	return time.Time{}, false
}

// others reports whether the members as last seen include another than self.
func (m *memberSigns) others(self string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.current)
	if _, in := m.current[self]; in {
		n--
	}
	return n > 0
}

// left reports whether holder's member Lease, as last seen, was written by
// incarnation leaving (MemberLeaving) without claiming shard.
func (m *memberSigns) left(holder, incarnation string, shard int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, seen := m.current[holder]
	return seen && incarnation != "" && l.Incarnation == incarnation && l.state() == MemberLeaving &&
		!slices.Contains(claimedShards(l.Shards, m.shards), shard)
}

// handOff returns the incarnation and the Lease version of candidate as last seen,
// if its Lease then said it was active.
func (m *memberSigns) handOff(candidate string) (incarnation, version string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, seen := m.current[candidate]
	if !seen || !l.HandOffs || l.state() != MemberActive || l.Incarnation == "" || l.Version == "" {
		return "", "", false
	}
	return l.Incarnation, l.Version, true
}

func newMemberSigns(clock leaderelection.Clock, members MemberStore, shards int, leaseDuration time.Duration) *memberSigns {
	return &memberSigns{clock: clock, members: members, shards: shards, leaseDuration: leaseDuration,
		current: map[string]MemberLease{}, signs: map[signKey]time.Time{},
		quiet: map[string]quietRead{}, reading: map[string]chan struct{}{}}
}

// signsKept bounds how long a sign is kept: past it, the first look (earlier)
// answers for it, which gives the same take time once any lease duration (at most
// leaderelection.MaxLeaseDuration) passed. A claimed shard's sign is renewed with
// every renewal of its claimer.
const signsKept = leaderelection.MaxLeaseDuration

// observe takes in a whole view of the members seen at now: every member whose
// Lease appeared, changed version or went is a sign, at now, for each shard it
// claimed before the change and each it claims after, of the incarnation that made
// the claim (and of a holder that recorded none).
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
			if had {
				m.sign(now, prev)
			}
			m.sign(now, l)
		}
	}
	for id, prev := range m.current {
		if _, ok := next[id]; !ok {
			m.sign(now, prev)
		}
	}
	m.current = next
	if !m.looked {
		m.looked, m.lookedAt, m.prunedAt = true, now, now
	}
	if now.Sub(m.prunedAt) > signsKept {
		m.prunedAt = now
		for k, at := range m.signs {
			if now.Sub(at) > signsKept {
				delete(m.signs, k)
			}
		}
	}
}

// sign records a change at now of l's state: a sign, for each shard l claims, of
// l's incarnation and of a holder that recorded none.
func (m *memberSigns) sign(now time.Time, l MemberLease) {
	for _, shard := range claimedShards(l.Shards, m.shards) {
		m.signs[signKey{l.Identity, l.Incarnation, shard}] = now
		m.signs[signKey{l.Identity, "", shard}] = now
	}
}

// lastSignLocked is the last sign of holder's incarnation for shard, or the first
// view of the members when it showed none since; false before the first view.
func (m *memberSigns) lastSignLocked(holder, incarnation string, shard int) (time.Time, bool) {
	if !m.looked {
		return time.Time{}, false
	}
	if at, ok := m.signs[signKey{holder, incarnation, shard}]; ok {
		return at, true
	}
	return m.lookedAt, true
}

// shardLiveness is one shard elector's leaderelection.Liveness and HandOffs: the
// member signs of its shard, the members placement counts (gone; nil counts none),
// and those a hand-over may name holder (handOffTo; nil names none).
type shardLiveness struct {
	m         *memberSigns
	shard     int
	gone      func(candidate string) bool
	handOffTo func(candidate string) bool
	accept    func(shard int) bool
}

var (
	_ leaderelection.Liveness = shardLiveness{}
	_ leaderelection.HandOffs = shardLiveness{}
)

// HandOff is leaderelection.HandOffs's: a member this replica counts live and saw
// write its member Lease while it watched (Sharder.handOffTarget), whose Lease says
// it is active, is named holder, citing the version of its Lease seen last.
func (l shardLiveness) HandOff(candidate string) (incarnation, cite string, ok bool) {
	if l.handOffTo == nil || !l.handOffTo(candidate) {
		return "", "", false
	}
	return l.m.handOff(candidate)
}

// Cited is leaderelection.HandOffs's: the send of this run's member Lease write that
// got version cite.
func (l shardLiveness) Cited(cite string) (time.Time, bool) {
	return l.m.cited(cite)
}

// Accept is leaderelection.HandOffs's (Sharder.acceptHandOff).
func (l shardLiveness) Accept() bool {
	return l.accept != nil && l.accept(l.shard)
}

// Left is leaderelection.HandOffs's: holder's member Lease, as last seen, says its
// incarnation leaves and does not claim the shard.
func (l shardLiveness) Left(holder, incarnation string) bool {
	return l.m.left(holder, incarnation, l.shard)
}

// LastSign is leaderelection.Liveness's: the last sign of holder's incarnation for
// the shard, or the first view of the members when it showed none since.
func (l shardLiveness) LastSign(holder, incarnation string) (time.Time, bool) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.m.lastSignLocked(holder, incarnation, l.shard)
}

// Gone is leaderelection.Liveness's: candidate, named by a hand-over, is not a
// member this replica's placement counts (Sharder.candidateGone).
func (l shardLiveness) Gone(candidate string) bool {
	return l.gone == nil || l.gone(candidate)
}

// Confirm is leaderelection.Liveness's: it lists the members afresh and takes the
// view in. One read serves the shard electors that ask about one holder at once; a
// read that found holder quiet for the shard, sent a LeaseDuration after its last
// sign, answers later calls while holder's Lease stays at the version it showed and
// no sign came since (the holder's terms it covered are over for good).
func (l shardLiveness) Confirm(ctx context.Context, holder, incarnation string, sign time.Time) (bool, error) {
	m := l.m
	for {
		m.mu.Lock()
		if at, known := m.lastSignLocked(holder, incarnation, l.shard); !known || !at.Equal(sign) {
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
			return m.read(ctx, holder, incarnation, l.shard, sign)
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
// sign for shard after sign.
func (m *memberSigns) read(ctx context.Context, holder, incarnation string, shard int, sign time.Time) (bool, error) {
	sentAt := m.clock.Now()
	members, err := m.list(ctx, holder)
	if err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observeLocked(m.clock.Now(), members)
	if after, _ := m.lastSignLocked(holder, incarnation, shard); !after.Equal(sign) {
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

// formatShards writes a sorted set of shards as MemberLease.Shards: ranges, "0-3,7".
func formatShards(shards []int) string {
	var b strings.Builder
	for i := 0; i < len(shards); {
		j := i
		for j+1 < len(shards) && shards[j+1] == shards[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(shards[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(shards[j]))
		}
		i = j + 1
	}
	return b.String()
}

// claimedShards reads MemberLease.Shards of a ring of n shards; a claim it cannot
// read (not ranges of shards below n) claims every shard, so that no renewal of a
// term is missed.
func claimedShards(claim string, n int) []int {
	if claim == "" {
		return nil
	}
	var out []int
	for _, part := range strings.Split(claim, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, errA := strconv.Atoi(lo)
		b := a
		var errB error
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if errA != nil || errB != nil || a < 0 || b < a || b >= n {
			return allShards(n)
		}
		for k := a; k <= b; k++ {
			out = append(out, k)
		}
	}
	return out
}

func allShards(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}
