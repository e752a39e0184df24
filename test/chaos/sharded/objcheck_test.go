package sharded

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Kinds of violation of the objects.
const (
	vReconcileOutside = "reconcile outside its replica's term of the owner's shard"
	vChildElsewhere   = "child's event reached a replica not leading its owner's shard"
	vLabel            = "object not labelled with its shard after the bound"
	vLabelWrites      = "more than one label write per object after the faults stopped"
	vCache            = "object not cached by exactly its shard's owner after the bound"
)

// wantShard is the shard an object must carry, by the label cache's contract, written
// apart from the model's shardOfMeta: an owner's UID's; a child's controller owner's
// (the reference with Controller true) when that is an Owner; ok false otherwise.
func wantShard(f finalObject) (int, bool) {
	if !f.child {
		return ring12.ShardOf(string(f.meta.UID)), true
	}
	for _, ref := range f.meta.OwnerReferences {
		if ref.Controller != nil && *ref.Controller {
			if ref.Kind != ownerKind || ref.APIVersion != "v1" {
				return 0, false
			}
			return ring12.ShardOf(string(ref.UID)), true
		}
	}
	return 0, false
}

// covered reports whether a term of shard by who with number term covers at.
func covered(spans []span, who string, shard int, term uint64, at, far time.Time) bool {
	return slices.ContainsFunc(spans, func(s span) bool {
		return s.who == who && s.shard == shard && s.term == term && !at.Before(s.start) && at.Before(s.endOr(far))
	})
}

// checkObjects checks the objects of a history: every reconcile under a live term of
// the owner's shard on its replica (the term recorded by the shard work, not by the
// controller), every child's event that became a request likewise for its controller
// owner's shard; at checkAt every object labelled with its shard (a child with its
// controller owner's; a child without an Owner for controller with no label of the
// ring), each in the cache of exactly the replica owning its shard then (none for a
// child no shard caches); after the heal at most one label write that changed an
// object, per object, and none after checkAt.
func checkObjects(o outcome, r *result) {
	far := o.stableUntil.Add(time.Hour)
	// A run's terms are recorded under its replica's id.
	for _, rc := range o.objs.recons {
		if rc.shard != ring12.ShardOf(string(rc.owner)) || !covered(o.spans, replicaOf(rc.who), rc.shard, rc.term, rc.at, far) {
			r.fail(vReconcileOutside, "%s reconciled owner %s (shard %d) under term %d of shard %d at %v",
				rc.who, rc.owner, ring12.ShardOf(string(rc.owner)), rc.term, rc.shard, o.rel(rc.at))
		}
	}
	for _, d := range o.objs.deliveries {
		c := o.objs.all[d.child]
		own, ok := wantShard(c)
		if !ok || own != d.ownerOf || !covered(o.spans, replicaOf(d.who), d.ownerOf, d.term, d.at, far) {
			r.fail(vChildElsewhere, "child %s (owner's shard %d, ok %v) enqueued its owner on %s under term %d of shard %d at %v",
				d.child, own, ok, d.who, d.term, d.ownerOf, o.rel(d.at))
		}
	}
	checkFinalObjects(o, r)
	checkLabelWrites(o, r)
}

// checkFinalObjects checks the labels and the caches at checkAt.
func checkFinalObjects(o outcome, r *result) {
	owner := map[int]string{}
	for _, s := range o.spans {
		if !s.start.After(o.checkAt) && s.endOr(o.stableUntil.Add(time.Hour)).After(o.checkAt) {
			owner[s.shard] = s.who
		}
	}
	holders := map[types.UID][]string{}
	for run, uids := range o.objs.caches {
		for _, uid := range uids {
			holders[uid] = append(holders[uid], replicaOf(run))
		}
	}
	for _, f := range o.objs.final {
		shard, ok := wantShard(f)
		v, has := f.labels[labelKey]
		switch {
		case ok && v != strconv.Itoa(shard):
			r.fail(vLabel, "%s of shard %d labelled %q (present %v) at %v", f.uid, shard, v, has, o.rel(o.checkAt))
		case !ok && has:
			r.fail(vLabel, "%s, cached by no shard, labelled %q at %v", f.uid, v, o.rel(o.checkAt))
		}
		want := []string(nil)
		if who, owned := owner[shard]; ok && owned {
			want = []string{who}
		}
		got := slices.Sorted(slices.Values(holders[f.uid]))
		if ok && want == nil {
			continue // a shard without owner: vUnowned says so
		}
		if !slices.Equal(got, want) {
			r.fail(vCache, "%s (shard %d, sharded %v) cached by %v at %v, want %v", f.uid, shard, ok, got, o.rel(o.checkAt), want)
		}
	}
}

// checkLabelWrites checks that each object's label was written (a write that changed
// it) at most once by a write sent after the heal, and by none landing after checkAt.
// Writes sent before the heal are the faults' doing even when they land after it: a
// slow write still under way when a fault changed the object's labels lands, and so
// does the write that mends them (seed 2222).
func checkLabelWrites(o outcome, r *result) {
	after := map[types.UID]int{}
	for _, w := range o.objs.writes {
		if w.changed && w.at.After(o.checkAt) {
			r.fail(vLabelWrites, "%s's label written by %s at %v, after the bound", w.obj, w.who, o.rel(w.at))
		}
		if !w.changed || !w.sent.After(o.heal) {
			continue
		}
		after[w.obj]++
		if after[w.obj] == 2 {
			r.fail(vLabelWrites, "%s's label written twice by writes sent after the heal (the second by %s, sent at %v)", w.obj, w.who, o.rel(w.sent))
		}
	}
}

// objFingerprint renders the objects' schedule, reconciles, child deliveries and
// label writes, in a fixed order, for the fingerprint.
func (h *history) objFingerprint(rel func(time.Time) string) string {
	var b strings.Builder
	for _, l := range h.objLog {
		fmt.Fprintf(&b, "objects %s\n", l)
	}
	for _, rc := range h.objs.recons {
		fmt.Fprintf(&b, "reconcile %s %s shard %d term %d at %s\n", rc.who, rc.owner, rc.shard, rc.term, rel(rc.at))
	}
	for _, d := range h.objs.deliveries {
		fmt.Fprintf(&b, "child %s to %s shard %d term %d at %s\n", d.child, d.who, d.ownerOf, d.term, rel(d.at))
	}
	for _, w := range h.objs.writes {
		fmt.Fprintf(&b, "label %s=%s by %s sent %s at %s changed %v\n", w.obj, w.value, w.who, rel(w.sent), rel(w.at), w.changed)
	}
	for _, k := range slices.Sorted(maps.Keys(h.objs.stats)) {
		fmt.Fprintf(&b, "objects %s %d\n", k, h.objs.stats[k])
	}
	return b.String()
}

// addObjects adds a history's object counters to the summary; s.mu is held.
func (s *summary) addObjects(h *history) {
	for k, n := range h.objs.stats {
		s.objStats[k] += n
	}
	s.objStats["reconciles"] += len(h.objs.recons)
	s.objStats["child events enqueuing their owner"] += len(h.objs.deliveries)
	for _, w := range h.objs.writes {
		if w.changed {
			s.objStats["label writes"]++
			if w.sent.Before(w.at) {
				s.objStats["label writes landing after they were sent (paused or slow)"]++
			}
		}
	}
}
