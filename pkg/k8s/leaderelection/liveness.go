package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Liveness is a source of the liveness of a lease's holders kept outside the lease:
// package sharding's member Leases, which carry the liveness of the shard Leases a
// replica holds. Config.Liveness says how the elector uses it; the design is in
// docs/design/sharding-renewal.md. Implementations are safe for concurrent use.
type Liveness interface {
	// LastSign returns the instant, by the elector's clock (Config.Clock), at which
	// this source last saw a sign that holder's incarnation (as its lease record
	// names it; "" when it names none) may have renewed its liveness record: a change
	// of the record while it carried that incarnation, or the change that showed it no
	// longer does (deleted, written by another incarnation). When it has seen no such
	// change, its first look at the records. known is false while it has not looked
	// yet: the elector then takes the lease from no live-looking holder.
	LastSign(holder, incarnation string) (at time.Time, known bool)
	// Confirm reads holder's liveness record afresh, not from a watch that may hang
	// silently, and takes it in as a change LastSign reports. It reports quiet when
	// LastSign still reports sign (the caller's last look) after that read: no sign of
	// holder's incarnation came since. A read sent after an earlier call's, while the
	// record stayed as that read showed it, may answer for it. The elector calls it,
	// on its election goroutine, before it takes a lease whose holder's last sign is
	// a leaseDuration old, and takes the lease only when it reports quiet: a renew
	// that extended the holder's term must have been answered, so must have landed,
	// before the read.
	Confirm(ctx context.Context, holder, incarnation string, sign time.Time) (quiet bool, err error)
	// Gone reports whether candidate, named by a Baton hand-over (a release whose
	// preferredHolder is another candidate), is known to take no lease any more: by
	// the source's view it has left, or died, or is not counted at all. A follower
	// then takes the release as one naming nobody (at once, if it campaigns) instead
	// of giving the named candidate a LeaseDuration to take it. The release itself
	// proves the last term over, so the answer moves only the time of a take, never
	// its safety: a candidate reported gone that takes the lease after all loses the
	// race to a compare-and-swap, or wins it. After its answers may have changed
	// from false to true, the source calls Elector.LivenessChanged.
	Gone(candidate string) bool
}

// HandOffs is an optional part of a Config.Liveness that makes a planned hand-over
// one write: the holder writes the candidate in as holder (and its incarnation), where
// it would release the lease naming it, and the candidate leads on that write's
// event, with no write of its own. The candidate must bound its term from an instant
// it knows came before the hand-over landed, though its watch may deliver the
// hand-over late: the hand-over cites the version of the candidate's liveness record
// that its writer saw, and the candidate's own send of that version came before the
// writer saw it, so before the hand-over landed, and every follower waits a
// LeaseDuration from when it saw the hand-over. The term so lasts a RenewDeadline
// from that send, and the candidate's renewals of its liveness record that claim the
// lease extend it, as for any term (docs/design/sharding-renewal.md, # One-write
// hand-overs).
type HandOffs interface {
	// HandOff returns, for a hand-over to candidate, the incarnation of its run and
	// the version of its liveness record this source saw last; ok is false when the
	// hand-over must be a release naming it (the candidate is not known live, leaves,
	// or was never seen writing its record).
	HandOff(candidate string) (incarnation, cite string, ok bool)
	// Cited returns when this candidate's run sent the write of its liveness record
	// that got version cite, by the elector's clock; ok is false when it does not
	// know (not a write of this run, or one whose answer never came).
	Cited(cite string) (sent time.Time, ok bool)
	// Accept reports whether this candidate starts the term of a hand-off to it now.
	// Once it has said true, the candidate's liveness record claims the lease until
	// that term ends; once the record says the candidate leaves (Left), it says false.
	Accept() bool
	// Left reports whether holder's incarnation, as this source last saw its liveness
	// record, leaves without claiming the lease: it holds no hand-off term of the
	// lease and will start none (Accept), so a follower takes a hand-off to it at once.
	Left(holder, incarnation string) bool
}

// handOffs returns the elector's HandOffs, if its Liveness has them.
func (c *campaign) handOffs() (HandOffs, bool) {
	h, ok := c.e.config.Liveness.(HandOffs)
	return h, ok
}

// handedOffToUs reports whether r is a one-write hand-over (HandOffs) to this
// candidate's run that it did not write itself.
func (c *campaign) handedOffToUs(r LeaseRecord) bool {
	_, ok := handedOff(r)
	return ok && c.external() && r.HolderIdentity == c.self &&
		holderIncarnation(r) == c.e.config.Incarnation && !c.ours(r)
}

// handedOffToLeaver reports whether r is a one-write hand-over to another candidate
// that left without taking it (HandOffs.Left): then it is taken as a release.
func (c *campaign) handedOffToLeaver(r LeaseRecord) bool {
	h, ok := c.handOffs()
	if _, handed := handedOff(r); !ok || !handed || r.HolderIdentity == c.self {
		return false
	}
	return h.Left(r.HolderIdentity, holderIncarnation(r))
}

// startHandedOff starts the term of the observed one-write hand-over to this
// candidate without a write, and reports whether it did: only while a RenewDeadline
// has not passed since the cited send (HandOffs), and on a term above the floor.
// Otherwise the caller takes the lease with a write of its own, as a release naming
// it: the hand-over proves the last term over.
func (c *campaign) startHandedOff() bool {
	r := c.lease.record
	h, ok := c.handOffs()
	if !ok || !c.lease.exists() || !c.handedOffToUs(r) {
		return false
	}
	cite, _ := handedOff(r)
	sent, ok := h.Cited(cite)
	if !ok || !c.e.clock.Now().Before(sent.Add(c.e.config.RenewDeadline)) {
		return false
	}
	term, err := parseTerm(r.ResourceVersion)
	if err != nil || term <= c.termFloor || !h.Accept() {
		return false
	}
	c.confirm(r, sent)
	c.e.handedOffTerms.Add(1)
	c.startTerm(term, sent)
	c.checkTerm()
	return true
}

// LivenessChanged tells an elector with Config.Liveness that the source's answers
// may have changed (Liveness.Gone): it looks at the observed lease again. Without
// Config.Liveness it does nothing. Safe from any goroutine; it never blocks.
func (e *Elector) LivenessChanged() {
	if e.config.Liveness == nil {
		return
	}
	select {
	case e.campaignChanged <- struct{}{}:
	default:
	}
}

// LivenessRenewed tells an elector with Config.Liveness that this candidate's
// liveness record was renewed by a write sent at sent, whose success was just
// answered: the term being led, if any, then lasts until RenewDeadline after sent,
// unless it ended already (a late answer revives no term). Without Config.Liveness
// it does nothing. Safe from any goroutine; it never blocks.
func (e *Elector) LivenessRenewed(sent time.Time) {
	if e.config.Liveness == nil {
		return
	}
	if t := e.current.Load(); t != nil {
		t.markRenewed(sent)
	}
}

// checkLiveness reports the fields that Config.Liveness forbids or needs to bad: the
// holder's liveness is judged per incarnation, so a candidate must name its own.
func checkLiveness(c Config, bad func(field, format string, args ...any)) {
	if c.Liveness != nil && c.Incarnation == "" {
		bad("Incarnation", "incarnation is empty, but Liveness judges a holder by its incarnation")
	}
}

// external reports whether the holders' liveness is kept outside the lease
// (Config.Liveness): leaders do not renew the lease.
func (c *campaign) external() bool { return c.e.config.Liveness != nil }

// handedToGone reports whether r, a Baton release, names as its preferred holder
// another candidate that Config.Liveness reports gone (Liveness.Gone): nobody is
// left to take the hand-over, so it is taken as a release naming nobody.
func (c *campaign) handedToGone(r LeaseRecord) bool {
	p := r.PreferredHolder
	return c.external() && p != "" && p != c.self && c.e.config.Liveness.Gone(p)
}

// livenessTakeAt is when a follower may take r, a Baton holder's record, with
// Config.Liveness: a leaseDuration after the later of when it saw the lease change
// and the last sign of the holder's incarnation; a RetryPeriod from now, to look
// again, while the source has not looked yet.
func (c *campaign) livenessTakeAt(r LeaseRecord) time.Time {
	sign, known := c.e.config.Liveness.LastSign(r.HolderIdentity, holderIncarnation(r))
	if !known {
		return c.e.clock.Now().Add(c.e.config.RetryPeriod)
	}
	return later(c.lease.since, sign).Add(c.leaseDuration(r))
}

// livenessConfirmed reports whether the acquisition about to be made may go ahead:
// always, unless the observed holder is taken for its silence in the liveness
// source; then only while its last sign is still a leaseDuration old and, after that,
// Liveness.Confirm read the holder's record afresh and found no sign since. A failed
// or not quiet read backs the next attempt off (the holder's take time has moved, or
// the read is tried again).
func (c *campaign) livenessConfirmed() bool {
	if _, byLiveness := c.takeRule(); !byLiveness {
		return true
	}
	r := c.lease.record
	holder, inc := r.HolderIdentity, holderIncarnation(r)
	sign, known := c.e.config.Liveness.LastSign(holder, inc)
	if !known || c.e.clock.Now().Before(later(c.lease.since, sign).Add(c.leaseDuration(r))) {
		return false // a sign came since acquireTime looked: takeAt has moved
	}
	ctx, cancel := withTimeout(c.ctx, c.e.clock, c.e.config.RenewDeadline, context.DeadlineExceeded)
	defer cancel()
	quiet, err := c.e.config.Liveness.Confirm(ctx, holder, inc, sign)
	if err == nil && quiet {
		return true
	}
	if err != nil && c.ctx.Err() == nil {
		c.e.logger.Warn("reading the holder's liveness failed", "holder", holder, "error", err)
	}
	c.acquireAt = c.e.clock.Now().Add(c.acquireRetry.Next())
	return false
}

// strandedHold reports whether, with Config.Liveness, the observed lease (or, if it
// was deleted, its last state) still names this elector by a write of its own
// although no term of it runs, while it may not campaign for it: nobody else would
// take it while this candidate's liveness record is renewed, so it releases it
// (releaseStranded). A campaigning elector takes such a lease back at once instead
// (takeRule).
func (c *campaign) strandedHold() bool {
	return c.external() && c.phase == following && c.lease.lastKnown() &&
		!c.watch.stale() && c.leaderDone == nil && !c.e.mayCampaign.Load() && c.ours(c.lease.record)
}

// releaseStranded releases a stranded hold (strandedHold): a release as Resign's, or
// for a lease deleted by hand, a Create of the release, so that the others take it
// at once. A failed release is tried again after a backoff.
func (c *campaign) releaseStranded() {
	c.e.logger.Info("releasing a lease still held in this candidate's name after its term ended", "deleted", !c.lease.exists())
	var err error
	if c.lease.exists() {
		_, err = c.release("")
	} else {
		err = c.createRelease()
	}
	if err != nil {
		if c.ctx.Err() == nil {
			c.e.logger.Warn("releasing a stranded lease failed", "error", err)
		}
		c.acquireAt = c.e.clock.Now().Add(c.acquireRetry.Next())
	}
}

// createRelease creates the deleted lease as this elector's release of its last
// state: no holder, the last state's transitions, the release marker. A conflict
// (someone created it meanwhile) is no error: the watch shows what.
func (c *campaign) createRelease() error {
	ctx, cancel := withTimeout(c.ctx, c.e.clock, c.e.config.RenewDeadline, context.DeadlineExceeded)
	defer cancel()
	at := c.e.clock.Now()
	now := wallClock(at)
	r := LeaseRecord{LeaseDuration: time.Second, AcquireTime: now, RenewTime: now, LeaseTransitions: c.lease.record.LeaseTransitions,
		Strategy: c.lease.record.Strategy, Marker: releaseMarker(c.lease.record.LeaseTransitions, c.self)}
	c.addSend(r, at)
	out, err := c.e.store.Create(ctx, r)
	switch {
	case err == nil:
		c.written(out, at)
		c.e.logger.Info("released lease (created after a delete)")
		return nil
	case errors.Is(err, ErrConflict):
		c.markStale()
		return nil
	}
	return fmt.Errorf("leaderelection: release %s: %w", c.e.store, err)
}

// endedUnrenewed reports whether cause ends a term whose lease must then be
// released as after Resign: with Config.Liveness, a term that missed its renew
// deadline leaves the lease naming this candidate, whose liveness record others may
// still see renewed.
func (c *campaign) endedUnrenewed(cause error) bool {
	return c.external() && errors.Is(cause, ErrRenewDeadlineMissed)
}

// holderDeadListed is holderDead for Config.Liveness, where a holder's lease is not
// written again while it leads: a state first seen on a list (a follower that started
// after the holder took the lease) may be the one a proof moves, since no watch event
// would ever show it. An etcd restore that brings back a dead holder's state is then
// no more waited out than on the expiry path of this mode (see
// docs/design/sharding-renewal.md, # Limits).
func (c *campaign) holderDeadListed(r LeaseRecord) bool {
	inc := holderIncarnation(r)
	return c.external() && c.death.dead && inc != "" && inc == c.death.incarnation &&
		r.ResourceVersion == c.death.version && c.lease.exists() && heldByBaton(r)
}
