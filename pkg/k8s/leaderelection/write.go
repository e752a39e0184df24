package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	call := newCallContext(ctx, c.e.clock, c.e.config.RenewDeadline)
	defer call.stop()
	r, err := c.e.store.Get(call)
	switch {
	case err == nil:
		c.observe(LeaseEvent{Record: r}, c.seen, true)
	case errors.Is(err, ErrLeaseNotFound):
		c.observe(LeaseEvent{Deleted: true}, c.seen, true)
	default:
		return err
	}
	return nil
}

func (c *campaign) markStale() {
	c.stale = true
	c.staleAt = c.e.clock.Now().Add(c.e.config.RetryPeriod)
}

// written records r, the answer to our write sent at at, and observes it.
func (c *campaign) written(r LeaseRecord, at time.Time) {
	c.confirm(r, at)
	c.observe(LeaseEvent{Record: r}, c.seen, true)
}

// acquire tries to take the lease with a compare-and-swap on the observed version. The
// write runs under the context of the term it may start, pending (term 0, not current,
// no term for termctx) until the write went through: it ends when that term would, a
// RenewDeadline after the send, as the call's own timeout would, and renews run under
// the term context too. So the term that starts is the context the write made, and a
// term costs one context. If the term does not start, its context ends with
// context.Canceled when acquire returns.
func (c *campaign) acquire() {
	cfg := c.e.config
	sentAt := c.e.clock.Now()
	r := LeaseRecord{
		HolderIdentity: c.self,
		LeaseDuration:  cfg.LeaseDuration,
		AcquireTime:    wallClock(sentAt),
		RenewTime:      wallClock(sentAt),
		Marker:         c.marker,
	}
	ctx := newTermContextOn(c.ctx, 0, sentAt, cfg.RenewDeadline, c.terms)
	defer func() {
		if c.term != ctx {
			ctx.end(context.Canceled) // a no-op for a term that started and ended
		}
	}()
	var out LeaseRecord
	var err error
	create := !c.exists
	if create {
		c.sentSeen, c.unseen = c.seen, 0
		c.addSend(r, sentAt)
		out, err = c.e.store.Create(ctx, r)
	} else {
		prev := c.record
		r.LeaseTransitions = prev.LeaseTransitions
		if prev.HolderIdentity != c.self {
			r.LeaseTransitions++
		}
		r.Strategy = prev.Strategy
		r.ResourceVersion = prev.ResourceVersion
		c.addSend(r, sentAt)
		out, err = c.e.store.Update(ctx, r)
	}
	answeredAt := c.e.clock.Now()
	switch {
	case err == nil:
		c.acquireRetry.Reset()
		c.written(out, sentAt)
		c.acquired(out, sentAt, answeredAt, create, ctx)
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
	if c.exists && c.ours(c.record) {
		return false
	}
	c.e.logger.Warn("acquiring write overtaken before its answer: not leading",
		"holder", c.record.HolderIdentity, "deleted", !c.exists, "version", c.record.ResourceVersion)
	return true
}

// acquired starts the term of the acquiring write out (a Create if create), sent at
// sentAt and answered at answeredAt, on pending, the context the write ran under. Its
// resourceVersion is the term; if that is not above the floor (the previous term, and
// the versions seen before the history went back), it first renews until it is,
// within half the RenewDeadline, and otherwise releases. A Create that may have landed
// after states this elector never saw holds the lease before its term starts (see
// hold), on a term context of its own.
func (c *campaign) acquired(out LeaseRecord, sentAt, answeredAt time.Time, create bool, pending *termContext) {
	term, err := parseTerm(out.ResourceVersion)
	renewed := sentAt
	if err == nil && term <= c.floor {
		c.e.logger.Warn("acquired below the previous terms: writing until above them",
			"version", term, "floor", c.floor)
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
	c.startTerm(term, sentAt, pending)
	c.term.markRenewed(renewed)
	c.checkTerm() // judge what the watch showed meanwhile (a preferredHolder set since)
}

// catchUp renews the lease just acquired until its resourceVersion is above the floor;
// it returns that version and the send time of its write.
func (c *campaign) catchUp(sentAt time.Time) (uint64, time.Time, error) {
	deadline := sentAt.Add(c.e.config.RenewDeadline / 2)
	ctx := newCallContext(c.ctx, c.e.clock, deadline.Sub(c.e.clock.Now()))
	defer ctx.stop()
	for range maxCatchUpWrites {
		at := c.e.clock.Now()
		if !at.Before(deadline) {
			break
		}
		out, err := c.e.store.Update(ctx, c.renewal(at))
		if err != nil {
			return 0, time.Time{}, fmt.Errorf("%w: catching up past %d: %w", ErrInvalidTerm, c.floor, err)
		}
		c.written(out, at)
		if term, err := parseTerm(out.ResourceVersion); err == nil && term > c.floor {
			return term, at, nil
		}
	}
	return 0, time.Time{}, fmt.Errorf("%w: resource version %s not above %d",
		ErrInvalidTerm, c.wrote.ResourceVersion, c.floor)
}

// renew extends the term with a compare-and-swap on our last write. The call runs under
// the term context, so it is abandoned when the renew deadline passes.
func (c *campaign) renew() {
	sentAt := c.e.clock.Now()
	out, err := c.e.store.Update(c.term, c.renewal(sentAt))
	switch {
	case err == nil:
		c.written(out, sentAt)
		if c.term != nil && c.term.markRenewed(sentAt) {
			c.renewAt = sentAt.Add(c.e.config.RetryPeriod)
			c.renewRetry.Reset()
		}
	case errors.Is(err, ErrConflict):
		// Someone wrote the lease, or an earlier renew of ours whose answer was lost went
		// through: refresh judges it (checkTerm) and we renew again at once if we still
		// lead; otherwise the term ended.
		stale := c.wrote.ResourceVersion
		rerr := c.refresh(c.term)
		switch {
		case c.term == nil: // lost
		case rerr != nil || c.wrote.ResourceVersion == stale:
			c.renewAt = c.e.clock.Now().Add(c.renewRetry.Next())
		default:
			c.renewAt = c.e.clock.Now()
		}
	case errors.Is(err, ErrLeaseNotFound):
		c.observe(LeaseEvent{Deleted: true}, c.seen, true)
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
	r := c.wrote
	r.RenewTime = wallClock(sentAt)
	r.LeaseDuration = c.e.config.LeaseDuration
	r.Marker = c.marker
	c.addSend(r, sentAt)
	return r
}

// startTerm begins leading under term, whose acquiring write was sent at sentAt, on
// pending, the context that write ran under (made with sentAt as its start), or on a
// new term context when pending is nil.
func (c *campaign) startTerm(term uint64, sentAt time.Time, pending *termContext) {
	t := pending
	if t == nil {
		t = newTermContextOn(c.ctx, term, sentAt, c.e.config.RenewDeadline, c.terms)
	}
	t.term.Store(term)
	c.term, c.floor = t, max(c.floor, term)
	c.renewAt = sentAt.Add(c.e.config.RetryPeriod)
	c.renewRetry.Reset()
	c.e.current.Store(t)
	// LogAttrs: no allocation for the attributes, none at all when the level is off.
	c.e.logger.LogAttrs(context.Background(), slog.LevelInfo, "became leader", slog.Uint64("term", term))
	if f := c.e.callbacks.OnStartedLeading; f != nil {
		c.work = c.leader.run(&c.e.wg, f, t)
	}
}

// stepDown ends the current term with cause and calls OnStoppedLeading.
func (c *campaign) stepDown(cause error) {
	t := c.term
	c.term = nil
	c.e.current.Store(nil)
	t.end(cause)
	c.e.logger.LogAttrs(context.Background(), slog.LevelInfo, "stopped leading",
		slog.Uint64("term", t.Term()), slog.Any("cause", context.Cause(t)))
	if f := c.e.callbacks.OnStoppedLeading; f != nil {
		f()
	}
}

// requestHandOver takes a HandOver request: it ends the term at once; the release
// follows when its leader work returned.
func (c *campaign) requestHandOver(req handoverRequest) {
	if c.term == nil || c.handover != nil {
		req.reply <- ErrNotLeader
		return
	}
	c.e.logger.Info("handing over", "to", req.target, "term", c.term.Term())
	c.beginHandOver(req)
}

func (c *campaign) beginHandOver(req handoverRequest) {
	c.handover = &req
	c.e.handOvers.Add(1)
	c.stepDown(ErrHandedOver)
}

// finishHandOver writes the release of the pending hand-over and answers its request.
// A hand-over to nobody (Resign) then holds the next campaign back by a LeaseDuration,
// so that another candidate leads.
func (c *campaign) finishHandOver() error {
	req := c.handover
	c.handover = nil
	released, err := c.release(req.target)
	if req.target == "" {
		c.acquireAt = c.e.clock.Now().Add(c.e.config.LeaseDuration)
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

// release clears the holder of a lease that is still ours, as client-go does (holder
// "", leaseDurationSeconds 1, both times now), with a compare-and-swap, naming
// preferred as preferredHolder. It reports whether it wrote the release.
func (c *campaign) release(preferred string) (bool, error) {
	ctx := newCallContext(context.WithoutCancel(c.ctx), c.e.clock, c.e.config.RenewDeadline)
	defer ctx.stop()
	for range 2 {
		if !c.exists || !c.ours(c.record) {
			return false, nil // not ours any more: nothing to release
		}
		at := c.e.clock.Now()
		now := wallClock(at)
		r := c.record
		r.HolderIdentity = ""
		r.LeaseDuration = time.Second
		r.AcquireTime, r.RenewTime = now, now
		r.PreferredHolder = preferred
		r.Marker = releaseMarker(r.LeaseTransitions, c.self)
		c.addSend(r, at)
		out, err := c.e.store.Update(ctx, r)
		switch {
		case err == nil:
			c.written(out, at)
			c.e.logger.Info("released lease", "preferred_holder", preferred)
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
