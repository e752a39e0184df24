package leaderelection

import (
	"context"
	"time"
)

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
	if ev.Gap && !c.watch.listNext {
		c.noteGap(ev)
	}
	if v, ok := parseVersion(ev.Record.ResourceVersion); ok {
		c.watch.delivered = v
	}
	c.measureLag(ev)
	if !c.watch.listNext {
		c.observe(ev, 0, false)
		return
	}
	c.watch.listNext = false
	blind := c.blind(c.e.clock.Now())
	c.watch.brokenSince = time.Time{}
	c.observe(ev, c.watch.listFloor, true)
	if blind && c.lease.exists() {
		c.lease.since, c.lease.vouch = c.e.clock.Now(), firstLook
	}
}

// noteGap takes in ev, an event after which the store says it may have skipped
// states: those between the last state the watch delivered and ev's. If the watch open
// at the last acquiring write's send delivered it, and the skip may hold states above
// the send's version, it is noted for writeVouched.
func (c *campaign) noteGap(ev LeaseEvent) {
	if c.sendWatch == 0 || c.sendWatch != c.watch.generation {
		return
	}
	if v, ok := parseVersion(ev.Record.ResourceVersion); ok && v <= c.sentVersion {
		return // the skipped states came before the send
	}
	if from := c.watch.delivered; !c.sendGapped || from < c.sendGapFrom {
		c.sendGapped, c.sendGapFrom = true, from
	}
}

// measureLag records the watch's lag (watchState.lag) from ev: a watch's first event
// against the time it opened, the event of our last confirmed write against its send.
func (c *campaign) measureLag(ev LeaseEvent) {
	now := c.e.clock.Now()
	switch {
	case c.watch.listNext:
		c.watch.lag = max(0, now.Sub(c.watch.openedAt))
	case c.writes.hasConfirmed && ev.Record.ResourceVersion != "" && ev.Record.ResourceVersion == c.writes.confirmed.ResourceVersion:
		c.watch.lag = max(0, now.Sub(c.writes.confirmedAt))
	}
}

// drainWatch takes in, without waiting, what the watch has delivered and the loop has
// not read yet: a watch that finished opening, and the events waiting on the channel.
// It returns once neither has anything ready.
func (c *campaign) drainWatch() {
	for {
		select {
		case o := <-c.watch.opening:
			c.opened(o)
		case ev, ok := <-c.watch.events:
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
	c.watch.opening, c.watch.stop = opening, cancel
	c.watch.openedAt, c.watch.listFloor = c.e.clock.Now(), c.lease.maxVersion
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
	c.watch.opening = nil
	if o.err != nil {
		c.watch.stop()
		c.watch.stop = nil
		c.markBroken(c.e.clock.Now())
		if c.ctx.Err() == nil {
			c.e.logger.Warn("watching lease failed", "error", o.err)
		}
		c.watch.retryAt = c.e.clock.Now().Add(c.watch.backoff.Next())
		return
	}
	c.watch.events, c.watch.listNext = o.events, true
	c.watch.openedAt = c.e.clock.Now()
	c.watch.generation++
	c.watch.delivered = 0
}

// blind reports whether no watch has shown the lease for a RetryPeriod or longer at
// now: the last one broke (or an open failed) that long ago, and no new one has listed
// the lease since. What the campaign knows of the lease may then be stale in a way no
// compare-and-swap reveals: the holder may have renewed meanwhile, and an etcd restore
// may have put back the very state last seen, at its resourceVersion, so that a write
// on that version matches again while the holder's term runs. A blind follower does
// not acquire (acquireTime); the state the next watch lists restarts its wait.
func (c *campaign) blind(now time.Time) bool {
	return !c.watch.brokenSince.IsZero() && now.Sub(c.watch.brokenSince) >= c.e.config.RetryPeriod
}

// markBroken notes that no watch is open from at, unless that began earlier.
func (c *campaign) markBroken(at time.Time) {
	if c.watch.brokenSince.IsZero() {
		c.watch.brokenSince = at
	}
}

// dropWatch stops the open watch and drains its channel in a goroutine that Start
// waits for, until the store closes it.
func (c *campaign) dropWatch() {
	c.watch.stop()
	if events := c.watch.events; events != nil {
		c.e.wg.Go(func() {
			for range events {
			}
		})
	}
	c.watch.events, c.watch.stop = nil, nil
}

// watchBroke schedules a new watch after the store closed the channel or reported an
// error. A watch that lasted a RetryPeriod resets the backoff.
func (c *campaign) watchBroke() {
	c.dropWatch()
	now := c.e.clock.Now()
	// A close found without waiting came while the loop was busy: count from then.
	if away := c.watch.awaySince; !away.IsZero() && away.Before(now) {
		c.markBroken(away)
	} else {
		c.markBroken(now)
	}
	if now.Sub(c.watch.openedAt) >= c.e.config.RetryPeriod {
		c.watch.backoff.Reset()
	}
	c.watch.retryAt = now.Add(c.watch.backoff.Next())
	c.e.logger.Debug("lease watch closed", "retry", c.watch.retryAt.Sub(now))
}
