package sharding_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
	"github.com/baton-dev/baton/pkg/termctx"
)

// fakeKubelet plays the kubelet's reports for the death signal: report proves an
// incarnation over. It counts the watches of each replica. Safe for concurrent use.
type fakeKubelet struct {
	mu     sync.Mutex
	dead   map[string]chan struct{} // by incarnation, closed by report
	calls  map[string]int           // Dead calls, by replica and incarnation
	active map[string]int           // of them, those whose context has not ended
	peak   map[string]int           // the most active at once
}

func newFakeKubelet() *fakeKubelet {
	return &fakeKubelet{dead: map[string]chan struct{}{}, calls: map[string]int{},
		active: map[string]int{}, peak: map[string]int{}}
}

func (k *fakeKubelet) chanLocked(inc string) chan struct{} {
	ch := k.dead[inc]
	if ch == nil {
		ch = make(chan struct{})
		k.dead[inc] = ch
	}
	return ch
}

// report proves inc over.
func (k *fakeKubelet) report(inc string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	close(k.chanLocked(inc))
}

// watch is the DeathWatch of replica.
func (k *fakeKubelet) watch(replica string) leaderelection.DeathWatch {
	return deathFunc(func(ctx context.Context, inc string) <-chan struct{} {
		key := replica + " watching " + inc
		k.mu.Lock()
		ch := k.chanLocked(inc)
		k.calls[key]++
		k.active[key]++
		k.peak[key] = max(k.peak[key], k.active[key])
		k.mu.Unlock()
		context.AfterFunc(ctx, func() {
			k.mu.Lock()
			k.active[key]--
			k.mu.Unlock()
		})
		return ch
	})
}

func (k *fakeKubelet) counts(replica, inc string) (calls, active, peak int) {
	key := replica + " watching " + inc
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls[key], k.active[key], k.peak[key]
}

type deathFunc func(ctx context.Context, inc string) <-chan struct{}

func (f deathFunc) Dead(ctx context.Context, inc string) <-chan struct{} { return f(ctx, inc) }

// TestSharderDeathSignal runs replicas a, b and c with the death signal on, crashes a,
// and has the kubelet report a's container terminated 100ms later: b and c count a
// gone and take all of a's shards within milliseconds of the report (not a
// LeaseDuration after the crash), none before it. Each of b and c watched a's
// incarnation with one DeathWatch call at a time, however many of a's shards its
// electors followed. A new run of a (same identity, another incarnation) then joins
// again and gets its share.
func TestSharderDeathSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards = testShards
		shared := sharding.NewMemoryStores(shards)
		k := newFakeKubelet()
		h := shardingtest.NewHistory(shards) // of b, c and a's second run
		var stops []func()
		defer func() {
			for _, stop := range slices.Backward(stops) {
				stop()
			}
		}()
		crashA := make(chan struct{})
		run := func(id, inc string, down <-chan struct{}, onAcquired func(context.Context)) *sharding.Sharder {
			s, stop := runSharder(t, shardingtest.Cut(shared, down, 0), id, shards, func(c *sharding.Config) {
				c.Incarnation, c.DeathWatch = inc, k.watch(id)
			}, sharding.Callbacks{OnAcquired: onAcquired})
			stops = append(stops, stop)
			return s
		}
		a := run("a", "inc-a", crashA, func(context.Context) {}) // its work dies with it
		time.Sleep(time.Second)
		var got takes
		b := run("b", "inc-b", nil, both(h.OnAcquired(t, "b"), got.record))
		c := run("c", "inc-c", nil, both(h.OnAcquired(t, "c"), got.record))
		time.Sleep(10 * time.Second)
		ofA := a.Owned()
		if len(ofA) < shards/3 {
			t.Fatalf("a owns %v, want its share of %d shards", ofA, shards)
		}

		crashed := time.Now()
		close(crashA)
		time.Sleep(100 * time.Millisecond)
		reported := time.Now()
		k.report("inc-a")
		time.Sleep(promptly)
		for _, s := range []*sharding.Sharder{b, c} {
			if slices.Contains(s.Members(), "a") {
				t.Errorf("%s still counts a live %v after its death was reported", s.Identity(), promptly)
			}
		}
		for _, st := range ofA {
			at := got.after(st.Shard, crashed)
			if at.IsZero() {
				t.Errorf("a's shard %d not taken after the crash", st.Shard)
			} else if at.Before(reported) || at.After(reported.Add(promptly)) {
				t.Errorf("a's shard %d taken at %v after the crash, want within %v of the report (%v after the crash)",
					st.Shard, at.Sub(crashed), promptly, reported.Sub(crashed))
			}
		}
		time.Sleep(testRetry) // the settle delay of the moves that balance b and c
		h.CheckBalanced(t, "death of a", "b", "c")
		for _, id := range []string{"b", "c"} {
			calls, _, peak := k.counts(id, "inc-a")
			if calls == 0 || peak != 1 {
				t.Errorf("%s called Dead for a's incarnation %d times, at most %d at once; want one watch at a time", id, calls, peak)
			}
		}

		// a's new run joins, is counted live again, and gets its share.
		run("a", "inc-a2", nil, h.OnAcquired(t, "a"))
		time.Sleep(10 * time.Second)
		h.CheckBalanced(t, "a's new run", "a", "b", "c")
		for _, stop := range slices.Backward(stops) {
			stop()
		}
		stops = nil
		h.CheckNoOverlap(t)
		h.CheckAllEnded(t)
		synctest.Wait() // the watches end in context.AfterFunc goroutines
		for _, id := range []string{"a", "b", "c"} {
			for _, inc := range []string{"inc-a", "inc-a2", "inc-b", "inc-c"} {
				if _, active, _ := k.counts(id, inc); active != 0 {
					t.Errorf("%s still watches %s after Run returned", id, inc)
				}
			}
		}
	})
}

// takes records the times of every shard acquisition. Safe for concurrent use.
type takes struct {
	mu sync.Mutex
	at map[int][]time.Time
}

func (g *takes) record(ctx context.Context) {
	st, _ := sharding.ShardTermOf(termctx.Get(ctx))
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.at == nil {
		g.at = map[int][]time.Time{}
	}
	g.at[st.Shard] = append(g.at[st.Shard], time.Now())
}

// after returns the first acquisition of shard at or after since, zero if none.
func (g *takes) after(shard int, since time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, at := range g.at[shard] {
		if !at.Before(since) {
			return at
		}
	}
	return time.Time{}
}

// both returns an OnAcquired that calls f and g, g first (f may wait for the term).
func both(f, g func(context.Context)) func(context.Context) {
	return func(ctx context.Context) { g(ctx); f(ctx) }
}
