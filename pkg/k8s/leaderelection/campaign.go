package leaderelection

import (
	"context"
	"time"
)

// maxSends bounds the writes of ours kept for recognition (see campaign.sends).
const maxSends = 64

// sentWrite is a write of ours whose outcome may be unknown: its record (without the
// resourceVersion the store gives it) and when it was sent.
type sentWrite struct {
	record LeaseRecord
	at     time.Time
}

// campaign is the state of one Start: it lives on the election goroutine only.
type campaign struct {
	e      *Elector
	ctx    context.Context
	notify *notifier
	self   string

	// The watch. Opening one runs in a goroutine (a hung List must not stall renews),
	// which hands over the channel on opening, or drains it if the open was abandoned
	// meanwhile (after RenewDeadline, or at shutdown). events is nil while no watch is
	// open; when opening is nil too, watchAt is when to open one. stopWatch cancels the
	// open or opening watch. fresh is set while the next event is a watch's first: the
	// state as listed, current as of listSeen, the highest resourceVersion seen when
	// the open started (our writes may pass it while the list is under way).
	opening     chan watchOpen
	events      <-chan LeaseEvent
	stopWatch   context.CancelFunc
	watchOpened time.Time
	watchAt     time.Time
	watchRetry  backoff
	fresh       bool
	listSeen    uint64
	// blindSince is when the last watch broke or failed, zero while one is open (or
	// none was yet): a state listed after a longer gap than a RetryPeriod restarts the
	// expiry wait even if unchanged, since it may be a restored copy of a state others
	// have replaced meanwhile (versions repeat after an etcd restore).
	blindSince time.Time

	// The observed lease. record is the latest state seen; after a delete it is the last
	// state before the delete if the delete told it (lastKnown), zero otherwise.
	// observedAt is the local time record's state (or its absence) was first seen.
	known      bool
	exists     bool
	lastKnown  bool
	record     LeaseRecord
	observedAt time.Time
	// unvouched is set while record was first seen on a first look (the first ever, or
	// the first after the watch was down for long) and has not changed since: nothing
	// this elector saw vouches that it is not a restored copy of an old state.
	unvouched bool
	// heldLease is the leaseDuration of the last held record seen, and heldForeign
	// whether its holder was not Baton's: the basis of the wait for an unknown holder.
	heldLease   time.Duration
	heldForeign bool
	// holdUntil is the earliest acquisition after a sign of a holder that cannot be
	// judged: an absence whose last state is unknown, a resourceVersion gone back.
	holdUntil time.Time
	seen      uint64 // highest resourceVersion seen, 0 if none
	reported  string // last holder reported to OnNewLeader
	// stale is set when a write found the lease changed: wait for the next observation
	// (or, if none came by staleAt, open a new watch) before writing again.
	stale   bool
	staleAt time.Time

	// Our writes. wrote is the last write of ours the store confirmed (with its
	// resourceVersion); sends are our writes since, whose outcome may be unknown (a lost
	// reply): a record of the same core as any of them is ours.
	wrote      LeaseRecord
	wroteAt    time.Time // send time of wrote
	hasWritten bool
	sends      []sentWrite

	// Acquiring: acquireAt is the earliest next attempt after a failed one.
	acquireAt    time.Time
	acquireRetry backoff

	// Leading. term is the term led, nil while following; terms times it (and the
	// pending term of an acquiring write). leader runs OnStartedLeading, and work is
	// its channel while the last term's call runs; nil when it returned (or none ran).
	term   *termContext
	terms  *termTimer
	leader leaderWork
	work   <-chan struct{}
	// marker is holderMarker(self), made once: every acquire and renew writes it.
	marker string
	// floor is what a new term must be above: the last term, and after the history
	// went back, the highest resourceVersion seen before, so terms stay increasing
	// across candidates that saw each other's terms.
	floor      uint64
	renewAt    time.Time
	renewRetry backoff
	// held is the term of an acquiring Create that may have landed after states this
	// elector never saw, which waits (see hold.go); nil when none. The lease is renewed
	// every RetryPeriod meanwhile (renewAt). sentSeen is the highest resourceVersion
	// seen when the last acquiring Create was sent, and unseen the lowest version above
	// it of a state of the lease observed since, 0 if none: below the Create's own
	// version, it is a state the Create landed after.
	held     *heldTerm
	sentSeen uint64
	unseen   uint64

	// handover is the pending hand-over (to nobody after Resign): its release is
	// written once the ended term's OnStartedLeading returned. nil when none.
	handover *handoverRequest
}

func (c *campaign) run() error {
	defer func() {
		// Defer-style end of term: OnStoppedLeading runs even if the loop panics.
		if c.term != nil {
			c.stepDown(context.Cause(c.ctx))
		}
		c.leader.close() // also after a panic, so that Start's wait ends
	}()
	// wake has room for one tick, so that a timer never blocks; a tick of a timer
	// stopped too late only makes the loop look once more.
	wake := make(chan struct{}, 1)
	tick := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	// One timer for the whole campaign, re-armed for each wait (see wakeTimer).
	timer := wakeTimer{clock: c.e.clock, f: tick}
	defer timer.stop()
	c.openWatch()
	for c.ctx.Err() == nil {
		c.step()
		if c.ctx.Err() != nil {
			break
		}
		if at, ok := c.nextWake(); ok {
			timer.reset(at.Sub(c.e.clock.Now()))
		} else {
			timer.stop()
		}
		c.wait(wake)
	}
	return c.shutdown()
}

// wait takes the next input of the loop: the end of Start's context or of the term,
// leader work that returned, a hand-over request, an opened watch, a watch event, or a
// timer's wake. Of the inputs ready when it looks, it takes the first in that order,
// not one at random as a select would, so that an elector on a fake clock
// (Config.Clock) with a seeded Config.JitterSource takes the same path on every run.
func (c *campaign) wait(wake <-chan struct{}) {
	var termDone <-chan struct{}
	if c.term != nil {
		termDone = c.term.Done()
	}
	if c.poll(termDone, wake) {
		return
	}
	select {
	case <-c.ctx.Done():
	case <-termDone:
	case <-c.work:
		c.work = nil
	case req := <-c.e.handovers:
		c.requestHandOver(req)
	case o := <-c.opening:
		c.opened(o)
	case ev, ok := <-c.events:
		c.receive(ev, ok)
	case <-wake:
	}
}

// poll takes the first ready input of wait, in wait's order, without blocking; it
// reports whether one was ready.
func (c *campaign) poll(termDone, wake <-chan struct{}) bool {
	select {
	case <-c.ctx.Done():
		return true
	case <-termDone: // both end in step: either may go first
		return true
	default:
	}
	select {
	case <-c.work:
		c.work = nil
		return true
	default:
	}
	select {
	case req := <-c.e.handovers:
		c.requestHandOver(req)
		return true
	default:
	}
	select {
	case o := <-c.opening:
		c.opened(o)
		return true
	default:
	}
	select {
	case ev, ok := <-c.events:
		c.receive(ev, ok)
		return true
	default:
	}
	select {
	case <-wake:
		return true
	default:
		return false
	}
}

// step does what is due now.
func (c *campaign) step() {
	now := c.e.clock.Now()
	if c.opening != nil && !now.Before(c.watchOpened.Add(c.e.config.RenewDeadline)) {
		// The store has not answered within RenewDeadline (a black-holed List): give up
		// on this watch, whose goroutine ends with its context, and try again.
		c.e.logger.Warn("watching lease timed out", "after", c.e.config.RenewDeadline)
		c.stopWatch()
		c.opening, c.stopWatch = nil, nil
		c.markBlind()
		c.watchAt = now.Add(c.watchRetry.Next())
	}
	if c.events == nil && c.opening == nil && !now.Before(c.watchAt) {
		c.openWatch()
	}
	if c.term != nil {
		if c.term.Err() != nil {
			cause := context.Cause(c.term)
			c.stepDown(cause)
			c.resigned(cause)
		} else {
			if !now.Before(c.renewAt) {
				c.renew()
			}
			return
		}
	}
	if c.held != nil {
		c.stepHeld(now)
		return
	}
	if c.handover != nil {
		if c.work == nil {
			c.finishHandOver()
		}
		return
	}
	if c.stale && !now.Before(c.staleAt) {
		// A write conflicted but the watch has not shown the newer state within a
		// RetryPeriod: it is stuck. Open a new one, which re-reads the state.
		c.staleAt = now.Add(c.e.config.RetryPeriod)
		if c.events != nil {
			c.e.logger.Info("lease watch silent after a conflict, watching again")
			c.dropWatch()
			c.watchAt = now
			c.openWatch()
		}
	}
	if at, ok := c.acquireTime(); ok && !now.Before(at) {
		// Judge the latest state the watch delivered, not an older one it replaced.
		c.drainWatch()
		if at, ok := c.acquireTime(); ok && !now.Before(at) {
			c.acquire()
		}
	}
}

// nextWake is the earliest time step has something to do, not counting events.
func (c *campaign) nextWake() (time.Time, bool) {
	var at time.Time
	ok := false
	consider := func(t time.Time) {
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	if c.opening != nil {
		consider(c.watchOpened.Add(c.e.config.RenewDeadline))
	} else if c.events == nil {
		consider(c.watchAt)
	}
	if c.term != nil {
		consider(c.renewAt)
		return at, ok
	}
	if c.held != nil {
		consider(c.renewAt)
		consider(c.held.until)
		return at, ok
	}
	if c.stale {
		consider(c.staleAt)
	}
	if t, can := c.acquireTime(); can {
		consider(t)
	}
	return at, ok
}

// receive takes one receive from the watch channel.
func (c *campaign) receive(ev LeaseEvent, ok bool) {
	switch {
	case !ok:
		c.watchBroke()
	case ev.Err != nil:
		c.e.watchErrors.Add(1)
		c.e.logger.Warn("lease watch reported an error, watching again", "error", ev.Err)
		c.watchBroke()
	default:
		c.observeWatched(ev)
	}
}

// observeWatched observes an event of the watch: its first is the listed state.
func (c *campaign) observeWatched(ev LeaseEvent) {
	if !c.fresh {
		c.observe(ev, 0, false)
		return
	}
	c.fresh = false
	blind := !c.blindSince.IsZero() && c.e.clock.Now().Sub(c.blindSince) >= c.e.config.RetryPeriod
	c.blindSince = time.Time{}
	c.observe(ev, c.listSeen, true)
	if blind && c.exists {
		c.observedAt, c.unvouched = c.e.clock.Now(), true
	}
}

// drainWatch takes in, without waiting, what the watch has delivered and the loop has
// not read yet: a watch that finished opening, and the events waiting on the channel.
// It returns once neither has anything ready.
func (c *campaign) drainWatch() {
	for {
		select {
		case o := <-c.opening:
			c.opened(o)
		case ev, ok := <-c.events:
			c.receive(ev, ok)
		default:
			return
		}
	}
}

// watchOpen is the outcome of LeaseStore.Watch.
type watchOpen struct {
	events <-chan LeaseEvent
	err    error
}

// openWatch starts opening a watch of the lease; opened takes the outcome. The
// goroutine hands it over only while the open is wanted; an abandoned open's channel
// is drained until the store closes it, so Start waits for the store's goroutine too.
func (c *campaign) openWatch() {
	ctx, cancel := context.WithCancel(c.ctx)
	opening := make(chan watchOpen) // unbuffered: handed over only to a loop that waits
	c.opening, c.stopWatch = opening, cancel
	c.watchOpened, c.listSeen = c.e.clock.Now(), c.seen
	c.e.watches.Add(1)
	c.e.wg.Go(func() {
		events, err := c.e.store.Watch(ctx)
		select {
		case opening <- watchOpen{events: events, err: err}:
		case <-ctx.Done():
			if err == nil {
				for range events {
				}
			}
		}
	})
}

// opened takes the outcome of openWatch; on failure it schedules another try.
func (c *campaign) opened(o watchOpen) {
	c.opening = nil
	if o.err != nil {
		c.stopWatch()
		c.stopWatch = nil
		c.markBlind()
		if c.ctx.Err() == nil {
			c.e.logger.Warn("watching lease failed", "error", o.err)
		}
		c.watchAt = c.e.clock.Now().Add(c.watchRetry.Next())
		return
	}
	c.events, c.fresh = o.events, true
	c.watchOpened = c.e.clock.Now()
}

// markBlind notes that no watch is open from now, unless that began earlier.
func (c *campaign) markBlind() {
	if c.blindSince.IsZero() {
		c.blindSince = c.e.clock.Now()
	}
}

// dropWatch stops the open watch and drains its channel in a goroutine that Start
// waits for, until the store closes it.
func (c *campaign) dropWatch() {
	c.stopWatch()
	if events := c.events; events != nil {
		c.e.wg.Go(func() {
			for range events {
			}
		})
	}
	c.events, c.stopWatch = nil, nil
}

// watchBroke schedules a new watch after the store closed the channel or reported an
// error. A watch that lasted a RetryPeriod resets the backoff.
func (c *campaign) watchBroke() {
	c.dropWatch()
	c.markBlind()
	now := c.e.clock.Now()
	if now.Sub(c.watchOpened) >= c.e.config.RetryPeriod {
		c.watchRetry.Reset()
	}
	c.watchAt = now.Add(c.watchRetry.Next())
	c.e.logger.Debug("lease watch closed", "retry", c.watchAt.Sub(now))
}

// shutdown ends the term, closes the watch, waits for leader work, and releases (to the
// target of a pending hand-over, or with ReleaseOnCancel).
func (c *campaign) shutdown() error {
	if c.term != nil {
		c.stepDown(context.Cause(c.ctx))
	}
	if c.stopWatch != nil {
		c.stopWatch() // an opening goroutine drains what it gets
	}
	c.opening = nil
	if c.events != nil {
		for ev := range c.events { // until the store closed it: its goroutine is done
			if ev.Err == nil {
				c.observeWatched(ev)
			}
		}
		c.events = nil
	}
	if c.work != nil {
		<-c.work
		c.work = nil
	}
	c.leader.close()
	if c.handover != nil {
		return c.finishHandOver()
	}
	if c.e.config.ReleaseOnCancel {
		_, err := c.release("")
		return err
	}
	return nil
}
