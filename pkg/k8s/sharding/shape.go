package sharding

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// shapeView is what the live member Leases say about shapes at one instant.
type shapeView struct {
	// peers are the live active members of this replica's shape (or of none
	// recorded), itself excepted: the members placement counts.
	peers []string
	// blockers are the live members of another shape that are active or leaving: a
	// replica not yet admitted waits while there is one.
	blockers []string
	// mismatched are the live members of another shape, in any state.
	mismatched []string
}

// view returns the shape view of the members live at now.
func (l *loop) view(now time.Time) shapeView {
	s := l.s
	var v shapeView
	for _, m := range l.liveness.live(now) {
		if m.Identity == s.config.Identity {
			continue
		}
		st := m.state()
		if m.Shape == "" || m.Shape == s.shape() {
			if st == MemberActive {
				v.peers = append(v.peers, m.Identity)
			}
			continue
		}
		v.mismatched = append(v.mismatched, m.Identity)
		if st != MemberWaiting {
			v.blockers = append(v.blockers, m.Identity)
		}
	}
	return v
}

// admit moves this replica towards campaigning, by the rule of docs/design/sharding.md,
// # Ring shape: it campaigns only once a view of the members that includes its own
// active member Lease shows no live member of another shape that is active or
// leaving. Seeing one there, it writes its Lease waiting, refuses (logged, counted,
// Refusing true) and tries again once no such member is live. Once admitted, it
// stays so until it leaves or its member Lease goes unrenewed for RenewDeadline
// (checkMembership); members of another shape seen meanwhile joined after it and
// wait for it.
//
// The active write it waits to see (activeVersion) vouches that the others saw this
// replica live from then on only while its renewals kept coming: once its member
// Lease goes unrenewed for RenewDeadline before the admission, a view showing that
// write may be one the watch delayed, from before a replica of another shape stopped
// counting this one and was admitted. Admitting on it let two shapes lead at once
// (seed 3424 of TestShardedChaosShapes: a replica cut off, then paused, admitted
// itself at its resume on a view 3.4s old). The admission then waits for a view of
// the next active write.
func (l *loop) admit(now time.Time, v shapeView) {
	s := l.s
	s.mu.Lock()
	admitted, leaving := s.admitted, s.leaving
	changed := !slices.Equal(v.mismatched, s.mismatched)
	s.mismatched = v.mismatched
	s.mu.Unlock()
	if changed && len(v.mismatched) > 0 {
		s.logger.Warn("members of another ring shape seen: a ring's replicas must all use the same Shards", "shape", s.shape(),
			"mismatched", v.mismatched, "admitted", admitted)
	}
	if admitted || leaving || l.activeVersion == "" && l.want == MemberActive {
		return
	}
	if l.want == MemberActive && !now.Before(s.renewedUntil()) {
		s.logger.Info("member lease not renewed within the renew deadline before admission: waiting for a view of the next active write")
		l.activeVersion = ""
		return
	}
	if l.want == MemberWaiting {
		if len(v.blockers) == 0 && !now.Before(l.retryActiveAt) {
			l.want, l.renewAt = MemberActive, now
		}
		return
	}
	version, state, ok := l.liveness.version(s.config.Identity)
	if !ok || state != MemberActive || !atLeast(version, l.activeVersion) {
		return // this view predates the active write
	}
	if len(v.blockers) == 0 {
		s.setAdmitted(true)
		s.logger.Info("admitted: no member of another ring shape is active", "shape", s.shape())
		return
	}
	s.shapeRefusals.Add(1)
	s.mu.Lock()
	s.refusing = true
	s.mu.Unlock()
	s.logger.Warn("refusing to campaign: members of another ring shape are active; a ring's replicas must all use the same Shards (to change it, see docs/design/sharding.md, # Ring shape)",
		"shape", s.shape(), "blockers", v.blockers)
	l.want, l.activeVersion, l.renewAt = MemberWaiting, "", now
	// Two replicas of different shapes that both withdrew try again at random times.
	l.retryActiveAt = now.Add(time.Duration(float64(s.config.RetryPeriod) * (0.5 + l.rand.Float64())))
}

// checkMembership ends this replica's admission when its member Lease has not been
// renewed for RenewDeadline: the others count the Lease live only LeaseDuration after
// they last saw it change, and a replica of another shape that stops seeing it may
// campaign, so every shard term of this replica must have ended first. It resigns
// every shard it leads and is admitted again as a newcomer.
func (l *loop) checkMembership(now time.Time) {
	s := l.s
	s.mu.Lock()
	lapsed := s.admitted && !s.leaving && !s.mayLeadLocked(now)
	renewed := s.renewedAt
	s.mu.Unlock()
	if !lapsed {
		return
	}
	s.logger.Warn("member lease not renewed within the renew deadline: resigning every shard until it is again",
		"last_renewed", renewed)
	s.setAdmitted(false)
	l.want, l.activeVersion = MemberActive, ""
	s.resignAll()
}

// setRenewed records that a write of this replica's member Lease sent at sent
// succeeded.
func (s *Sharder) setRenewed(sent time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renewedAt = sent
}

// renewedUntil returns RenewDeadline after the send of the last member Lease write
// that succeeded: until then this replica may be or become admitted.
func (s *Sharder) renewedUntil() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewedUntilLocked()
}

// renewedUntilLocked is renewedUntil; the caller holds s.mu.
func (s *Sharder) renewedUntilLocked() time.Time { return s.renewedAt.Add(s.config.RenewDeadline) }

// mayLeadLocked reports whether this replica may begin a shard term at now: it is
// admitted, and its member Lease was last renewed within RenewDeadline. Run's loop
// ends the admission at that deadline (checkMembership), but not once this replica
// leaves, while a release naming it may still come: its admission lapses by time
// all the same, before a replica of another shape that stopped seeing the Lease
// renewed may be admitted (docs/design/sharding.md, # Ring shape). The caller holds
// s.mu.
func (s *Sharder) mayLeadLocked(now time.Time) bool {
	return s.admitted && now.Before(s.renewedUntilLocked())
}

// setAdmitted sets whether this replica may campaign.
func (s *Sharder) setAdmitted(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.admitted = on
	if on {
		s.refusing = false
	}
}

// resignAll ends every shard term this replica leads.
func (s *Sharder) resignAll() {
	s.mu.Lock()
	owned := make(map[int]uint64, len(s.owned))
	for shard, term := range s.owned {
		owned[shard] = term
	}
	s.mu.Unlock()
	for shard, term := range owned {
		s.electors[shard].Resign(term)
	}
}

// atLeast reports whether version seen is at or after version want: decimal numbers
// that grow with every write (MemberLease.Version); equal strings otherwise.
func atLeast(seen, want string) bool {
	a, errA := strconv.ParseUint(seen, 10, 64)
	b, errB := strconv.ParseUint(want, 10, 64)
	if errA != nil || errB != nil {
		return seen == want
	}
	return a >= b
}

// newShapeRand returns the random source of a replica's retries after a refusal.
func newShapeRand(identity string) *rand.Rand {
	return rand.New(rand.NewPCG(Hash(identity), 0x5ba9e))
}
