package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// maxCatchUpWrites bounds the writes acquired makes to move the resourceVersion past
// the floor of terms after the history went back.
const maxCatchUpWrites = 10000

// wallClock is the time written to the lease: wall clock only, to the microsecond
// that a Kubernetes MicroTime keeps.
func wallClock(t time.Time) time.Time { return t.Truncate(time.Microsecond) }

// refresh reads the lease (outside the watch) and observes it.
func (c *campaign) refresh(ctx context.Context) error {
	call, cancel := withTimeout(ctx, c.e.clock, c.e.config.RenewDeadline, context.DeadlineExceeded)
	defer cancel()
	r, err := c.e.store.Get(call)
	switch {
	case err == nil:
		c.observe(LeaseEvent{Record: r}, c.lease.maxVersion, true)
	case errors.Is(err, ErrLeaseNotFound):
		c.observe(LeaseEvent{Deleted: true}, c.lease.maxVersion, true)
	default:
		return err
	}
	return nil
}

// markStale notes that a write found the lease changed: the watch has until
// staleWait from now to show the newer state.
func (c *campaign) markStale() {
	c.watch.staleCheckAt = c.e.clock.Now().Add(c.staleWait())
}

// staleWait is how long a watch may stay silent after a conflict before it is taken as
// stuck and replaced: a RetryPeriod plus the lag seen (watchState.lag), so that a
// watch that delivers every event late (a slow API server) is not given up, again and
// again, before its first event arrives.
func (c *campaign) staleWait() time.Duration {
	return c.e.config.RetryPeriod + c.watch.lag
}

// written records r, the answer to our write sent at at, and observes it.
func (c *campaign) written(r LeaseRecord, at time.Time) {
	c.confirm(r, at)
	c.observe(LeaseEvent{Record: r}, c.lease.maxVersion, true)
}

// acquire tries to take the lease, in client-go's order:
//
//  1. Build our record: holder, duration, both times now, our marker.
//  2. Write it: a Create when the lease is absent, otherwise a compare-and-swap on the
//     observed version that counts a transition when the holder changes.
//  3. Judge the answer: a conflict means someone wrote first (the watch shows what);
//     any other failure backs off and looks again.
//  4. On success, start the term (acquired), which first checks that the watch has
//     not shown the lease moving past our write.
//
// The write is abandoned a RenewDeadline after its send (its cause
// ErrRenewDeadlineMissed): the term it would start ends then anyway.
func (c *campaign) acquire() {
	cfg := c.e.config
	// 1.
	sentAt := c.e.clock.Now()
	r := LeaseRecord{
		HolderIdentity: c.self,
		LeaseDuration:  cfg.LeaseDuration,
		AcquireTime:    wallClock(sentAt),
		RenewTime:      wallClock(sentAt),
		Marker:         c.marker,
	}
	r.Incarnation = boundIncarnation(r.AcquireTime, r.RenewTime, cfg.Incarnation)
	// 2.
	c.becomeAcquiring()
	ctx, cancel := withTimeout(c.ctx, c.e.clock, cfg.RenewDeadline, ErrRenewDeadlineMissed)
	defer cancel()
	var out LeaseRecord
	var err error
	create := !c.lease.exists()
	// A takeover on a proof that the holder is dead (Config.DeathWatch), before the
	// lease rules alone would have let it (Stats.DeathTakeovers).
	onDeath := !create && (c.holderDead(c.lease.record) || c.holderDeadListed(c.lease.record)) &&
		sentAt.Before(c.lease.since.Add(c.expiryWait(c.lease.record)))
	c.sentVersion, c.firstStateSinceSend, c.sendWatch = c.lease.maxVersion, 0, 0
	c.sendGapped, c.sendGapFrom = false, 0
	if c.watch.events != nil {
		c.sendWatch = c.watch.generation
	}
	if create {
		c.addSend(r, sentAt)
		c.writes.sent[len(c.writes.sent)-1].create = true
		out, err = c.e.store.Create(ctx, r)
	} else {
		prev := c.lease.record
		r.LeaseTransitions = c.nextTransitions(prev)
		r.Strategy = prev.Strategy
		r.ResourceVersion = prev.ResourceVersion
		c.addSend(r, sentAt)
		out, err = c.e.store.Update(ctx, r)
	}
	answeredAt := c.e.clock.Now()
	c.becomeFollowing()
	// 3.
	switch {
	case err == nil:
		c.acquireRetry.Reset()
		c.written(out, sentAt)
		// 4.
		c.acquired(out, sentAt, answeredAt, create, onDeath)
	case errors.Is(err, ErrConflict), errors.Is(err, ErrLeaseNotFound):
		c.markStale() // someone else wrote first; the watch shows what
	case c.ctx.Err() != nil:
	default:
		// Contact lost: what we saw may be old (the lease may have been created and
		// deleted meanwhile), so look again before the next attempt.
		c.e.logger.Warn("acquiring lease failed", "error", err)
		c.acquireAt = c.e.clock.Now().Add(c.acquireRetry.Next())
		c.markStale()
	}
}

// overtaken takes in what the watch delivered while the acquiring write (and any
// catch-up renew) was under way and reports whether the lease has moved past that
// write: then the write's term must not start. Its answer can come after the store applied later writes (the lease
// deleted and created again by a candidate that never saw it), whose events the watch
// may already hold; a term started on the answer would be led beside that candidate's
// until those events were read.
func (c *campaign) overtaken() bool {
	c.drainWatch()
	if c.lease.exists() && c.ours(c.lease.record) {
		return false
	}
	c.e.logger.Warn("acquiring write overtaken before its answer: not leading",
		"holder", c.lease.record.HolderIdentity, "deleted", !c.lease.exists(), "version", c.lease.record.ResourceVersion)
	return true
}

// acquired starts the term of the acquiring write out (a Create if create; onDeath if
// it took the lease on a proof that its holder is dead), sent at sentAt and answered at
// answeredAt. Its resourceVersion is the term; if that is not above the floor (the
// previous term, and the versions seen before the history went back), it first renews
// until it is, within half the RenewDeadline, and otherwise releases.
//
// The term starts only once the watch vouches for the write (writeVouched): it
// delivered the write's own event and every state between the send and it. The
// answer alone proves that the write landed on the state it was sent on, or, for a
// Create, on an absence, not that nothing came between: a candidate whose inputs were
// held (a paused process) can have missed another's term, and an etcd restore can put
// back the very state its compare-and-swap was sent on, the other term's writes
// undone while that term still runs by its holder's clock. Until then the lease is
// held (awaitWriteEvent). A Create that may have landed after states this elector
// never saw is held a LeaseDuration (hold).
func (c *campaign) acquired(out LeaseRecord, sentAt, answeredAt time.Time, create, onDeath bool) {
	term, err := parseTerm(out.ResourceVersion)
	renewed := sentAt
	if err == nil && term <= c.termFloor {
		c.e.logger.Warn("acquired below the previous terms: writing until above them",
			"version", term, "floor", c.termFloor)
		term, renewed, err = c.catchUp(sentAt)
	}
	if err != nil {
		c.e.logger.Error("refusing to lead", "error", err)
		if _, rerr := c.release(""); rerr != nil {
			c.e.logger.Error("releasing lease failed", "error", rerr)
		}
		c.acquireAt = c.e.clock.Now().Add(c.acquireRetry.Next())
		return
	}
	if c.overtaken() {
		return
	}
	if create {
		if why := c.createUnseen(out, sentAt, answeredAt); why != "" {
			c.hold(term, answeredAt, why)
			return
		}
	}
	if written, _ := parseVersion(out.ResourceVersion); !c.writeVouched(written) {
		c.awaitWriteEvent(heldTerm{term: term, written: written, onDeath: onDeath}, answeredAt)
		return
	}
	c.startTerm(term, sentAt)
	c.term.markRenewed(renewed)
	if onDeath {
		c.e.deathTakeovers.Add(1)
	}
	c.checkTerm() // judge what the watch showed meanwhile (a preferredHolder set since)
}

// catchUp renews the lease just acquired until its resourceVersion is above the floor;
// it returns that version and the send time of its write.
func (c *campaign) catchUp(sentAt time.Time) (uint64, time.Time, error) {
	deadline := sentAt.Add(c.e.config.RenewDeadline / 2)
	ctx, cancel := withTimeout(c.ctx, c.e.clock, deadline.Sub(c.e.clock.Now()), context.DeadlineExceeded)
	defer cancel()
	for range maxCatchUpWrites {
		at := c.e.clock.Now()
		if !at.Before(deadline) {
			break
		}
		out, err := c.e.store.Update(ctx, c.renewal(at))
		if err != nil {
			return 0, time.Time{}, fmt.Errorf("%w: catching up past %d: %w", ErrInvalidTerm, c.termFloor, err)
		}
		c.written(out, at)
		if term, err := parseTerm(out.ResourceVersion); err == nil && term > c.termFloor {
			return term, at, nil
		}
	}
	return 0, time.Time{}, fmt.Errorf("%w: resource version %s not above %d",
		ErrInvalidTerm, c.writes.confirmed.ResourceVersion, c.termFloor)
}

// renew extends the term with a compare-and-swap on our last write. The call runs under
// the term context, so it is abandoned when the renew deadline passes.
func (c *campaign) renew() {
	sentAt := c.e.clock.Now()
	out, err := c.e.store.Update(c.term, c.renewal(sentAt))
	switch {
	case err == nil:
		c.written(out, sentAt)
		if c.phase == leading && c.term.markRenewed(sentAt) {
			c.renewAt = sentAt.Add(c.e.config.RetryPeriod)
			c.renewRetry.Reset()
		}
	case errors.Is(err, ErrConflict):
		// Someone wrote the lease, or an earlier renew of ours whose answer was lost went
		// through: refresh judges it (checkTerm) and we renew again at once if we still
		// lead; otherwise the term ended.
		stale := c.writes.confirmed.ResourceVersion
		rerr := c.refresh(c.term)
		switch {
		case c.phase != leading: // lost, or handing over
		case rerr != nil || c.writes.confirmed.ResourceVersion == stale:
			c.renewAt = c.e.clock.Now().Add(c.renewRetry.Next())
		default:
			c.renewAt = c.e.clock.Now()
		}
	case errors.Is(err, ErrLeaseNotFound):
		c.observe(LeaseEvent{Deleted: true}, c.lease.maxVersion, true)
	default:
		if c.term.Err() == nil {
			c.e.logger.Warn("renewing lease failed", "error", err, "term", c.term.Term())
			c.renewAt = c.e.clock.Now().Add(c.renewRetry.Next())
		}
	}
}

// renewal returns our last write with its renew time set to sentAt, remembered as
// sent (addSend), for a compare-and-swap on that write.
func (c *campaign) renewal(sentAt time.Time) LeaseRecord {
	r := c.writes.confirmed
	r.RenewTime = wallClock(sentAt)
	r.LeaseDuration = c.e.config.LeaseDuration
	r.Marker = c.marker
	r.Incarnation = boundIncarnation(r.AcquireTime, r.RenewTime, c.e.config.Incarnation)
	c.addSend(r, sentAt)
	return r
}

// startTerm begins leading term, whose acquiring write was sent at sentAt, and runs
// OnStartedLeading in a goroutine of its own.
func (c *campaign) startTerm(term uint64, sentAt time.Time) {
	t := newTermContext(c.ctx, c.termOf(term), sentAt, c.e.config.RenewDeadline, c.e.clock)
	c.becomeLeading(t)
	c.termFloor = max(c.termFloor, term)
	c.renewAt = sentAt.Add(c.e.config.RetryPeriod)
	c.renewRetry.Reset()
	c.e.current.Store(t)
	c.e.logger.Info("became leader", "term", term)
	if f := c.e.callbacks.OnStartedLeading; f != nil {
		done := make(chan struct{})
		c.leaderDone = done
		c.e.wg.Go(func() {
			defer close(done)
			f(t)
		})
	}
}

// stepDown ends the current term with cause and calls OnStoppedLeading. The term's
// context ends before the elector stops naming it current, so that Term and IsLeader
// never report no term while that context is live.
func (c *campaign) stepDown(cause error) {
	t := c.term
	c.becomeFollowing()
	t.end(cause)
	c.e.current.Store(nil)
	c.e.logger.Info("stopped leading", "term", t.Term(), "cause", context.Cause(t))
	if f := c.e.callbacks.OnStoppedLeading; f != nil {
		f()
	}
}

// requestHandOver takes a HandOver request: it ends the term at once; the release
// follows when its leader work returned.
func (c *campaign) requestHandOver(req handoverRequest) {
	if c.phase != leading {
		req.reply <- ErrNotLeader
		return
	}
	c.e.logger.Info("handing over", "to", req.target, "term", c.term.Term())
	c.beginHandOver(req)
}

func (c *campaign) beginHandOver(req handoverRequest) {
	c.e.handOvers.Add(1)
	c.stepDown(ErrHandedOver)
	c.becomeHandingOver(req)
}

// finishHandOver writes the release of the pending hand-over and answers its request.
// A hand-over to nobody (Resign) then holds the next campaign back by a LeaseDuration,
// so that another candidate leads (resignedUntil).
func (c *campaign) finishHandOver() error {
	req := c.handover
	c.becomeFollowing()
	released, err := c.handAway(req.target)
	if req.target == "" {
		c.resignedUntil = c.e.clock.Now().Add(c.e.config.LeaseDuration)
		if err != nil && c.ctx.Err() == nil {
			c.e.logger.Warn("releasing the lease after resigning failed; the others wait for it to expire", "error", err)
		}
		return err
	}
	if err == nil && !released {
		err = fmt.Errorf("leaderelection: hand over to %q: %w", req.target, ErrLeaseLost)
	}
	if err != nil {
		c.e.logger.Warn("hand-over failed", "to", req.target, "error", err)
	}
	if req.reply != nil {
		req.reply <- err
	}
	return err
}

// handAway writes the hand-over of a lease still ours to target: one write that
// names target holder when the liveness source gives its hand-off (HandOffs),
// otherwise a release naming it (and a plain release for target ""). It reports
// whether it wrote it.
func (c *campaign) handAway(target string) (bool, error) {
	if h, ok := c.handOffs(); ok && target != "" && target != c.self {
		if inc, cite, ok := h.HandOff(target); ok {
			return c.writeAway(func(r *LeaseRecord, now time.Time) {
				r.HolderIdentity = target
				r.LeaseDuration = c.e.config.LeaseDuration
				r.AcquireTime, r.RenewTime = now, now
				r.LeaseTransitions = c.nextTransitions(*r)
				r.PreferredHolder = ""
				r.Marker = handOffMarker(target, cite)
				r.Incarnation = boundIncarnation(now, now, inc)
			}, "handed lease off", target)
		}
	}
	return c.release(target)
}

// release clears the holder of a lease that is still ours, as client-go does (holder
// "", leaseDurationSeconds 1, both times now), with a compare-and-swap, naming
// preferred as preferredHolder. It reports whether it wrote the release.
func (c *campaign) release(preferred string) (bool, error) {
	return c.writeAway(func(r *LeaseRecord, now time.Time) {
		r.HolderIdentity = ""
		r.LeaseDuration = time.Second
		r.AcquireTime, r.RenewTime = now, now
		r.PreferredHolder = preferred
		r.Marker = releaseMarker(r.LeaseTransitions, c.self)
		r.Incarnation = ""
	}, "released lease", preferred)
}

// writeAway writes the lease, while it is still ours, as give makes it from our
// record at the send time, with a compare-and-swap, once more after a conflict that
// a fresh read shows still ours; it logs done with to. It reports whether it wrote.
func (c *campaign) writeAway(give func(r *LeaseRecord, now time.Time), done, to string) (bool, error) {
	ctx, cancel := withTimeout(context.WithoutCancel(c.ctx), c.e.clock, c.e.config.RenewDeadline, context.DeadlineExceeded)
	defer cancel()
	for range 2 {
		if !c.lease.exists() || !c.ours(c.lease.record) {
			return false, nil // not ours any more: nothing to release
		}
		at := c.e.clock.Now()
		r := c.lease.record
		give(&r, wallClock(at))
		c.addSend(r, at)
		out, err := c.e.store.Update(ctx, r)
		switch {
		case err == nil:
			c.written(out, at)
			c.e.logger.Info(done, "to", to)
			return true, nil
		case errors.Is(err, ErrConflict):
			if err := c.refresh(ctx); err != nil {
				return false, fmt.Errorf("leaderelection: release %s: %w", c.e.store, err)
			}
		case errors.Is(err, ErrLeaseNotFound):
			return false, nil
		default:
			return false, fmt.Errorf("leaderelection: release %s: %w", c.e.store, err)
		}
	}
	return false, nil
}
