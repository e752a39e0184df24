package leaderelection

import (
	"fmt"
	"math"
	"time"
)

// observe takes in a state of the lease: from the watch, a read or our own write.
// listed marks a state read as current (a watch's list, a Get, a write's answer), and
// current is the highest resourceVersion seen when it was read: a state below it means
// the store's history went back. Other states below the highest seen are skipped (the
// late echo of our own write, a list taken before our write).
func (c *campaign) observe(ev LeaseEvent, current uint64, listed bool) {
	newWrite := false // a state above every version seen before
	if v, ok := parseVersion(ev.Record.ResourceVersion); ok {
		newWrite = v > c.lease.maxVersion
		if v > c.sentVersion && !zeroSpec(ev.Record) && (c.firstStateSinceSend == 0 || v < c.firstStateSinceSend) {
			c.firstStateSinceSend = v // a state of the lease (not an absence as listed) since the send
		}
		switch {
		case v < c.lease.maxVersion && v >= current:
			return
		case v < c.lease.maxVersion:
			c.versionReset(v)
		case listed && v == c.lease.maxVersion && c.lease.exists() && !ev.Deleted && !sameSpec(ev.Record, c.lease.record):
			c.versionReset(v) // the same version names another state: restored
		}
		c.lease.maxVersion = v
	}
	if !zeroSpec(ev.Record) {
		c.checkRange(ev.Record)
	}
	if newWrite && !ev.Deleted && c.lease.known() {
		c.checkIdentity(ev.Record)
	}
	now := c.e.clock.Now()
	c.watch.staleCheckAt = time.Time{}
	if ev.Deleted {
		c.observeAbsent(ev.Record, now, listed)
	} else {
		c.observePresent(ev.Record, now, listed)
	}
	c.e.markSynced()
	c.followDeath()
	c.reportHolder()
	if c.phase == leading {
		c.checkTerm()
	}
	if c.phase == holding && !(c.lease.exists() && c.ours(c.lease.record)) {
		c.dropHeld("lease no longer ours")
	}
}

// observePresent takes in r, a state of the lease; listed marks a read of the
// current state.
func (c *campaign) observePresent(r LeaseRecord, now time.Time, listed bool) {
	l := &c.lease
	switch {
	case !l.known():
		l.since, l.vouch = now, firstLook
	case !l.exists() || !sameSpec(r, l.record): // a new state
		l.since, l.vouch = now, onRead
		if !listed {
			l.vouch = evented
		}
	case l.vouch == firstLook: // unchanged since the first look: still nothing vouches
	case !listed:
		l.vouch = evented
	case r.ResourceVersion != l.record.ResourceVersion:
		l.vouch = onRead
	}
	l.record, l.presence = r, present
	if r.HolderIdentity != "" {
		l.holderDuration, l.holderForeign = c.leaseDuration(r), !heldByBaton(r)
	}
}

// observeAbsent takes in the absence of the lease; last is the state before the delete
// when the store knows it, zero otherwise; listed marks a read of the current state.
func (c *campaign) observeAbsent(last LeaseRecord, now time.Time, listed bool) {
	l := &c.lease
	switch {
	case !zeroSpec(last):
		if l.presence != goneLast || !sameSpec(last, l.record) {
			l.since = now
		}
		l.record, l.presence = last, goneLast
	case !l.known():
		// A cold start: nothing of a holder was ever seen, so the lease may be created
		// at once (see docs/design/leaderelection.md for the window this leaves).
		l.record, l.presence, l.since = LeaseRecord{}, goneUnknown, now
	case l.lastKnown():
		// Deleted, last state unknown: whoever held it last may have renewed until the
		// delete, which came before now. Wait as for an unknown holder, from now.
		c.e.logger.Info("lease gone, last holder unknown: waiting for its term to end")
		l.record, l.presence, l.since = LeaseRecord{}, goneUnknown, now
		l.unknownUntil = later(l.unknownUntil, now.Add(c.unknownWait()))
	case listed:
		// Absent again after a gap in the watch: the lease may have been created and
		// deleted meanwhile, by a holder that may still lead. Wait again, from now.
		l.since = now
		l.unknownUntil = later(l.unknownUntil, now.Add(c.unknownWait()))
	}
}

// versionReset handles a current state whose resourceVersion v is below one seen
// before: the store's history went back (an etcd restore, a stale API server). Writes
// this elector remembers may belong to the lost history, and any candidate may still
// lead a term of it, so: end a running term, forget our writes, and wait as for an
// unknown holder before acquiring. Terms stay above every version seen: see acquired.
func (c *campaign) versionReset(v uint64) {
	c.e.versionResets.Add(1)
	c.termFloor = max(c.termFloor, c.lease.maxVersion)
	c.e.logger.Error("lease resourceVersion went back: treating the holder as unknown",
		"seen", c.lease.maxVersion, "now", v)
	if c.phase == leading {
		c.stepDown(fmt.Errorf("%w: resource version went back from %d to %d", ErrLeaseLost, c.lease.maxVersion, v))
	}
	c.writes.confirmed, c.writes.hasConfirmed, c.writes.sent = LeaseRecord{}, false, nil
	c.lease.unknownUntil = later(c.lease.unknownUntil, c.e.clock.Now().Add(c.unknownWait()))
}

// reportHolder publishes a change of the observed holder.
func (c *campaign) reportHolder() {
	holder := ""
	if c.lease.exists() {
		holder = c.lease.record.HolderIdentity
	}
	c.e.setLeader(holder)
	if holder != c.lease.reported {
		c.lease.reported = holder
		if holder != "" && c.notify != nil {
			c.notify.push(holder)
		}
	}
}

// checkTerm judges the observed state while leading: our write (or one whose answer we
// missed) keeps the term; anything else ends it. A preferredHolder naming another
// candidate starts a hand-over.
func (c *campaign) checkTerm() {
	r := c.lease.record
	var sent sentWrite
	missed := false
	if c.lease.exists() && r.HolderIdentity == c.self {
		sent, missed = c.sentMatch(r)
	}
	switch {
	case c.lease.exists() && c.writes.hasConfirmed && sameCore(r, c.writes.confirmed):
		c.writes.confirmed = r // our write, or only metadata or advisory fields changed since
	case missed:
		// A write whose answer we missed went through: the term counts from its send
		// time (sent is a copy; confirm compacts the list it came from).
		c.confirm(r, sent.at)
		c.term.markRenewed(sent.at)
	default:
		c.e.logger.Info("lease lost", "holder", r.HolderIdentity, "deleted", !c.lease.exists(), "term", c.term.Term())
		c.stepDown(ErrLeaseLost)
		return
	}
	if p := c.writes.confirmed.PreferredHolder; p != "" && p != c.self {
		c.e.logger.Info("lease prefers another holder: handing over", "to", p, "term", c.term.Term())
		c.beginHandOver(handoverRequest{target: p})
	}
}

// sentMatch returns a copy of the write of ours of the same core as r; ok is false if
// there is none. A copy, not a pointer into sends: confirm compacts sends in place, and
// a pointer read after it would give a later write's send time.
func (c *campaign) sentMatch(r LeaseRecord) (s sentWrite, ok bool) {
	for i := len(c.writes.sent) - 1; i >= 0; i-- {
		if sameCore(r, c.writes.sent[i].record) {
			return c.writes.sent[i], true
		}
	}
	return sentWrite{}, false
}

// addSend remembers a write of ours about to be sent.
func (c *campaign) addSend(r LeaseRecord, at time.Time) {
	if len(c.writes.sent) == maxSends {
		c.writes.sent = append(c.writes.sent[:0], c.writes.sent[1:]...)
	}
	c.writes.sent = append(c.writes.sent, sentWrite{record: r, at: at})
}

// confirm records r, a write of ours sent at at, as stored: the writes sent before it
// can no longer go through (each was a compare-and-swap on a version it replaced).
func (c *campaign) confirm(r LeaseRecord, at time.Time) {
	c.writes.confirmed, c.writes.confirmedAt, c.writes.hasConfirmed = r, at, true
	kept := c.writes.sent[:0]
	for _, s := range c.writes.sent {
		if s.at.After(at) {
			kept = append(kept, s)
		}
	}
	c.writes.sent = kept
}

// ours reports whether r holds fields this elector wrote (or sent), so nobody else wrote
// the lease since (as far as versions do not repeat): then it may release it.
func (c *campaign) ours(r LeaseRecord) bool {
	if r.HolderIdentity != c.self {
		return false
	}
	if c.writes.hasConfirmed && sameCore(r, c.writes.confirmed) {
		return true
	}
	_, ok := c.sentMatch(r)
	return ok
}

// unansweredCreate reports whether r is the record of an acquiring Create of ours whose
// answer never came (a lost reply, a timeout) and that the store confirmed by no other
// answer since. Its term would have been judged on the answer (createUnseen,
// writeVouched); without one, the campaign cannot tell when it landed, or what came
// before it.
func (c *campaign) unansweredCreate(r LeaseRecord) bool {
	if r.HolderIdentity != c.self || (c.writes.hasConfirmed && sameCore(r, c.writes.confirmed)) {
		return false
	}
	s, ok := c.sentMatch(r)
	return ok && s.create
}

// oursRecent is ours for a write sent within the last RenewDeadline: then this elector
// may take the lease back at once. An older write of ours may be a state restored from
// a backup (versions repeat), over which another candidate may lead; it is waited out
// like anyone's.
func (c *campaign) oursRecent(r LeaseRecord) bool {
	if r.HolderIdentity != c.self {
		return false
	}
	if c.writes.hasConfirmed && sameCore(r, c.writes.confirmed) && c.sentRecently(c.writes.confirmedAt) {
		return true
	}
	s, ok := c.sentMatch(r)
	return ok && c.sentRecently(s.at)
}

// sentRecently reports whether a write of ours sent at at is within the last
// RenewDeadline: a term it began or renewed could still be running.
func (c *campaign) sentRecently(at time.Time) bool {
	return c.e.clock.Now().Sub(at) < c.e.config.RenewDeadline
}

// leaseDuration is how long the holder of r may go without renewing, by its record:
// its leaseDuration up to MaxLeaseDuration, the configured one when it has none.
func (c *campaign) leaseDuration(r LeaseRecord) time.Duration {
	d, _ := BoundLeaseDuration(r.LeaseDuration, c.e.config.LeaseDuration)
	return d
}

// checkRange logs at WARN, once per record (by resourceVersion), each value of r out of
// the range Baton itself writes, and counts it (Stats.OutOfRange): a leaseDuration
// above MaxLeaseDuration (taken as MaxLeaseDuration) or below zero (taken as the
// configured one), leaseTransitions below zero or at the int32 maximum (an acquisition
// writes them at least 0 and never above the maximum).
func (c *campaign) checkRange(r LeaseRecord) {
	if r.ResourceVersion != "" && r.ResourceVersion == c.lease.checkedVersion {
		return
	}
	c.lease.checkedVersion = r.ResourceVersion
	bad := func(field string, value any, taken string) {
		c.e.outOfRange.Add(1)
		c.e.logger.Warn("lease value out of range", "field", field, "value", value, "takenAs", taken,
			"holder", r.HolderIdentity, "version", r.ResourceVersion)
	}
	switch d := r.LeaseDuration; {
	case d > MaxLeaseDuration:
		bad("leaseDurationSeconds", d.String(), MaxLeaseDuration.String())
	case d < 0:
		bad("leaseDurationSeconds", d.String(), c.e.config.LeaseDuration.String())
	}
	switch t := r.LeaseTransitions; {
	case t < 0:
		bad("leaseTransitions", t, "0")
	case t == math.MaxInt32:
		bad("leaseTransitions", t, "kept at the maximum on the next acquisition")
	}
}

// checkIdentity reports a new write of the lease that names this elector as holder
// but is not one of its writes: another candidate runs with the same identity (two
// replicas given one name), which defeats mutual exclusion between the two. It is
// logged at ERROR and counted in Stats.DuplicateIdentity. A state seen on a first
// look (a restarted replica's previous incarnation) or after the history went back is
// not a new write and is not reported.
func (c *campaign) checkIdentity(r LeaseRecord) {
	if r.HolderIdentity != c.self || c.ours(r) || c.handedOffToUs(r) {
		return
	}
	c.e.duplicateIdentity.Add(1)
	c.e.logger.Error("the lease names this candidate's identity in a write it did not make: another candidate runs with the same identity; identities must be unique",
		"version", r.ResourceVersion)
}

// nextTransitions is the leaseTransitions of an acquisition of r: r's, plus one when the
// holder changes, within 0 and the int32 maximum (the API server refuses a negative
// value, which an increment past the maximum would give).
func (c *campaign) nextTransitions(r LeaseRecord) int32 {
	t := max(r.LeaseTransitions, 0)
	if r.HolderIdentity != c.self && t < math.MaxInt32 {
		t++
	}
	return t
}

// foreignLeaseFactor is how many of its leaseDurationSeconds a holder that is not
// Baton's is given, and the factor of an unknown holder's wait. client-go's leader keeps
// its leader context for up to RetryPeriod + RenewDeadline after its last renew, and
// with ReleaseOnCancel for another RenewDeadline while it tries to release; its
// validation (RenewDeadline < LeaseDuration, 1.2 × RetryPeriod < RenewDeadline) keeps
// that below 2.84 × LeaseDuration.
const foreignLeaseFactor = 3

// expiryWait is how long after observing r a follower waits before taking it from its
// holder. A Baton holder's term ends by its RenewDeadline after its last renew, before
// its leaseDuration. Any other holder (client-go's elector, a hand-written holder) gets
// foreignLeaseFactor times its leaseDuration.
func (c *campaign) expiryWait(r LeaseRecord) time.Duration {
	if heldByBaton(r) {
		return c.leaseDuration(r)
	}
	return foreignLeaseFactor * c.leaseDuration(r)
}

// unknownWait is the wait for a holder that cannot be judged (the lease gone without
// its last state, the history gone back, a foreign clear): what the last holder seen
// would get, its lease duration (at least the configured one), times
// foreignLeaseFactor if it was not Baton's. A holder that took the lease unseen and
// then lost it the same way is not covered; see docs/design/leaderelection.md.
func (c *campaign) unknownWait() time.Duration {
	d := max(c.e.config.LeaseDuration, c.lease.holderDuration)
	if c.lease.holderForeign {
		return foreignLeaseFactor * d
	}
	return d
}

// takeAt is when the observed state lets this follower take the lease, zero for now.
func (c *campaign) takeAt() time.Time {
	at, _ := c.takeRule()
	return at
}

// takeRule is takeAt, and whether the holder is taken for its silence in
// Config.Liveness (the take then waits for Liveness.Confirm: livenessConfirmed).
func (c *campaign) takeRule() (at time.Time, byLiveness bool) {
	r := c.lease.record
	switch {
	case !c.lease.lastKnown():
		return time.Time{}, false // cold start, or unknown (lease.unknownUntil has the wait)
	case r.HolderIdentity == "" && releasedByBaton(r) && c.lease.vouch == firstLook:
		// A release seen on a first look may be a restored copy, written before terms
		// that are not over: wait as for an unknown holder.
		return c.lease.since.Add(c.unknownWait()), false
	case r.HolderIdentity == "" && releasedByBaton(r):
		if r.PreferredHolder == "" || r.PreferredHolder == c.self || c.handedToGone(r) {
			return time.Time{}, false // released: its holder's term ended before
		}
		// Handed over to another candidate: give it a LeaseDuration to take it.
		return c.lease.since.Add(max(c.e.config.LeaseDuration, c.lease.holderDuration)), false
	case r.HolderIdentity == "" && c.clearedFromUs(r):
		return time.Time{}, false // we were its last holder, and our term is over
	case r.HolderIdentity == "":
		// Cleared, but not by a Baton release (client-go's release, a person): the last
		// holder may not know yet, and may lead until its term ends.
		return c.lease.since.Add(c.unknownWait()), false
	case c.unansweredCreate(r):
		// Our Create, whose answer never came: it may have landed after states we never
		// saw (a holder created and deleted by hand), whose holder may still lead. Wait
		// it out as anyone's: nobody renews it, and it landed before we saw it.
		return c.lease.since.Add(c.expiryWait(r)), false
	case c.external() && c.ours(r):
		return time.Time{}, false // our own write, our term is over (Config.Liveness)
	case c.handedOffToUs(r):
		return time.Time{}, false // handed to us: its writer's term ended before (HandOffs)
	case c.handedOffToLeaver(r):
		return time.Time{}, false // handed to a candidate that left without taking it
	case c.oursRecent(r):
		return time.Time{}, false // nobody wrote since us, and our term is over
	case c.holderDead(r), c.holderDeadListed(r):
		return time.Time{}, false // the holder's incarnation is proven over (Config.DeathWatch)
	case c.external() && heldByBaton(r):
		return c.livenessTakeAt(r), true
	default:
		return c.lease.since.Add(c.expiryWait(r)), false
	}
}

// clearedFromUs reports whether r is our last confirmed write with its holder cleared
// by someone else: it still carries our holder marker and our transitions (an
// acquisition in between would have counted one more).
func (c *campaign) clearedFromUs(r LeaseRecord) bool {
	return c.writes.hasConfirmed && c.writes.confirmed.HolderIdentity == c.self && r.Marker == c.marker &&
		r.LeaseTransitions == c.writes.confirmed.LeaseTransitions && c.sentRecently(c.writes.confirmedAt)
}

// handedToUs reports whether the observed state is a Baton release naming this
// elector preferredHolder, or a one-write hand-over to it (HandOffs): a hand-over to
// it, which it takes even while it only follows (SetCampaigning).
func (c *campaign) handedToUs() bool {
	r := c.lease.record
	return c.lease.exists() && (r.HolderIdentity == "" && releasedByBaton(r) && r.PreferredHolder == c.self ||
		c.handedOffToUs(r))
}

// acquireTime is when a follower may try to take the lease; ok is false while it may not
// (state unknown or stale, no watch showing the lease for a RetryPeriod (blind), the
// last term's leader work still running, a hand-over pending, following only). The
// hold-back after a resign (resignedUntil) does not delay a hand-over to us.
func (c *campaign) acquireTime() (time.Time, bool) {
	if c.phase != following || !c.lease.known() || c.watch.stale() || c.leaderDone != nil {
		return time.Time{}, false
	}
	if c.blind(c.e.clock.Now()) {
		return time.Time{}, false // the wait counts only time watched: see blind
	}
	handed := c.handedToUs()
	if !c.e.mayCampaign.Load() && !handed {
		return time.Time{}, false // following only (SetCampaigning)
	}
	held := c.heldBackUntil()
	if handed {
		held = c.acquireAt
	}
	return later(later(c.takeAt(), c.lease.unknownUntil), held), true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
