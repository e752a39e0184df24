package shardbench

import (
	"slices"
	"strings"
	"testing"
	"time"

	batoncr "github.com/baton-dev/baton/pkg/integration/controllerruntime"
)

// TestHarnessSmall runs the benchmark's harness at a tiny size on the real API
// server: the single leader and two sharded replicas over 60 ConfigMaps, then the
// cache share of two replicas on the server without the ShardedListAndWatch gate.
// The checker finds no violation (every object's latest version reconciled, none by
// two at once, every shard term right), the timed part reconciled at least the
// backlog, each sharded replica had a share of it and the shares add up, and each
// replica's cache holds every object (no server-side sharding) while the objects of
// its shards add up to all of them.
func TestHarnessSmall(t *testing.T) {
	p := params{
		objects: 60, workers: 2, work: 2 * time.Millisecond, churn: 50, shards: 8,
		lease: 3 * time.Second, renew: 2 * time.Second, retry: 400 * time.Millisecond,
	}
	w := newWorld(t, shared.Config(), p.objects)
	for _, c := range []struct {
		kind kind
		n    int
	}{{single, 1}, {sharded, 2}} {
		res := runScale(t, p, w, c.kind, c.n)
		t.Log(res.describe())
		for _, v := range res.violations {
			t.Errorf("%s: %s", res.name(), v)
		}
		if res.reconciles < p.objects || res.rate <= 0 || res.drain <= 0 || res.window < res.drain {
			t.Errorf("%s: %d reconciles in %v (backlog drained in %v), want at least the backlog of %d", res.name(), res.reconciles, res.window, res.drain, p.objects)
		}
		sum := 0
		for _, s := range res.shares {
			sum += s
		}
		if sum != p.objects || len(res.shares) != c.n || slices.Contains(res.shares, 0) {
			t.Errorf("%s: backlog shares %v, want %d replicas sharing all %d objects", res.name(), res.shares, c.n, p.objects)
		}
	}

	res := measureCacheShare(t, p, w, 2)
	t.Log(res.describe())
	if res.served != batoncr.ShardingNotServed {
		t.Errorf("server sharding %v, want %v", res.served, batoncr.ShardingNotServed)
	}
	sum := 0
	for i := range res.cached {
		sum += res.inShards[i]
		if res.cached[i] != p.objects || res.inShards[i] == 0 {
			t.Errorf("replica %d caches %d with %d in its shards, want all %d cached and some in its shards", i, res.cached[i], res.inShards[i], p.objects)
		}
	}
	if res.total != p.objects || sum != p.objects {
		t.Errorf("%d objects, %d in the replicas' shards; want %d and all", res.total, sum, p.objects)
	}
}

// TestCheckerFindsViolations: the checker passes a clean history and names each kind
// of violation in a bad one.
func TestCheckerFindsViolations(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	iv := func(replica string, shard int, term uint64, from, to int, version uint64) interval {
		return interval{replica: replica, shard: shard, term: term, start: at(from), end: at(to), version: version, done: true}
	}
	shardOf := map[string]int{"a": 1, "b": 1, "c": 2}
	latest := map[string]uint64{"a": 10, "b": 20, "c": 30}
	clean := map[string][]interval{
		"a": {iv("r0", 1, 1, 0, 10, 5), iv("r1", 1, 2, 20, 30, 10)},
		"b": {iv("r0", 1, 1, 0, 10, 20)},
		"c": {iv("r1", 2, 1, 0, 10, 30), iv("r1", 2, 1, 10, 20, 30)},
	}
	if vs := check(clean, latest, shardOf); len(vs) != 0 {
		t.Errorf("clean history: %v", vs)
	}
	for _, tc := range []struct {
		name string
		ivs  map[string][]interval
		want string
	}{
		{"latest not reconciled", map[string][]interval{
			"a": {iv("r0", 1, 1, 0, 10, 9)}, "b": {iv("r0", 1, 1, 0, 10, 20)}, "c": {iv("r1", 2, 1, 0, 10, 30)},
		}, "a: latest version 10 not reconciled"},
		{"cut short", map[string][]interval{
			"a": {{replica: "r0", shard: 1, term: 1, start: at(0), end: at(5), version: 10}}, "b": {iv("r0", 1, 1, 0, 10, 20)}, "c": {iv("r1", 2, 1, 0, 10, 30)},
		}, "a: latest version 10 not reconciled"},
		{"object twice at once", map[string][]interval{
			"a": {iv("r0", 1, 1, 0, 10, 10), iv("r0", 1, 1, 5, 15, 10)}, "b": {iv("r0", 1, 1, 0, 10, 20)}, "c": {iv("r1", 2, 1, 0, 10, 30)},
		}, "a: reconciled at once by r0"},
		{"shard by two replicas at once", map[string][]interval{
			"a": {iv("r0", 1, 1, 0, 10, 10)}, "b": {iv("r1", 1, 2, 5, 15, 20)}, "c": {iv("r1", 2, 1, 0, 10, 30)},
		}, "shard 1 reconciled by r0"},
		{"wrong shard", map[string][]interval{
			"a": {iv("r0", 1, 1, 0, 10, 10)}, "b": {iv("r0", 1, 1, 0, 10, 20)}, "c": {iv("r1", 1, 3, 20, 30, 30)},
		}, "c (shard 2): reconciled by r1 under shard 1"},
		{"no shard term", map[string][]interval{
			"a": {iv("r0", 1, 0, 0, 10, 10)}, "b": {iv("r0", 1, 1, 20, 30, 20)}, "c": {iv("r1", 2, 1, 0, 10, 30)},
		}, "a (shard 1): reconciled by r0 under shard 1 term 0"},
		{"term seen by two", map[string][]interval{
			"a": {iv("r0", 1, 1, 0, 10, 10)}, "b": {iv("r1", 1, 1, 20, 30, 20)}, "c": {iv("r1", 2, 1, 0, 10, 30)},
		}, "shard 1 term 1 seen by r0 and r1"},
	} {
		vs := check(tc.ivs, latest, shardOf)
		if !slices.ContainsFunc(vs, func(v string) bool { return strings.HasPrefix(v, tc.want) }) {
			t.Errorf("%s: violations %q, want one starting %q", tc.name, vs, tc.want)
		}
	}
}
