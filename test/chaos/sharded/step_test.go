package sharded

import (
	"maps"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// isPaused reports whether the node is paused.
func (n *node) isPaused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// pendingWrite is a label patch a pause holds.
type pendingWrite struct {
	w     labelWrite
	patch map[string]*string
	due   time.Time // not before (a slow write); zero: at the resume
	shard int
}

// run steps the world until until: the objects' events, every controller's step
// every objTick (at a seeded offset below netLatency), and the snapshot at checkAt.
// It closes done when it returns.
func (w *world) run(events []objEvent, checkAt, until time.Time, done chan<- struct{}) {
	defer close(done)
	tick, snapped := w.begin, false
	for {
		next := tick.Add(time.Duration(1 + w.rng.Int64N(int64(netLatency)-1)))
		var ev *objEvent
		for _, list := range [][]objEvent{events, w.later} {
			if len(list) > 0 && w.begin.Add(list[0].at).Before(next) && (ev == nil || list[0].at < ev.at) {
				ev = &list[0]
			}
		}
		at := next
		if ev != nil {
			at = w.begin.Add(ev.at)
		}
		if !snapped && !checkAt.After(at) {
			time.Sleep(time.Until(checkAt))
			w.snapshot()
			snapped = true
			continue
		}
		if !at.Before(until) {
			return
		}
		time.Sleep(time.Until(at))
		switch {
		case ev == nil:
			for _, c := range w.runs() {
				w.step(c, at)
			}
			tick = tick.Add(objTick)
		case len(events) > 0 && ev == &events[0]:
			events = events[1:]
			ev.do(at)
		default:
			w.later = w.later[1:]
			ev.do(at)
		}
	}
}

// step is one step of a replica run's controller: the label patches a pause held
// are sent, the requests the last step enqueued are reconciled (so that a term may
// end between a request and its reconcile), each led shard's informer delivers what
// changed, and the labeller labels the objects of led shards without the label.
func (w *world) step(c *ctl, now time.Time) {
	if !c.n.deathTime().IsZero() {
		return // the process is dead
	}
	w.flush(c, now)
	w.reconcile(c, now)
	led, fresh := c.ledShards()
	for _, s := range fresh {
		delete(c.seen, s) // the shard's informer starts: its first list delivers every object
	}
	for s := range c.seen {
		if !slices.Contains(led, s) {
			delete(c.seen, s)
		}
	}
	for _, s := range led {
		w.informer(c, s, now)
	}
	w.labeller(c, fresh, now)
}

// reconcile admits each queued request whose owner's shard has a live term here (the
// library's begin) and records it with that term; it drops the others.
func (w *world) reconcile(c *ctl, now time.Time) {
	for _, owner := range c.queue {
		shard := ring12.ShardOf(string(owner))
		term, ok := c.leads(shard)
		if !ok {
			w.out.stats["requests dropped"]++
			continue
		}
		w.out.recons = append(w.out.recons, recon{who: c.run, owner: owner, shard: shard, term: term, at: now})
	}
	c.queue = c.queue[:0]
}

// informer is the informer of led shard s's objects (those labelled s): it delivers
// the objects added or changed since it last looked, and those gone or relabelled
// away (as deleted).
func (w *world) informer(c *ctl, s int, now time.Time) {
	seen := c.seen[s]
	if seen == nil {
		seen = map[types.UID]int{}
		c.seen[s] = seen
	}
	value := strconv.Itoa(s)
	for _, uid := range w.order {
		o := w.objs[uid]
		if o == nil || o.meta.Labels[labelKey] != value {
			continue
		}
		if v, ok := seen[uid]; ok && v == o.version {
			continue
		}
		seen[uid] = o.version
		if own, ok := shardOfMeta(&o.meta, o.child); ok && own != s {
			// A stray label (written by hand): relabelled, not enqueued here.
			w.out.stats["strays relabelled"]++
			w.send(c, o, own, now)
			continue
		}
		w.deliver(c, o.meta.UID, o.child, &o.meta, now)
	}
	for _, uid := range slices.Sorted(maps.Keys(seen)) {
		if o := w.objs[uid]; o == nil || o.meta.Labels[labelKey] != value {
			delete(seen, uid)
			m := w.out.all[uid].meta
			w.deliver(c, uid, w.out.all[uid].child, &m, now)
		}
	}
}

// deliver turns an event of a shard informer into a request: an owner's own, a
// child's controller owner's when that owner's shard is led here.
func (w *world) deliver(c *ctl, uid types.UID, child bool, m *metav1.ObjectMeta, now time.Time) {
	if !child {
		c.enqueue(uid)
		return
	}
	ref := metav1.GetControllerOf(m)
	if ref == nil || ref.Kind != ownerKind || ref.APIVersion != "v1" {
		return
	}
	shard := ring12.ShardOf(string(ref.UID))
	term, ok := c.leads(shard)
	if !ok {
		return
	}
	c.enqueue(ref.UID)
	w.out.deliveries = append(w.out.deliveries, delivery{who: c.run, child: uid, ownerOf: shard, term: term, at: now})
}

// labeller is the informer of the objects without the ring's label, on every
// replica: it labels those of the shards led here on sight, again when they change,
// at every resync, and the backlog of a shard just acquired.
func (w *world) labeller(c *ctl, fresh []int, now time.Time) {
	if !now.Before(c.resync) {
		c.resync = now.Add(labelResync)
		clear(c.tried)
		w.resyncStrays(c)
	}
	for _, uid := range w.order {
		o := w.objs[uid]
		if o == nil || labelled(o) {
			continue
		}
		own, ok := shardOfMeta(&o.meta, o.child)
		if !ok {
			continue
		}
		if _, led := c.leads(own); !led {
			continue
		}
		if v, ok := c.tried[uid]; ok && v == o.version && !slices.Contains(fresh, own) {
			continue
		}
		c.tried[uid] = o.version
		w.send(c, o, own, now)
	}
}

// resyncStrays is the resync of the led shards' informers (the labeller's period):
// each stray they hold is delivered again at the next step, so that a relabel that
// failed is tried again; the other objects' resyncs enqueue nothing.
func (w *world) resyncStrays(c *ctl) {
	for s, seen := range c.seen {
		for uid := range seen {
			if o := w.objs[uid]; o != nil {
				if own, ok := shardOfMeta(&o.meta, o.child); ok && own != s {
					delete(seen, uid)
				}
			}
		}
	}
}

// send sends the label patch of o for shard: failed while the node is cut off or
// crashed, refused in a refusal window, held while paused, applied otherwise.
func (w *world) send(c *ctl, o *object, shard int, now time.Time) {
	patch := patchFor(o.meta.Labels, shard)
	if len(patch) == 0 {
		return
	}
	lw := labelWrite{obj: o.meta.UID, who: c.run, value: strconv.Itoa(shard), sent: now}
	switch id := replicaOf(c.run); {
	case c.n.stopped():
		w.out.stats["label writes failed"]++
	case now.Before(w.refused[id]):
		w.out.stats["label writes refused"]++
	case c.n.isPaused():
		w.out.stats["label writes held by a pause"]++
		c.pending = append(c.pending, pendingWrite{w: lw, patch: patch, shard: shard})
	case now.Before(w.slow[id]):
		w.out.stats["label writes slowed"]++
		d := 200*time.Millisecond + time.Duration(w.rng.Int64N(int64(1800*time.Millisecond)))
		c.pending = append(c.pending, pendingWrite{w: lw, patch: patch, shard: shard, due: now.Add(d)})
	default:
		w.apply(c, lw, patch, shard, now)
	}
}

// flush sends the patches a pause held, once the node resumed, and the slow ones
// due.
func (w *world) flush(c *ctl, now time.Time) {
	if c.n.isPaused() || len(c.pending) == 0 {
		return
	}
	var keep []pendingWrite
	for _, p := range c.pending {
		switch {
		case now.Before(p.due):
			keep = append(keep, p)
		case c.n.stopped():
			w.out.stats["label writes failed"]++
		default:
			w.apply(c, p.w, p.patch, p.shard, now)
		}
	}
	c.pending = keep
}

// apply applies c's label patch for shard to its object, if it still exists (the
// patch names the UID), and records it: one landing after the term that sent it
// ended raced a move of the shard.
func (w *world) apply(c *ctl, lw labelWrite, patch map[string]*string, shard int, now time.Time) {
	o := w.objs[lw.obj]
	if o == nil {
		return // gone: not found
	}
	labels := maps.Clone(o.meta.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	for k, v := range patch {
		if v == nil {
			delete(labels, k)
		} else {
			labels[k] = *v
		}
	}
	lw.at, lw.changed = now, !maps.Equal(labels, o.meta.Labels)
	if _, led := c.leads(shard); !led {
		w.out.stats["label writes landing after their term"]++
	}
	if lw.changed {
		o.meta.Labels = labels
		o.version++
	}
	if now.Before(w.lossy[replicaOf(lw.who)]) {
		w.out.stats["label replies lost"]++ // the replica logs it; its resync finds the object labelled
	}
	w.out.writes = append(w.out.writes, lw)
}

// snapshot records the objects and every live run's shard caches (the objects
// labelled with a shard it leads).
func (w *world) snapshot() {
	for _, uid := range w.order {
		if o := w.objs[uid]; o != nil {
			w.out.final = append(w.out.final, finalObject{uid: uid, child: o.child, meta: *o.meta.DeepCopy(), labels: maps.Clone(o.meta.Labels)})
		}
	}
	for _, c := range w.runs() {
		led := c.ledNow()
		if !c.n.deathTime().IsZero() {
			continue
		}
		var cached []types.UID
		for _, uid := range w.order {
			if o := w.objs[uid]; o != nil && slices.ContainsFunc(led, func(s int) bool { return o.meta.Labels[labelKey] == strconv.Itoa(s) }) {
				cached = append(cached, uid)
			}
		}
		w.out.caches[c.run] = cached
	}
}
