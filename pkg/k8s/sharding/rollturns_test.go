package sharding_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestRollingRestartNoTurnStalls: a rolling restart done as fast as the ring
// balances (each replacement stopped once the new replica holds its share, as
// test/sharding's BenchmarkShardMoves does it), with members replaced within a
// RetryPeriod of each other's start. A new replica withholds hand-overs to a member
// it saw only on its first look until that member renews (docs/design/sharding.md, #
// Hand-over targets); the other replicas' turns (turns.go) must not wait for such a
// move. Before, they counted it pending, and a join stalled a turnPatience
// (RetryPeriod/4) at a time, once or twice per roll.
func TestRollingRestartNoTurnStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const shards, retry = 64, 2 * time.Second
		h := shardingtest.NewHistory(shards)
		mem, server := sharding.NewMemoryStores(shards), newLeaseServer()
		stores := sharding.Stores{ // writes one at a time, writeTime each: moves take time, so turns matter
			Shard:   func(i int) leaderelection.LeaseStore { return slowLease{mem.Shard(i), server} },
			Members: mem.Members,
		}
		var live []*replica
		var all []*replica
		defer func() {
			for _, r := range all {
				r.stop()
			}
		}()
		start := func(id string) {
			// controller-runtime's timings, as in the benchmark: a member renews every 2s.
			r := startReplicaTimed(t, stores, id, shards, h.OnAcquired(t, id), 15*time.Second, 10*time.Second, retry)
			live, all = append(live, r), append(all, r)
		}
		ids := func() []string {
			var out []string
			for _, r := range live {
				out = append(out, r.id)
			}
			return out
		}
		// share waits until replica id holds its share of the ring, and returns how long
		// that took.
		share := func(id string) time.Duration {
			t.Helper()
			begin := time.Now()
			for {
				shares := h.Shares()
				if shares[id] >= shards/len(live) {
					return time.Since(begin)
				}
				if time.Since(begin) > 10*time.Second {
					t.Fatalf("%s never held its share: %v", id, shares)
				}
				time.Sleep(time.Millisecond)
			}
		}
		// balanced waits until the live replicas hold the ring balanced, and returns how
		// long that took.
		balanced := func(phase string) time.Duration {
			t.Helper()
			begin := time.Now()
			for {
				if _, err := h.Balanced(ids()...); err == nil {
					return time.Since(begin)
				}
				if time.Since(begin) > 10*time.Second {
					t.Fatalf("%s: not balanced after 10s", phase)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		for i := range 4 {
			start(fmt.Sprint("r", i))
		}
		balanced("start")
		time.Sleep(30 * time.Second)
		roll := time.Now()
		for round := range 2 {
			for i := range 4 {
				old := live[0]
				old.stop()
				live = live[1:]
				leave := balanced("leave of " + old.id)
				id := fmt.Sprintf("s%d", 4*round+i)
				start(id)
				joined := share(id)
				all := balanced("join of " + id)
				t.Logf("%s replaced by %s: leave balanced in %v; %s held its share in %v, the ring balanced in %v", old.id, id, leave, id, joined, all)
				// A join is the new member's Lease, SettleDelay, and its share handed over in
				// turns, one write (writeTime) each: far under a turn's patience more. (Balance may
				// wait longer: for a move between the others that a young replica withholds.)
				if limit := sharding.DefaultSettleDelay + retry/4; joined > limit {
					t.Errorf("%s held its share %v after it started, want under %v (a turn stalled)", id, joined, limit)
				}
			}
		}
		h.CheckGaps(t, "rolling restart", roll, handoverGap)
		for _, r := range all {
			r.stop()
		}
		h.CheckNoOverlap(t)
		h.CheckAllEnded(t)
	})
}
