package sharding_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestSharderCountsMovesAndOwnerlessTime checks the figures of a ring's metrics: on a
// join, each shard handed over is counted by the replica that handed it (HandOvers)
// and, for those c took, by c (Acquisitions), and its time without owner is measured
// once, by the first, within handoverGap on average; on a crash, the shards the
// others take are measured by them, once each, within a LeaseDuration and two
// RetryPeriods.
func TestSharderCountsMovesAndOwnerlessTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := shardingtest.NewHistory(testShards)
		stores := sharding.NewMemoryStores(testShards)
		replicas := map[string]*replica{}
		defer func() {
			for _, r := range replicas {
				r.stop()
			}
		}()
		for _, id := range []string{"a", "b"} {
			replicas[id] = startReplica(t, stores, id, h)
		}
		time.Sleep(10 * time.Second)
		before := ownerlessOf(replicas)
		handOvers := func() uint64 {
			return replicas["a"].sharder.Stats().HandOvers + replicas["b"].sharder.Stats().HandOvers
		}
		startHandOvers := handOvers()

		replicas["c"] = startReplica(t, stores, "c", h)
		time.Sleep(5 * time.Second)
		c := replicas["c"].sharder
		moved := handOvers() - startHandOvers
		// The join may also move a shard between a and b (a fair share of 16 among 3).
		if got := c.Stats().Acquisitions; got != uint64(len(c.Owned())) || got == 0 || got > moved {
			t.Errorf("c's acquisitions %d, want the shards it leads (%d), of the %d handed over", got, len(c.Owned()), moved)
		}
		join := ownerlessOf(replicas)
		if got := join.Count - before.Count; got != moved {
			t.Errorf("ownerless observations of the join: %d, want one per shard moved (%d)", got, moved)
		}
		if maxMean := (join.Sum - before.Sum) / float64(max(moved, 1)); maxMean > handoverGap.Seconds() {
			t.Errorf("mean ownerless time of a planned move %.3fs, want at most %v", maxMean, handoverGap)
		}

		led := uint64(len(c.Owned()))
		ab := map[string]*replica{"a": replicas["a"], "b": replicas["b"]}
		beforeCrash, crashHandOvers := ownerlessOf(ab), handOvers()
		replicas["c"].crash()
		time.Sleep(4 * testLease)
		crash := ownerlessOf(ab)
		// Rebalancing a and b after the crash may move a shard between them too.
		if got, want := crash.Count-beforeCrash.Count, led+handOvers()-crashHandOvers; got != want {
			t.Errorf("ownerless observations of the crash: %d, want one per shard c led (%d) and per hand-over between a and b (%d)",
				got, led, want-led)
		}
		if limit := (testLease + 2*testRetry).Seconds(); crash.Sum-beforeCrash.Sum > float64(led)*limit {
			t.Errorf("ownerless time of the crash: %.3fs over %d shards, want at most %.1fs each", crash.Sum-beforeCrash.Sum, led, limit)
		}
	})
}

// ownerlessOf adds up the replicas' ownerless histograms' counts and sums.
func ownerlessOf(replicas map[string]*replica) sharding.OwnerlessHistogram {
	var out sharding.OwnerlessHistogram
	for _, r := range replicas {
		h := r.sharder.Ownerless()
		out.Count += h.Count
		out.Sum += h.Sum
	}
	return out
}
