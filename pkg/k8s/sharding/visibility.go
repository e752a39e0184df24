package sharding

import (
	"slices"
	"sync"
	"time"
)

// OwnerlessBuckets are the upper bounds, in seconds, of the buckets of Ownerless: a
// planned move takes milliseconds, a crash about a LeaseDuration.
var OwnerlessBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 20, 30, 60}

// OwnerlessHistogram is a histogram of how long shards were without owner, as a
// Sharder measured them (Sharder.Ownerless).
type OwnerlessHistogram struct {
	// Buckets are the upper bounds in seconds (OwnerlessBuckets); Counts[i] the
	// number of observations at most Buckets[i] (cumulative, as Prometheus counts).
	Buckets []float64
	Counts  []uint64
	// Count and Sum are the number of observations and their sum in seconds.
	Count uint64
	Sum   float64
}

// ownerless measures how long shards were without owner, two ways:
//
//   - A shard this replica handed over: from the reply to its release to its
//     elector's first observation of the next holder (OnNewLeader), while this
//     replica still follows the shard (a replica that leaves stops following soon
//     after its last hand-over, and misses some). A hand-off, which names the next
//     holder in its one write (leaderelection.HandOffs), shows the next holder in its
//     reply: from the hand-over's start (its term ending, its work returning) to that
//     reply; the new owner's term starts on its watch's delivery, about then.
//   - A shard this replica takes because its owner in placement went (its member
//     Lease expired, or it was proven dead; not a leaver, which hands over): from when
//     this replica counted that member gone to its acquisition. A lower bound for a
//     crash: the crashed owner's term ended up to its RenewDeadline after its last
//     renew, before its member Lease expired.
//
// Safe for concurrent use.
type ownerless struct {
	// mu guards the fields below.
	mu       sync.Mutex
	released map[int]pendingMove // shards handed over, their next holder not yet seen
	goneAt   map[int]time.Time   // shards placed here because their owner went, not yet taken
	hist     OwnerlessHistogram
}

// pendingMove is a hand-over of a shard under way or done, its next holder not yet
// seen or its release's reply not yet in.
type pendingMove struct {
	begun, released, seen time.Time // released and seen zero until they happen
}

func newOwnerless() *ownerless {
	return &ownerless{released: map[int]pendingMove{}, goneAt: map[int]time.Time{},
		hist: OwnerlessHistogram{Buckets: OwnerlessBuckets, Counts: make([]uint64, len(OwnerlessBuckets))}}
}

// observeLocked adds one observation of d.
func (o *ownerless) observeLocked(d time.Duration) {
	sec := d.Seconds()
	for i, b := range o.hist.Buckets {
		if sec <= b {
			o.hist.Counts[i]++
		}
	}
	o.hist.Count++
	o.hist.Sum += sec
}

// handingOver notes the start of shard's hand-over, at now.
func (o *ownerless) handingOver(shard int, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released[shard] = pendingMove{begun: now}
}

// handedOver notes the reply to shard's release at now (ok), or that the hand-over
// failed. A next holder seen before the reply ends the window there (it began, at the
// latest, with the hand-over).
func (o *ownerless) handedOver(shard int, now time.Time, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m, pending := o.released[shard]
	switch {
	case !pending:
	case !ok:
		delete(o.released, shard)
	case !m.seen.IsZero():
		delete(o.released, shard)
		o.observeLocked(m.seen.Sub(m.begun))
	default:
		m.released = now
		o.released[shard] = m
	}
}

// newHolder takes an observation of shard's holder at now: the end of a hand-over's
// window, whoever took it. A release older than staleAfter is dropped unobserved.
func (o *ownerless) newHolder(shard int, now time.Time, staleAfter time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m, ok := o.released[shard]
	switch {
	case !ok:
	case m.released.IsZero():
		m.seen = now // before the release's reply: handedOver observes it
		o.released[shard] = m
	default:
		delete(o.released, shard)
		if d := now.Sub(m.released); d <= staleAfter {
			o.observeLocked(d)
		}
	}
}

// placed notes the shards placement now gives this replica and which of them it
// took over from a member that went, at now; it forgets those no longer placed here.
func (o *ownerless) placed(now time.Time, mine map[int]bool, fromGone []int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for shard := range o.goneAt {
		if !mine[shard] {
			delete(o.goneAt, shard)
		}
	}
	for _, shard := range fromGone {
		if _, ok := o.goneAt[shard]; !ok {
			o.goneAt[shard] = now
		}
	}
}

// acquired takes this replica's acquisition of shard at now.
func (o *ownerless) acquired(shard int, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if at, ok := o.goneAt[shard]; ok {
		delete(o.goneAt, shard)
		o.observeLocked(now.Sub(at))
	}
}

// snapshot returns a copy of the histogram.
func (o *ownerless) snapshot() OwnerlessHistogram {
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.hist
	h.Buckets, h.Counts = slices.Clone(h.Buckets), slices.Clone(h.Counts)
	return h
}

// Ownerless returns the histogram of how long shards were without owner, as this
// replica measured them: the shards it handed over (from its release to the next
// holder's take, as its elector saw it) and those it took because their owner went
// (from when it counted the owner gone to its take; a lower bound for a crash). Each
// move is measured once, by one replica; sum the replicas' for the ring.
func (s *Sharder) Ownerless() OwnerlessHistogram { return s.ownerless.snapshot() }
