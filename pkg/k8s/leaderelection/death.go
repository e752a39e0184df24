package leaderelection

import (
	"context"
	"strings"
	"time"
)

// DeathWatch tells a follower that the process holding the lease is over, so that it
// takes the lease at once instead of waiting the lease out. Package
// pkg/k8s/incarnation's Watcher is the one for Kubernetes pods: it trusts only the
// kubelet's report that the holder's container terminated.
type DeathWatch interface {
	// Dead returns a channel that is closed once incarnation (another candidate's
	// Config.Incarnation, as its lease record names it) is proven over, and never closed otherwise; the
	// work behind it ends when ctx ends. An implementation must close it only on
	// proof: a closed channel lets a follower take the lease from that incarnation at
	// once, and two leaders run if it was alive.
	Dead(ctx context.Context, incarnation string) <-chan struct{}
}

// maxIncarnation bounds Config.Incarnation (it is written to an annotation).
const maxIncarnation = 1024

// checkDeathSignal reports a bad Config.Incarnation to bad.
func checkDeathSignal(c Config, bad func(field, format string, args ...any)) {
	if len(c.Incarnation) > maxIncarnation {
		bad("Incarnation", "incarnation is %d bytes, more than %d", len(c.Incarnation), maxIncarnation)
	}
}

// boundIncarnation is the LeaseRecord.Incarnation of a write by a holder of
// Config.Incarnation inc with the given acquireTime and renewTime: inc bound to that
// write, "<acquireTime> <renewTime> <inc>" (RFC 3339 in UTC), so that a later write by
// an elector that keeps the annotation as it finds it does not carry it. Such a write
// changes the renewTime (a client-go renew, also by a restarted container of the same
// identity, keeps the acquireTime and the annotations) or the acquireTime (an
// acquisition). "" for no inc.
func boundIncarnation(acquired, renewed time.Time, inc string) string {
	if inc == "" {
		return ""
	}
	return stamp(acquired) + " " + stamp(renewed) + " " + inc
}

// stamp is t as boundIncarnation writes it.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// holderIncarnation is the incarnation of the writer of r: the one recorded with r's
// acquireTime and renewTime, "" when none was, or when the record's belongs to another
// write (another acquisition, or a renew by a writer that kept the annotation).
func holderIncarnation(r LeaseRecord) string {
	at, rest, ok := strings.Cut(r.Incarnation, " ")
	if !ok || at != stamp(r.AcquireTime) {
		return ""
	}
	renewed, inc, ok := strings.Cut(rest, " ")
	if !ok || inc == "" || renewed != stamp(r.RenewTime) {
		return ""
	}
	return inc
}

// deathState is the campaign's watch of the holder's incarnation (Config.DeathWatch).
type deathState struct {
	incarnation string             // the incarnation watched, "" while none is
	proven      <-chan struct{}    // closed on proof; nil once taken, or while none is watched
	stop        context.CancelFunc // ends the watch, nil while none is watched
	dead        bool               // incarnation is proven over
	// version is the resourceVersion of the state observed when the proof arrived: a
	// dead process cannot write, so only that state may be taken on the proof.
	version string
}

// followDeath watches the incarnation of the observed holder, if there is one to watch:
// a Baton holder that recorded an incarnation other than ours. It is called after every
// observation; a change of incarnation ends the old watch and forgets its proof.
func (c *campaign) followDeath() {
	want := ""
	r := c.lease.record
	if inc := holderIncarnation(r); c.e.config.DeathWatch != nil && c.lease.exists() && heldByBaton(r) && inc != c.e.config.Incarnation {
		want = inc
	}
	if want == c.death.incarnation {
		return
	}
	c.stopDeath()
	if want == "" {
		return
	}
	ctx, cancel := context.WithCancel(c.ctx)
	c.death = deathState{incarnation: want, proven: c.e.config.DeathWatch.Dead(ctx, want), stop: cancel}
}

// stopDeath ends the watch of the holder's incarnation.
func (c *campaign) stopDeath() {
	if c.death.stop != nil {
		c.death.stop()
	}
	c.death = deathState{}
}

// deathProven takes in the proof that the watched incarnation is over. It logs
// whether the proof lets this follower take the lease at once (holderDead, or with
// Config.Liveness holderDeadListed): otherwise a state first seen on a look (at
// start, or on a list after the watch broke) is waited out all the same, for up to
// a lease from that look.
func (c *campaign) deathProven() {
	c.death.proven, c.death.dead = nil, true
	c.death.version = c.lease.record.ResourceVersion
	if c.holderDead(c.lease.record) || c.holderDeadListed(c.lease.record) {
		c.e.logger.Info("lease holder proven dead: its lease is not waited out",
			"holder", c.lease.record.HolderIdentity, "incarnation", c.death.incarnation)
	} else {
		// The holder wrote nothing this elector saw in a watch event since its look:
		// the state may be a restored copy that hides a later, live holder.
		c.e.logger.Info("lease holder proven dead, but its state was first seen on a list, not in a watch event: its lease is waited out",
			"holder", c.lease.record.HolderIdentity, "incarnation", c.death.incarnation,
			"since", c.lease.since, "waitingUntil", c.lease.since.Add(c.expiryWait(c.lease.record)))
	}
	if f := c.e.callbacks.OnHolderDead; f != nil && c.lease.exists() && c.lease.record.HolderIdentity != "" {
		f(c.lease.record.HolderIdentity)
	}
}

// holderDead reports whether the holder of r, the observed state, is proven over: its
// incarnation (bound to r's acquireTime and renewTime, so r is that incarnation's own
// write) is the one proven, it is a Baton holder, r is the state observed when the
// proof arrived (a state written after it is not the dead process's: the proof moves
// only a Lease not seen written again since), and r is not a first look that may be a
// restored copy of an old state, nor a state first seen on a list (after an etcd
// restore, a list can show the dead holder's state back while the acquisitions after
// it, by a holder that may still lead, are gone; a watch sees the restore only as a
// break). The acquiring write is then a compare-and-swap on r.
func (c *campaign) holderDead(r LeaseRecord) bool {
	inc := holderIncarnation(r)
	return c.death.dead && inc != "" && inc == c.death.incarnation && r.ResourceVersion == c.death.version &&
		c.lease.exists() && heldByBaton(r) && c.lease.vouch == evented
}
