package leaderelection

import (
	"context"
	"time"
)

// heldTerm is the term of an acquiring write that landed but that the watch has not
// vouched for yet: the lease is ours, but the term starts only at until (see hold),
// or, when onEvent is set, as soon as the watch delivers the write's own event with
// nothing before it (see awaitWriteEvent).
type heldTerm struct {
	term    uint64
	until   time.Time
	onEvent bool
	written uint64 // the write's resourceVersion, with onEvent
	onDeath bool   // the write took the lease on a proof that its holder is dead
}

// createUnseen judges an acquiring Create out, sent at sentAt and answered at
// answeredAt, after overtaken read what the watch delivered meanwhile. A Create succeeds
// on any absent lease, so it may have landed after states this elector never saw: the
// lease created by another candidate, which led, and deleted by hand. It returns why
// that may be so, "" if nothing says it: the watch showed a state of the lease between
// the one the Create was sent on and the Create's own, or the answer came more than a
// RetryPeriod after the send (a paused process, a held request), too long for the
// watch to vouch for the store's states in between.
func (c *campaign) createUnseen(out LeaseRecord, sentAt, answeredAt time.Time) string {
	if v, ok := parseVersion(out.ResourceVersion); ok && c.firstStateSinceSend != 0 && c.firstStateSinceSend < v {
		return "the watch showed a state of the lease before the write"
	}
	if answeredAt.Sub(sentAt) > c.e.config.RetryPeriod {
		return "answered after " + answeredAt.Sub(sentAt).String()
	}
	return ""
}

// hold takes the lease acquired by a Create answered at answeredAt that may have
// landed after states this elector never saw (createUnseen says why), without leading
// yet. A holder of such a state leads at most a RenewDeadline (by its clock) after its
// last renew, which came before the delete, before our write landed, before the answer.
// The term starts a LeaseDuration after the answer (LeaseDuration − RenewDeadline being
// the margin for clock rates, as in any follower's wait), while renews every RetryPeriod
// keep the lease ours; a failed renew or another state of the lease gives the term up
// (dropHeld), and keeps any later acquisition of ours behind the same instant.
func (c *campaign) hold(term uint64, answeredAt time.Time, why string) {
	c.e.slowAcquires.Add(1)
	c.becomeHolding(heldTerm{term: term, until: answeredAt.Add(c.e.config.LeaseDuration)})
	c.renewAt = answeredAt // renew at once: the Create's own renewTime may be old
	c.renewRetry.Reset()
	c.e.logger.Warn("acquiring Create may have landed after unseen holders: holding the lease a LeaseDuration before leading",
		"reason", why, "term", term, "wait", c.e.config.LeaseDuration)
}

// writeVouched reports whether the watch vouches that the acquiring write that was
// given version v landed on the state it was sent on: the watch that was open at the
// send delivered the write's own event, every state between the send and it (the
// store said of no event since the send that it may have skipped states below v:
// LeaseEvent.Gap), and no state of the lease between the send's and the write's. A
// write's answer alone proves only that the lease was absent (a Create) or at the
// version sent on (a compare-and-swap) when it landed: it may have been created by
// another candidate, which led, and deleted by hand in between, or written by another
// and restored.
func (c *campaign) writeVouched(v uint64) bool {
	return c.sendWatch != 0 && c.sendWatch == c.watch.generation && c.watch.delivered >= v &&
		!(c.sendGapped && c.sendGapFrom < v) &&
		!(c.firstStateSinceSend != 0 && c.firstStateSinceSend < v)
}

// awaitWriteEvent holds the lease of an acquiring write answered at answeredAt whose
// own event the watch has not delivered yet (on a real API server the answer often
// comes a moment before the event): the term held starts once the watch delivers it
// with nothing before it (writeVouched), and otherwise as for a slow Create, a
// LeaseDuration after the answer.
func (c *campaign) awaitWriteEvent(held heldTerm, answeredAt time.Time) {
	held.until, held.onEvent = answeredAt.Add(c.e.config.LeaseDuration), true
	c.becomeHolding(held)
	c.renewAt = c.writes.confirmedAt.Add(c.e.config.RetryPeriod)
	c.renewRetry.Reset()
	c.e.logger.Debug("acquiring write answered before its watch event: holding until the watch shows it", "term", held.term)
}

// stepHeld does what is due while a term is held: start it when due, renew.
func (c *campaign) stepHeld(now time.Time) {
	if c.held.onEvent && c.writeVouched(c.held.written) {
		onDeath := c.held.onDeath
		c.startTerm(c.held.term, c.writes.confirmedAt)
		if onDeath {
			c.e.deathTakeovers.Add(1)
		}
		c.checkTerm()
		return
	}
	if !now.Before(c.held.until) {
		c.drainWatch() // judge the latest state the watch delivered
		if c.phase != holding {
			return
		}
		// The term runs a RenewDeadline from the send of the last renew that went
		// through, as any term does.
		c.startTerm(c.held.term, c.writes.confirmedAt)
		c.checkTerm()
		return
	}
	if !now.Before(c.renewAt) {
		c.renewHeld()
	}
}

// renewHeld renews a held lease with a compare-and-swap on our last write. Any failure
// gives the held term up: the watch (or a new one) shows what the lease holds, and
// dropHeld keeps a new acquisition behind the held term's start.
func (c *campaign) renewHeld() {
	sentAt := c.e.clock.Now()
	ctx, cancel := withTimeout(c.ctx, c.e.clock, c.e.config.RenewDeadline, context.DeadlineExceeded)
	defer cancel()
	out, err := c.e.store.Update(ctx, c.renewal(sentAt))
	switch {
	case err == nil:
		c.written(out, sentAt)
		if c.phase == holding {
			c.renewAt = sentAt.Add(c.e.config.RetryPeriod)
		}
	case c.ctx.Err() != nil:
	default:
		c.e.logger.Warn("renewing a held lease failed", "error", err)
		c.dropHeld("renew failed")
		c.markStale()
	}
}

// dropHeld gives the held term up: it never starts.
func (c *campaign) dropHeld(why string) {
	c.e.logger.Warn("not leading the held term", "term", c.held.term, "reason", why)
	c.lease.unknownUntil = later(c.lease.unknownUntil, c.held.until)
	c.becomeFollowing()
}
