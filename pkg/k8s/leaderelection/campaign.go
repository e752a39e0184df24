package leaderelection

import (
	"context"
	"time"
)

// phase is what a campaign does with the lease.
type phase int

const (
	// following: the campaign watches the lease and acquires it once the observed state
	// allows (acquireTime).
	following phase = iota
	// acquiring: an acquiring write is under way (acquire).
	acquiring
	// holding: an acquiring write landed, but the watch has not vouched that nothing
	// came between it and the state it was sent on; the lease is ours and renewed, but
	// its term starts only once the watch does, or at held.until (hold.go).
	holding
	// leading: term runs.
	leading
	// handingOver: the term ended for a hand-over or Resign; the release is written
	// once its OnStartedLeading returned (handover).
	handingOver
)

var phaseNames = [...]string{"following", "acquiring", "holding", "leading", "handing over"}

func (p phase) String() string { return phaseNames[p] }

// maxSends bounds the writes of ours kept for recognition (see ourWrites.sent).
const maxSends = 64

// sentWrite is a write of ours whose outcome may be unknown: its record (without the
// resourceVersion the store gives it) and when it was sent.
type sentWrite struct {
	record LeaseRecord
	at     time.Time
	create bool // an acquiring Create: it may land after states this elector never saw
}

// watchState is the campaign's watch of the lease. Opening one runs in a goroutine (a
// hung List must not stall renews), which hands over the channel on opening, or drains
// it if the open was abandoned meanwhile (after RenewDeadline, or at shutdown).
type watchState struct {
	opening  chan watchOpen     // non-nil while an open is under way
	events   <-chan LeaseEvent  // non-nil while a watch is open
	stop     context.CancelFunc // cancels the opening or open watch
	openedAt time.Time          // when the open started; once open, when it opened
	retryAt  time.Time          // when to open the next, while none is open or opening
	backoff  backoff
	// listNext is set while the next event is a watch's first: the state as listed,
	// current as of listFloor, the highest resourceVersion seen when the open started
	// (our writes may pass it while the list is under way).
	listNext  bool
	listFloor uint64
	// brokenSince is when the last watch broke or failed, zero while one is open (or
	// none was yet): a state listed after a longer gap than a RetryPeriod restarts the
	// expiry wait even if unchanged, since it may be a restored copy of a state others
	// have replaced meanwhile (versions repeat after an etcd restore).
	brokenSince time.Time
	// awaySince is when the loop last stopped waiting for its inputs (zero before it
	// first did). A close the loop finds without waiting came while it was busy (an
	// acquiring write that hangs, a paused node): it may have come any time since.
	awaySince time.Time
	// staleCheckAt is set (non-zero) while the watch is stale: a write found the lease
	// changed, so wait for the next observation (or, if none came by staleCheckAt, open
	// a new watch) before writing again. Zero otherwise.
	staleCheckAt time.Time
	// lag is the latest delay seen between a write of ours and its event on the watch,
	// or between the opening of a watch and its first event: a watch silent for less
	// than this after a conflict may only be slow, and is given that long (staleWait).
	lag time.Duration
	// generation counts the watches opened; delivered is the resourceVersion of the
	// last event the open one delivered (0 before its first event): where in the
	// lease's history the watch stands, which a restore moves back.
	generation uint64
	delivered  uint64
}

// presence is what the campaign knows of the lease's existence.
type presence uint8

const (
	unseen      presence = iota // nothing observed yet
	present                     // the lease exists; record is its latest state
	goneLast                    // deleted; record is its last state, which the delete told
	goneUnknown                 // absent, and its last state (if any) is unknown; record is zero
)

// vouch is what vouches that the observed record is the store's current history and
// not a restored copy of an old state (versions repeat after an etcd restore).
type vouch uint8

const (
	// firstLook: record was first seen on a first look (the first ever, or the first
	// after the watch was down for long) and has not changed since: nothing vouches.
	firstLook vouch = iota
	// onRead: record changed since a first look, but at its resourceVersion it was
	// seen on a list (or a read, or a write's answer) only, which may be a restored
	// copy hiding later acquisitions.
	onRead
	// evented: a watch event delivered record at its resourceVersion. Only then does
	// a proof of its holder's death shorten its wait (Config.DeathWatch).
	evented
)

// observedLease is what the campaign knows of the lease.
type observedLease struct {
	presence presence
	// record is the latest state seen; after a delete, the last state before it
	// (goneLast) or zero (goneUnknown).
	record LeaseRecord
	since  time.Time // local time record's state (or its absence) was first seen
	vouch  vouch     // what vouches for record; meaningful while present
	// holderDuration is the leaseDuration of the last held record seen, and
	// holderForeign whether its holder was not Baton's: the basis of the wait for an
	// unknown holder.
	holderDuration time.Duration
	holderForeign  bool
	// unknownUntil is the earliest acquisition after a sign of a holder that cannot be
	// judged: an absence whose last state is unknown, a resourceVersion gone back.
	unknownUntil time.Time
	maxVersion   uint64 // highest resourceVersion seen, 0 if none
	reported     string // last holder reported to OnNewLeader
	// checkedVersion is the resourceVersion of the last record checkRange looked at.
	checkedVersion string
}

// known reports whether a state (or absence) of the lease was observed.
func (l *observedLease) known() bool { return l.presence != unseen }

// exists reports whether the lease exists, as last observed.
func (l *observedLease) exists() bool { return l.presence == present }

// lastKnown reports whether record is the lease's state or its last state before a
// delete.
func (l *observedLease) lastKnown() bool { return l.presence == present || l.presence == goneLast }

// stale reports whether a write found the lease changed and no observation came since.
func (w *watchState) stale() bool { return !w.staleCheckAt.IsZero() }

// ourWrites are the writes of this elector that the campaign can recognise. A record
// of the same core as confirmed or as any of sent is ours.
type ourWrites struct {
	confirmed    LeaseRecord // the last write the store confirmed, with its resourceVersion
	confirmedAt  time.Time   // its send time
	hasConfirmed bool
	sent         []sentWrite // writes sent since, whose outcome may be unknown (a lost reply)
}

// campaign is the state of one Start: it lives on the election goroutine only.
type campaign struct {
	e      *Elector
	ctx    context.Context
	notify *notifier // nil without OnNewLeader
	self   string
	marker string // holderMarker(self): every acquire and renew writes it

	phase  phase
	watch  watchState
	lease  observedLease
	writes ourWrites

	// Acquiring: acquireAt is the earliest next attempt after a failed one.
	// sentVersion is the highest resourceVersion seen when the last acquiring write (a
	// Create or a compare-and-swap) was sent, and firstStateSinceSend the lowest version
	// above it of a state of the lease observed since, 0 if none: below the write's own
	// version, it is a state the write landed after. sendWatch is the generation of the
	// watch open when it was sent, 0 if none was. sendGapped is set when that watch
	// delivered, since the send, an event after which the store said it may have
	// skipped states (LeaseEvent.Gap) above the send's version, and sendGapFrom is the
	// lowest version such a skip may have started above: if it is below the write's own
	// version, the watch may have skipped states before the write.
	acquireAt    time.Time
	acquireRetry backoff
	// resignedUntil holds the next campaign back after a hand-over to nobody (a
	// Resign, or a term that ended unrenewed), so that another candidate leads; a
	// hand-over to this candidate is taken at once all the same (acquireTime).
	resignedUntil       time.Time
	sentVersion         uint64
	firstStateSinceSend uint64
	sendWatch           uint64
	sendGapped          bool
	sendGapFrom         uint64

	// The term: led while leading; held (a slow Create's) while holding; handover is
	// the hand-over (to nobody after Resign) whose release is written, while handing
	// over, once the ended term's OnStartedLeading returned. leaderDone is closed when
	// the last term's OnStartedLeading returned, nil once seen (or none ran).
	term       *termContext
	held       heldTerm
	handover   handoverRequest
	leaderDone <-chan struct{}
	// termFloor is what a new term must be above: the last term, and after the history
	// went back, the highest resourceVersion seen before, so terms stay increasing
	// across candidates that saw each other's terms.
	termFloor  uint64
	renewAt    time.Time // next renew, while leading or holding
	renewRetry backoff

	death deathState // the watch of the holder's incarnation (Config.DeathWatch)
}

func (c *campaign) run() error {
	defer func() {
		// Defer-style end of term: OnStoppedLeading runs even if the loop panics.
		if c.phase == leading {
			c.stepDown(context.Cause(c.ctx))
		}
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
	var timer Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	c.openWatch()
	for c.ctx.Err() == nil {
		c.step()
		if c.ctx.Err() != nil {
			break
		}
		if timer != nil {
			timer.Stop()
			timer = nil
		}
		if at, ok := c.nextWake(); ok {
			timer = c.e.clock.AfterFunc(at.Sub(c.e.clock.Now()), tick)
		}
		c.wait(wake)
	}
	return c.shutdown()
}

// wait takes the next input of the loop: the end of Start's context or of the term,
// leader work that returned, a hand-over request, an opened watch, a watch event, a
// proof of the holder's death, a change of SetCampaigning, or a timer's wake. Of the
// inputs ready when it looks, it takes the first in that order, not one at random as a
// select would, so that an elector on a fake clock (Config.Clock) with a seeded
// Config.JitterSource takes the same path on every run.
func (c *campaign) wait(wake <-chan struct{}) {
	var termDone <-chan struct{}
	if c.phase == leading {
		termDone = c.term.Done()
	}
	if c.poll(termDone, wake) {
		return
	}
	defer func() { c.watch.awaySince = c.e.clock.Now() }()
	select {
	case <-c.ctx.Done():
	case <-termDone:
	case <-c.leaderDone:
		c.leaderDone = nil
	case req := <-c.e.handovers:
		c.requestHandOver(req)
	case o := <-c.watch.opening:
		c.opened(o)
	case ev, ok := <-c.watch.events:
		c.watch.awaySince = c.e.clock.Now() // waited for: it came now
		c.receive(ev, ok)
	case <-c.death.proven:
		c.deathProven()
	case <-c.e.campaignChanged:
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
	case <-c.leaderDone:
		c.leaderDone = nil
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
	case o := <-c.watch.opening:
		c.opened(o)
		return true
	default:
	}
	select {
	case ev, ok := <-c.watch.events:
		c.receive(ev, ok)
		return true
	default:
	}
	select {
	case <-c.death.proven:
		c.deathProven()
		return true
	default:
	}
	select {
	case <-c.e.campaignChanged:
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

// step does what is due now:
//
//  1. Keep a watch open: give up an open that hangs, open one when none is.
//  2. Leading: end a term that is over (by its clock, or Resign), else renew when due.
//  3. Holding: start the held term at its time, renew when due.
//  4. Handing over: release once the ended term's OnStartedLeading returned.
//  5. Following: replace a watch that stayed silent after a write conflicted; when
//     the observed state allows, read what the watch delivered and acquire.
func (c *campaign) step() {
	now := c.e.clock.Now()
	// 1. The watch.
	if c.watch.opening != nil && !now.Before(c.watch.openedAt.Add(c.e.config.RenewDeadline)) {
		// The store has not answered within RenewDeadline (a black-holed List): give up
		// on this watch, whose goroutine ends with its context, and try again.
		c.e.logger.Warn("watching lease timed out", "after", c.e.config.RenewDeadline)
		c.watch.stop()
		c.watch.opening, c.watch.stop = nil, nil
		c.markBroken(now)
		c.watch.retryAt = now.Add(c.watch.backoff.Next())
	}
	if c.watch.events == nil && c.watch.opening == nil && !now.Before(c.watch.retryAt) {
		c.openWatch()
	}
	// 2. Leading.
	if c.phase == leading {
		if c.term.Err() == nil {
			if !c.external() && !now.Before(c.renewAt) {
				c.renew()
			}
			return
		}
		cause := context.Cause(c.term)
		c.stepDown(cause)
		c.resigned(cause, c.endedUnrenewed(cause))
	}
	switch c.phase {
	case holding: // 3.
		c.stepHeld(now)
	case handingOver: // 4.
		if c.leaderDone == nil {
			c.finishHandOver()
		}
	case following: // 5.
		if c.watch.stale() && !now.Before(c.watch.staleCheckAt) {
			c.replaceSilentWatch(now)
		}
		if c.strandedHold() && !now.Before(c.heldBackUntil()) {
			c.releaseStranded()
		}
		if at, ok := c.acquireTime(); ok && !now.Before(at) {
			// Judge the latest state the watch delivered, not an older one it replaced.
			c.drainWatch()
			if at, ok := c.acquireTime(); ok && !now.Before(at) && c.livenessConfirmed() && !c.startHandedOff() {
				c.acquire()
			}
		}
	}
}

// replaceSilentWatch replaces a watch that has not shown the newer state a write
// conflicted with within staleWait: it may be stuck. The new one re-reads the state and
// is given as long. A watch given up before its first event was slower than that: the
// lag is taken as at least twice its age (up to maxWatchLag), so that a lag that began
// unmeasured does not have every new watch given up before its first event.
func (c *campaign) replaceSilentWatch(now time.Time) {
	if c.watch.events != nil && c.watch.listNext {
		c.watch.lag = min(max(c.watch.lag, 2*now.Sub(c.watch.openedAt)), maxWatchLag*c.e.config.LeaseDuration)
	}
	c.watch.staleCheckAt = now.Add(c.staleWait())
	if c.watch.events != nil {
		c.e.logger.Info("lease watch silent after a conflict, watching again", "lag", c.watch.lag)
		c.dropWatch()
		c.watch.retryAt = now
		c.openWatch()
	}
}

// maxWatchLag bounds, in LeaseDurations, the lag a silent watch is taken to have.
const maxWatchLag = 4

// nextWake is the earliest time step has something to do, not counting events.
func (c *campaign) nextWake() (time.Time, bool) {
	var at time.Time
	ok := false
	consider := func(t time.Time) {
		if !ok || t.Before(at) {
			at, ok = t, true
		}
	}
	if c.watch.opening != nil {
		consider(c.watch.openedAt.Add(c.e.config.RenewDeadline))
	} else if c.watch.events == nil {
		consider(c.watch.retryAt)
	}
	switch c.phase {
	case leading:
		if !c.external() {
			consider(c.renewAt)
		}
	case holding:
		consider(c.renewAt)
		consider(c.held.until)
	case following:
		if c.watch.stale() {
			consider(c.watch.staleCheckAt)
		}
		if t, can := c.acquireTime(); can {
			consider(t)
		}
		if c.strandedHold() {
			consider(c.heldBackUntil())
		}
	}
	return at, ok
}

// heldBackUntil is when the next acquiring or releasing write of a follower may go:
// after a failed attempt's retry (acquireAt) and a resign's hold-back (resignedUntil).
func (c *campaign) heldBackUntil() time.Time { return later(c.acquireAt, c.resignedUntil) }

// shutdown ends the term, closes the watch, waits for leader work, and releases (to the
// target of a pending hand-over, or with ReleaseOnCancel).
func (c *campaign) shutdown() error {
	if c.phase == leading {
		c.stepDown(context.Cause(c.ctx))
	}
	c.stopDeath()
	if c.watch.stop != nil {
		c.watch.stop() // an opening goroutine drains what it gets
	}
	c.watch.opening = nil
	if c.watch.events != nil {
		for ev := range c.watch.events { // until the store closed it: its goroutine is done
			if ev.Err == nil {
				c.observeWatched(ev)
			}
		}
		c.watch.events = nil
	}
	if c.leaderDone != nil {
		<-c.leaderDone
		c.leaderDone = nil
	}
	if c.phase == handingOver {
		return c.finishHandOver()
	}
	if c.e.config.ReleaseOnCancel {
		_, err := c.release("")
		return err
	}
	return nil
}
