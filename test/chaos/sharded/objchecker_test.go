package sharded

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// uidOf returns a UID of shard of the ring of 12, the n-th found.
func uidOf(shard, n int) types.UID {
	for i := 0; ; i++ {
		uid := types.UID(fmt.Sprintf("t%d-%d", shard, i))
		if ring12.ShardOf(string(uid)) == shard {
			if n == 0 {
				return uid
			}
			n--
		}
	}
}

// TestCheckerFindsObjectViolations feeds the objects' checker hand-made histories of
// a settled ring of 12 shards (a leads the even shards under terms 10 to 21, b the odd
// ones, from 40s; the faults stop at 45s, the bound is 52s), each with one known
// fault, and a clean one: it must name exactly the broken properties.
func TestCheckerFindsObjectViolations(t *testing.T) {
	spans, clean, cases := objectCases()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			objs := clean
			objs.caches = maps.Clone(clean.caches)
			objs.recons, objs.deliveries, objs.writes = slices.Clone(clean.recons), slices.Clone(clean.deliveries), slices.Clone(clean.writes)
			tt.edit(&objs)
			r := check(outcome{shards: 12, spans: spans, begin: t0, heal: at(45), checkAt: at(52), stableUntil: at(60),
				live: []string{"a", "b"}, objs: objs})
			var got []string
			for _, v := range r.violations {
				if !slices.Contains(got, v.kind) {
					got = append(got, v.kind)
				}
			}
			if want := slices.Sorted(slices.Values(tt.want)); !slices.Equal(got, want) {
				t.Errorf("violations %v, want %v (%v)", got, want, r.violations)
			}
		})
	}
}

// objectCase is a hand-made fault of the objects and the violations it must give.
type objectCase struct {
	name string
	edit func(o *objOutcome)
	want []string
}

// objectCases returns the terms, the clean objects and the cases of
// TestCheckerFindsObjectViolations.
func objectCases() ([]span, objOutcome, []objectCase) {
	spans := settledRing()
	owner, other := uidOf(0, 0), uidOf(1, 0)
	child, loose := uidOf(5, 0), uidOf(6, 0) // their own UIDs' shards are not their owners'
	metas := map[types.UID]finalObject{
		owner: {uid: owner, meta: metav1.ObjectMeta{UID: owner}},
		other: {uid: other, meta: metav1.ObjectMeta{UID: other}},
		// the child: a reference to other (not the controller's), its controller owner
		child: {uid: child, child: true, meta: metav1.ObjectMeta{UID: child, OwnerReferences: []metav1.OwnerReference{
			ownerRef(other, false), ownerRef(owner, true)}}},
		loose: {uid: loose, child: true, meta: metav1.ObjectMeta{UID: loose, OwnerReferences: []metav1.OwnerReference{ownerRef(owner, false)}}},
	}
	final := func(labels map[types.UID]string) []finalObject {
		var out []finalObject
		for _, uid := range []types.UID{owner, other, child, loose} {
			f := metas[uid]
			f.labels = map[string]string{staleKey: "3"}
			if v, ok := labels[uid]; ok {
				f.labels[labelKey] = v
			}
			out = append(out, f)
		}
		return out
	}
	good := map[types.UID]string{owner: "0", other: "1", child: "0"}
	clean := objOutcome{
		all: metas, final: final(good),
		caches:     map[string][]types.UID{"a": {owner, child}, "b": {other}, "b/2": nil},
		recons:     []recon{{who: "a", owner: owner, shard: 0, term: 10, at: at(41)}, {who: "b/2", owner: other, shard: 1, term: 11, at: at(50)}},
		deliveries: []delivery{{who: "a", child: child, ownerOf: 0, term: 10, at: at(41)}},
		writes: []labelWrite{{obj: owner, who: "a", sent: at(41), at: at(41), changed: true}, {obj: owner, who: "b", sent: at(42), at: at(42), changed: true},
			{obj: child, who: "a", sent: at(46), at: at(46), changed: true}, {obj: child, who: "b", sent: at(47), at: at(47), changed: false}},
	}
	return spans, clean, []objectCase{
		{"clean", func(*objOutcome) {}, nil},
		{"reconcile on a replica not leading the owner's shard", func(o *objOutcome) {
			o.recons = append(o.recons, recon{who: "b", owner: owner, shard: 0, term: 11, at: at(41)})
		}, []string{vReconcileOutside}},
		{"reconcile before the term", func(o *objOutcome) {
			o.recons = append(o.recons, recon{who: "a", owner: owner, shard: 0, term: 10, at: at(39)})
		}, []string{vReconcileOutside}},
		{"reconcile under the shard of another object", func(o *objOutcome) {
			o.recons = append(o.recons, recon{who: "b", owner: owner, shard: 1, term: 11, at: at(41)})
		}, []string{vReconcileOutside}},
		{"child enqueues its owner on the replica of another shard", func(o *objOutcome) {
			o.deliveries = append(o.deliveries, delivery{who: "b", child: child, ownerOf: 1, term: 11, at: at(41)})
		}, []string{vChildElsewhere}},
		{"child's owner enqueued by its non-controller reference", func(o *objOutcome) {
			o.deliveries = append(o.deliveries, delivery{who: "b", child: loose, ownerOf: 0, term: 11, at: at(41)})
		}, []string{vChildElsewhere}},
		{"label of another shard", func(o *objOutcome) {
			o.final = final(map[types.UID]string{owner: "1", other: "1", child: "0"})
		}, []string{vLabel}},
		{"child labelled with its own UID's shard", func(o *objOutcome) {
			o.final = final(map[types.UID]string{owner: "0", other: "1", child: "5"})
		}, []string{vLabel}},
		{"label missing", func(o *objOutcome) { o.final = final(map[types.UID]string{owner: "0", child: "0"}) }, []string{vLabel}},
		{"child without controller owner labelled", func(o *objOutcome) {
			l := maps.Clone(good)
			l[loose] = "0"
			o.final = final(l)
		}, []string{vLabel}},
		{"two label writes after the heal", func(o *objOutcome) {
			o.writes = append(o.writes, labelWrite{obj: child, who: "b", sent: at(48), at: at(48), changed: true})
		}, []string{vLabelWrites}},
		{"two label writes sent before the heal, landing after it", func(o *objOutcome) {
			o.writes = append(o.writes, labelWrite{obj: other, who: "b", sent: at(44), at: at(46), changed: true},
				labelWrite{obj: other, who: "b", sent: at(45), at: at(47), changed: true})
		}, nil},
		{"a write sent before the heal, then two sent after it", func(o *objOutcome) {
			o.writes = append(o.writes, labelWrite{obj: other, who: "b", sent: at(44), at: at(46), changed: true},
				labelWrite{obj: other, who: "a", sent: at(47), at: at(47), changed: true}, labelWrite{obj: other, who: "b", sent: at(48), at: at(48), changed: true})
		}, []string{vLabelWrites}},
		{"a label write after the bound", func(o *objOutcome) {
			o.writes = append(o.writes, labelWrite{obj: other, who: "b", sent: at(53), at: at(53), changed: true})
		}, []string{vLabelWrites}},
		{"cached twice", func(o *objOutcome) { o.caches["b/2"] = []types.UID{owner} }, []string{vCache}},
		{"not cached", func(o *objOutcome) { o.caches["a"] = []types.UID{owner} }, []string{vCache}},
		{"cached by the wrong replica", func(o *objOutcome) {
			o.caches["a"], o.caches["b"] = []types.UID{owner, child, other}, nil
		}, []string{vCache}},
		{"child without controller owner cached", func(o *objOutcome) {
			o.caches["a"] = []types.UID{owner, child, loose}
		}, []string{vCache}},
	}
}

// settledRing returns the terms of a ring of 12 shards settled from 40s: a leads the
// even shards, b the odd ones, shard s under term 10+s.
func settledRing() []span {
	var spans []span
	for s := range 12 {
		who := "a"
		if s%2 == 1 {
			who = "b"
		}
		spans = append(spans, span{shard: s, who: who, term: uint64(10 + s), start: at(40)})
	}
	return spans
}
