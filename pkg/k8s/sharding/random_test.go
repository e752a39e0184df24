package sharding_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/internal/testseed"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/k8s/sharding/shardingtest"
)

// TestSharderRandomized runs seeded random histories of replicas joining, leaving
// gracefully and crashing, 2 to 5 of them live, on in-memory stores in a synctest
// bubble. It checks that no shard ever has two owners, and that once the faults stop
// every shard has one owner and the shares are within one shard, within two
// LeaseDurations (a crash costs one; the moves after it a settle delay each).
// BATON_SEED=N replays the history of one seed (the electors' jitter is seeded by
// replica; the order of goroutines at one instant is not, so timings within it may
// differ); BATON_SHARDING_SEEDS=N runs seeds 1 to N (soak).
func TestSharderRandomized(t *testing.T) {
	seeds := testseed.Seeds(t, 1, 2, 3, 4, 5, 6)
	if n, err := strconv.Atoi(os.Getenv("BATON_SHARDING_SEEDS")); err == nil && n > 0 {
		seeds = nil
		for s := range n {
			seeds = append(seeds, uint64(s+1))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { randomHistory(t, seed) })
		})
	}
}

func randomHistory(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x5ba4d))
	h := shardingtest.NewHistory(testShards)
	stores := sharding.NewMemoryStores(testShards)
	var all []*replica
	var live []string
	defer func() {
		for _, r := range all {
			r.stop()
		}
	}()
	next := 0
	join := func() {
		id := fmt.Sprintf("r%d", next)
		next++
		all = append(all, startReplica(t, stores, id, h))
		live = append(live, id)
	}
	find := func(id string) *replica {
		for _, r := range all {
			if r.id == id {
				return r
			}
		}
		return nil
	}
	for range 3 {
		join()
	}
	var log []string
	for range 8 {
		switch a := rng.IntN(3); {
		case a == 0 && len(live) < 5 || len(live) <= 2:
			join()
			log = append(log, "join "+live[len(live)-1])
		default:
			k := rng.IntN(len(live))
			id := live[k]
			live = slices.Delete(live, k, k+1)
			if a == 1 {
				log = append(log, "leave "+id)
				go find(id).stop() // a leave takes its time; others act meanwhile
			} else {
				log = append(log, "crash "+id)
				find(id).crash()
			}
		}
		pause := time.Duration(rng.IntN(int(2 * testLease)))
		log[len(log)-1] += fmt.Sprintf(", then %v", pause)
		time.Sleep(pause)
	}
	time.Sleep(2 * testLease)
	synctest.Wait()
	if count, err := h.Balanced(live...); err != nil {
		t.Fatalf("seed %d: %v after the history %v", seed, err, log)
	} else {
		t.Logf("seed %d: %v; shares %v", seed, log, count)
	}
	for _, r := range all {
		r.stop()
	}
	h.CheckNoOverlap(t)
	h.CheckAllEnded(t)
}
