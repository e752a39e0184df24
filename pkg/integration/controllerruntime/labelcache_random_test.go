package controllerruntime

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/batontest"
)

// labelCacheSeeds are the histories TestShardedLabelCacheRandomized runs in CI.
// BATON_SEED=<n> replays one; BATON_LABELCACHE_FRESH=<n> runs n fresh ones.
var labelCacheSeeds = []uint64{1}

// TestShardedLabelCacheRandomized runs, for a seeded random history, replicas of a
// sharded controller with CacheByLabel (For ConfigMaps, Owns Secrets) while pairs are
// created and deleted, labels are set to a wrong shard or removed by hand, replicas
// stop and new ones join, with no pause between the steps. The checkers: no request
// reaches the Reconciler of a replica that does not lead the object's shard in that
// term, and no shard is reconciled by two replicas at once (the ledger); no Reader
// hands a reconcile a child of another owner; and once the history ends, every pair
// carries its shard's label, each live replica caches exactly its shards' objects and
// reconciled each of them, and each object was written at most once more than twice
// its hand edits (each edit, and the label written back).
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
	edits := map[types.UID]int{}
	const steps = 30
	for step := range steps {
		switch op := rng.IntN(10); {
		case op < 4 || len(run.owners) == 0:
			run.create(1)
		case op < 5:
			run.deletePair(rng.IntN(len(run.owners)))
		case op < 8:
			obj := run.anyObject(rng)
			edits[obj.GetUID()]++
			value := "" // removed
			if op == 6 {
				value = strconv.Itoa((run.ring.ShardOf(string(run.shardUID(obj))) + 1 + rng.IntN(run.ring.Shards()-1)) % run.ring.Shards())
			}
			run.setLabel(obj, value)
		case len(live) > 1 && (op == 8 || len(live) == 3):
			k := rng.IntN(len(live))
			run.nodes[live[k]].stop(t)
			live = append(live[:k], live[k+1:]...)
		default:
			i := run.addReplica()
			run.nodes[i].start(t)
			live = append(live, i)
		}
		t.Logf("step %d: %d pairs, live replicas %v", step, len(run.owners), live)
	}
	handles := make([]*Sharded, len(live))
	for k, i := range live {
		handles[k] = run.handles[i]
	}
	batontest.WaitFor(t, 60*time.Second, fmt.Sprintf("settled after the history (seed %d)", seed), func() bool {
		return run.settled(handles, nil)
	})
	run.checkLabels()
	w := run.writes.snapshot()
	for i, cm := range run.owners {
		for _, o := range []client.Object{cm, run.children[i]} {
			if got, limit := w[o.GetUID()], 1+2*edits[o.GetUID()]; got > limit {
				t.Errorf("seed %d: %T %s written %d times with %d hand edits, want at most %d", seed, o, o.GetName(), got, edits[o.GetUID()], limit)
			}
		}
	}
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

// shardUID returns the UID that decides obj's shard: its own, or its owner's.
func (r *labelRun) shardUID(obj client.Object) types.UID {
	if sec, ok := obj.(*corev1.Secret); ok {
		return sec.OwnerReferences[0].UID
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
