package controllerruntime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/batontest"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// labelCacheSeeds are the histories TestShardedLabelCacheRandomized runs in CI (2 and 4
// leave orphans and Secrets without a controller owner; about 13s in all).
// BATON_SEED=<n> replays one; BATON_LABELCACHE_FRESH=<n> runs n fresh ones.
var labelCacheSeeds = []uint64{1, 2, 4}

// TestShardedLabelCacheRandomized runs, for a seeded random history, replicas of a
// sharded controller with CacheByLabel (For ConfigMaps, Owns Secrets) while pairs are
// created (some children also carrying a reference, not the controller's, to another
// owner) and deleted, owners are deleted with their children left (orphans, whose
// controller reference names a UID gone: no garbage collector runs here), Secrets
// that no shard caches are created (only a reference that is not the controller's),
// labels are set to a wrong shard, removed, or replaced by the label of another ring
// shape by hand, replicas stop and new ones join, with no pause between the steps
// (so label writes race the moves). The checkers: no request reaches the Reconciler
// of a replica that does not lead the object's shard in that term, and no shard is
// reconciled by two replicas at once (the ledger); no Reader hands a reconcile a child
// of another owner; and once the history ends, every pair and orphan carries its
// shard's label (an orphan its gone owner's) and no other shape's, no Secret without a
// controller owner is labelled, each live replica caches exactly its shards' objects
// (orphans too, those Secrets not) and reconciled each owner, and each object was
// written at most once more than twice its hand edits (each edit, and the label
// written back), a Secret without a controller owner never. (test/chaos/sharded
// models these faults over many more histories, with the ring's own faults, on the
// library's ring and label key but a model of this package's rules.)
func TestShardedLabelCacheRandomized(t *testing.T) {
	seeds := testseed.Seeds(t, labelCacheSeeds...)
	if v := os.Getenv("BATON_LABELCACHE_FRESH"); v != "" && os.Getenv(testseed.Env) == "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BATON_LABELCACHE_FRESH=%q: want a number of histories, at least 1", v)
		}
		seeds = seeds[:0]
		for range n {
			seeds = append(seeds, rand.Uint64())
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { labelCacheHistory(t, seed) })
	}
}

func labelCacheHistory(t *testing.T, seed uint64) {
	t.Logf("seed %d (replay with BATON_SEED=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	run := newLabelRun(t, 3, 8)
	live := []int{0, 1, 2}
	for _, i := range live {
		run.nodes[i].start(t)
	}
	h := &labelHistory{run: run, rng: rng, edits: map[types.UID]int{}}
	const steps = 30
	for step := range steps {
		switch op := rng.IntN(14); {
		case op < 4 || len(run.owners) == 0:
			run.create(1)
			if op == 3 {
				h.extraRef()
			}
		case op < 5:
			run.deletePair(rng.IntN(len(run.owners)))
		case op < 8 || op == 12:
			h.labelFault(op)
		case op == 10:
			h.orphan()
		case op == 11:
			h.loose()
		case len(live) > 1 && (op == 8 || len(live) == 3):
			k := rng.IntN(len(live))
			run.nodes[live[k]].stop(t)
			live = append(live[:k], live[k+1:]...)
		default:
			i := run.addReplica()
			run.nodes[i].start(t)
			live = append(live, i)
		}
		t.Logf("step %d: %d pairs, %d orphans, %d loose, live replicas %v", step, len(run.owners), len(h.orphans), len(h.loosed), live)
	}
	handles := make([]*Sharded, len(live))
	for k, i := range live {
		handles[k] = run.handles[i]
	}
	batontest.WaitFor(t, 60*time.Second, fmt.Sprintf("settled after the history (seed %d)", seed), func() bool {
		return run.settled(handles, nil)
	})
	run.checkLabels()
	h.check(seed)
	run.ledger.check(t)
}

// deletePair deletes the i-th pair of the run (both: the API server has no garbage
// collector here).
func (r *labelRun) deletePair(i int) {
	for _, o := range []client.Object{r.owners[i], r.children[i]} {
		if err := r.direct.Delete(context.Background(), o); err != nil {
			r.t.Fatal(err)
		}
	}
	r.owners = append(r.owners[:i], r.owners[i+1:]...)
	r.children = append(r.children[:i], r.children[i+1:]...)
}

// anyObject returns one ConfigMap or Secret of the run's pairs.
func (r *labelRun) anyObject(rng *rand.Rand) client.Object {
	i := rng.IntN(len(r.owners))
	if rng.IntN(2) == 0 {
		return r.owners[i]
	}
	return r.children[i]
}

// shardUID returns the UID that decides obj's shard: its own, or its controller
// owner's.
func (r *labelRun) shardUID(obj client.Object) types.UID {
	if sec, ok := obj.(*corev1.Secret); ok {
		return metav1.GetControllerOf(sec).UID
	}
	return obj.GetUID()
}

// setLabel sets obj's shard label to value by hand, or removes it ("").
func (r *labelRun) setLabel(obj client.Object, value string) {
	v := "null"
	if value != "" {
		v = strconv.Quote(value)
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, r.key, v))
	if err := r.direct.Patch(context.Background(), obj.DeepCopyObject().(client.Object), patch); err != nil {
		r.t.Fatal(err)
	}
}

// labelHistory is the state of one history of TestShardedLabelCacheRandomized beyond
// its run's pairs.
type labelHistory struct {
	run     *labelRun
	rng     *rand.Rand
	edits   map[types.UID]int // hand edits of each object
	orphans []*corev1.Secret  // children whose controller owner was deleted
	loosed  []*corev1.Secret  // Secrets without a controller owner
	made    int
}

// extraRef gives the last pair's Secret a reference, not the controller's, to another
// ConfigMap of the run, first in its list.
func (h *labelHistory) extraRef() {
	r := h.run
	if len(r.owners) < 2 {
		return
	}
	other, sec := r.owners[h.rng.IntN(len(r.owners)-1)], r.children[len(r.children)-1]
	orig := sec.DeepCopy()
	sec.OwnerReferences = append([]metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: other.Name, UID: other.UID}}, sec.OwnerReferences...)
	if err := r.direct.Patch(context.Background(), sec, client.MergeFrom(orig)); err != nil {
		r.t.Fatal(err)
	}
	h.edits[sec.UID]++ // a write of the Secret, not of its label
}

// orphan deletes a pair's ConfigMap alone: its Secret stays, in the gone owner's shard.
func (h *labelHistory) orphan() {
	r := h.run
	i := h.rng.IntN(len(r.owners))
	if err := r.direct.Delete(context.Background(), r.owners[i]); err != nil {
		r.t.Fatal(err)
	}
	h.orphans = append(h.orphans, r.children[i])
	r.owners = append(r.owners[:i], r.owners[i+1:]...)
	r.children = append(r.children[:i], r.children[i+1:]...)
}

// loose creates a Secret with a reference, not the controller's, to a ConfigMap of the
// run: no shard caches it.
func (h *labelHistory) loose() {
	r := h.run
	cm := r.owners[h.rng.IntN(len(r.owners))]
	h.made++
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: fmt.Sprint("loose-", h.made),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}}}
	if err := r.direct.Create(context.Background(), sec); err != nil {
		r.t.Fatal(err)
	}
	h.loosed = append(h.loosed, sec)
}

// staleKey is the label of the run's ring at another shape (twice the Shards).
func (h *labelHistory) staleKey() string {
	other, _ := sharding.NewRing(2 * h.run.ring.Shards())
	return ShardLabelKey(h.run.ns, other)
}

// labelFault edits the label of a pair's object or an orphan by hand: removes it (op
// 5), sets a wrong shard (6), sets a wrong shard on an orphan (7), or replaces it by
// the label of another ring shape (12).
func (h *labelHistory) labelFault(op int) {
	r := h.run
	obj := r.anyObject(h.rng)
	if op == 7 && len(h.orphans) > 0 {
		obj = h.orphans[h.rng.IntN(len(h.orphans))]
	}
	h.edits[obj.GetUID()]++
	switch op {
	case 5:
		r.setLabel(obj, "")
	case 12:
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:null,%q:"1"}}}`, r.key, h.staleKey()))
		if err := r.direct.Patch(context.Background(), obj.DeepCopyObject().(client.Object), patch); err != nil {
			r.t.Fatal(err)
		}
	default:
		r.setLabel(obj, strconv.Itoa((r.ring.ShardOf(string(r.shardUID(obj)))+1+h.rng.IntN(r.ring.Shards()-1))%r.ring.Shards()))
	}
}

// check checks, once settled, the orphans' and loose Secrets' labels, that no object
// carries the other shape's label, and the writes of every object.
func (h *labelHistory) check(seed uint64) {
	r, t := h.run, h.run.t
	stale := h.staleKey()
	var all []client.Object
	for i, cm := range r.owners {
		all = append(all, cm, r.children[i])
	}
	for _, sec := range append(slices.Clone(h.orphans), h.loosed...) {
		all = append(all, sec)
	}
	for _, o := range all {
		got := o.DeepCopyObject().(client.Object)
		if err := r.direct.Get(context.Background(), client.ObjectKeyFromObject(o), got); err != nil {
			t.Fatal(err)
		}
		want, sharded := "", true
		if sec, ok := got.(*corev1.Secret); ok && metav1.GetControllerOf(sec) == nil {
			sharded = false
		} else {
			want = strconv.Itoa(r.ring.ShardOf(string(r.shardUID(got))))
		}
		if v, ok := got.GetLabels()[r.key]; ok != sharded || v != want {
			t.Errorf("seed %d: %T %s labelled %q (present %v), want %q (sharded %v)", seed, o, o.GetName(), v, ok, want, sharded)
		}
		if v, ok := got.GetLabels()[stale]; ok {
			t.Errorf("seed %d: %T %s still carries the other shape's label %s=%s", seed, o, o.GetName(), stale, v)
		}
	}
	w := r.writes.snapshot()
	for _, o := range all {
		limit := 1 + 2*h.edits[o.GetUID()]
		if sec, ok := o.(*corev1.Secret); ok && metav1.GetControllerOf(sec) == nil {
			limit = 0
		}
		if got := w[o.GetUID()]; got > limit {
			t.Errorf("seed %d: %T %s written %d times with %d hand edits, want at most %d", seed, o, o.GetName(), got, h.edits[o.GetUID()], limit)
		}
	}
}
