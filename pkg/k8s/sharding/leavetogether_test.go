package sharding_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-dev/baton/pkg/k8s/leaderelection"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
)

// TestReplicasLeavingTogetherReleaseEveryShard: when every replica of a ring stops
// at once (a scale to zero, a rollout replacing them all), none is left holding a
// shard Lease: whatever is handed between them while they leave is released by its
// last holder, so the next replicas take it at once instead of waiting it out.
func TestReplicasLeavingTogetherReleaseEveryShard(t *testing.T) {
	for _, slow := range []bool{false, true} {
		for _, gap := range []time.Duration{0, time.Microsecond, time.Millisecond, 10 * time.Millisecond} {
			t.Run(fmt.Sprintf("slow=%v/gap=%v", slow, gap), func(t *testing.T) {
				leaveTogether(t, slow, gap)
			})
		}
	}
}

func leaveTogether(t *testing.T, slow bool, gap time.Duration) {
	synctest.Test(t, func(t *testing.T) {
		const shards = 16
		stores := sharding.NewMemoryStores(shards)
		if slow { // writes applied one at a time, writeTime each, as by a busy API server
			mem, server := stores, newLeaseServer()
			stores = sharding.Stores{Members: mem.Members, Shard: func(i int) leaderelection.LeaseStore {
				return slowLease{LeaseStore: mem.Shard(i), server: server}
			}}
		}
		var stops []func()
		for _, id := range []string{"a", "b", "c"} {
			_, stop := runSharder(t, stores, id, shards, nil, sharding.Callbacks{})
			stops = append(stops, stop)
		}
		time.Sleep(10 * testLease) // balanced
		var wg sync.WaitGroup
		for i, stop := range stops {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * gap)
				stop()
			})
		}
		wg.Wait()
		for i := range shards {
			r, err := stores.Shard(i).Get(context.Background())
			if err != nil {
				t.Fatalf("shard %d: %v", i, err)
			}
			if r.HolderIdentity != "" {
				t.Errorf("shard %d still held by %s after every replica stopped", i, r.HolderIdentity)
			}
		}
	})
}
