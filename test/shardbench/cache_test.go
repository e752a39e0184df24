package shardbench

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/baton-dev/baton/pkg/batontest"
	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// cacheResult is what each replica's cache holds with CacheOwnShards.
type cacheResult struct {
	replicas int
	served   batoncr.ServerSharding
	// total is how many ConfigMaps a cache could hold: with sharding served, those of
	// the whole cluster (the shard informers watch every namespace); otherwise those
	// of the namespace the managers' caches watch.
	total int
	// cached is how many each replica's cache holds: its shard informers'
	// (Sharded.CachedObjects) where sharding is served, its manager's cache otherwise.
	cached []int
	// inShards is how many of the total are in each replica's shards: what it
	// reconciles.
	inShards []int
}

// measureCacheShare starts n sharded replicas with CacheOwnShards on w's API server,
// waits until they are balanced and their caches settled, and counts.
func measureCacheShare(tb testing.TB, p params, w *world, n int) cacheResult {
	tb.Helper()
	ctx := context.Background()
	rs := newReplicas(tb, p, w, sharded, n, newLedger(), newGate())
	defer stopAll(tb, rs)
	startBalanced(tb, p, rs)
	res := cacheResult{replicas: n, served: rs[0].sharded.ServerSharding()}
	var list corev1.ConfigMapList
	var opts []client.ListOption
	if res.served != batoncr.ShardingServed {
		opts = append(opts, client.InNamespace(w.ns))
	}
	if err := w.direct.List(ctx, &list, opts...); err != nil {
		tb.Fatal(err)
	}
	ring, err := sharding.NewRing(p.shards)
	if err != nil {
		tb.Fatal(err)
	}
	perShard := map[int]int{}
	for _, cm := range list.Items {
		perShard[ring.ShardOf(string(cm.UID))]++
	}
	res.total = len(list.Items)
	for _, r := range rs {
		want := 0
		for _, st := range r.sharded.Sharder().Owned() {
			want += perShard[st.Shard]
		}
		res.inShards = append(res.inShards, want)
		if res.served != batoncr.ShardingServed {
			want = res.total // the manager's cache holds them all
		}
		got := 0
		batontest.WaitFor(tb, 60*time.Second, fmt.Sprintf("%s's cache to hold %d ConfigMaps", r.kit.Name, want), func() bool {
			got = cachedBy(ctx, tb, r, res.served)
			return got == want
		})
		res.cached = append(res.cached, got)
	}
	return res
}

// cachedBy returns how many ConfigMaps r's cache holds.
func cachedBy(ctx context.Context, tb testing.TB, r *replica, served batoncr.ServerSharding) int {
	if served == batoncr.ShardingServed {
		return r.sharded.CachedObjects()
	}
	var list corev1.ConfigMapList
	if err := r.mgr.GetCache().List(ctx, &list); err != nil {
		tb.Fatal(err)
	}
	return len(list.Items)
}

func (res cacheResult) describe() string {
	return fmt.Sprintf("N=%d, sharded list and watch %v: caches hold %v of %d ConfigMaps; in their shards %v (1/N = %.0f)",
		res.replicas, res.served, res.cached, res.total, res.inShards, float64(res.total)/float64(res.replicas))
}
