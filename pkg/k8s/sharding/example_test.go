package sharding_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/baton-dev/baton/pkg/controller/leadership"
	"github.com/baton-dev/baton/pkg/k8s/sharding"
	"github.com/baton-dev/baton/pkg/termctx"
)

// The selector of a replica's shards, for metav1.ListOptions.ShardSelector: adjacent
// shards make one range.
func ExampleRing_Selector() {
	ring, _ := sharding.NewRing(8)
	sel, _ := ring.Selector([]int{0, 1, 6})
	fmt.Println(sel)
	// Output:
	// shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0xe000000000000000')
}

// A client computes an object's shard itself, as the API server does.
func ExampleRing_ShardOf() {
	ring, _ := sharding.NewRing(sharding.DefaultShards)
	fmt.Println(ring.ShardOf("6f1c2c5e-7b1e-4a8e-9a4f-0d2c3e4f5a6b"))
	// Output:
	// 47
}

// One replica alone leads every shard of its ring; each shard's work runs under that
// shard's term context.
func ExampleSharder() {
	stores := sharding.NewMemoryStores(4)
	var mu sync.Mutex
	led := map[int]bool{}
	all := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := sharding.NewWithStores(sharding.Config{
		Identity: "replica-0", Name: "ring", Namespace: "default", Shards: 4,
	}, stores, sharding.Callbacks{
		OnAcquired: func(ctx context.Context) {
			t, _ := sharding.ShardTermOf(termctx.Get(ctx))
			mu.Lock()
			led[t.Shard] = true
			if len(led) == 4 {
				close(all)
			}
			mu.Unlock()
			<-ctx.Done() // the shard's work, until its term ends
		},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	<-all
	fmt.Println("leading", len(s.Owned()), "shards of", s.Ring().Shards())
	cancel() // leave: nobody to hand over to, so the shards are released
	fmt.Println("run:", <-done)
	fmt.Println("leading after leaving:", len(s.Owned()))
	// Output:
	// leading 4 shards of 4
	// run: <nil>
	// leading after leaving: 0
}

// Leader-only work per shard: each shard this replica leads runs the work under its
// term, starting from the shard's state that a leadership.ShardedReplayer recorded
// on every replica.
func ExampleWorkers() {
	const shards = 2
	quotas, _ := leadership.NewShardedReplayer[int](shards)
	// All-replica side: every shard's state, recorded before the replica joins.
	_ = quotas.Publish(0, 10)
	_ = quotas.Publish(1, 20)

	var mu sync.Mutex
	started := map[int]int{}
	all := make(chan struct{})
	workers, err := sharding.NewWorkers(sharding.WorkConfig{Works: []sharding.Work{{
		Name: "enforce-quota",
		Run: func(ctx context.Context, t sharding.ShardTerm) error {
			states, err := quotas.Watch(ctx, t.Shard)
			if err != nil {
				return err
			}
			q := <-states // at once: the shard's current state
			mu.Lock()
			started[t.Shard] = q
			if len(started) == shards {
				close(all)
			}
			mu.Unlock()
			for range states { // each newer state, until the shard's term ends
			}
			return nil
		},
	}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	s, err := sharding.NewWithStores(sharding.Config{
		Identity: "replica-0", Name: "ring", Namespace: "default", Shards: shards,
	}, sharding.NewMemoryStores(shards), sharding.Callbacks{OnAcquired: workers.RunShard}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	<-all
	mu.Lock()
	fmt.Println("shard 0 starts from", started[0], "and shard 1 from", started[1])
	mu.Unlock()
	cancel() // leave: each shard's work stops before its shard is released
	fmt.Println("run:", <-done, "works running:", workers.Stats().Running)
	// Output:
	// shard 0 starts from 10 and shard 1 from 20
	// run: <nil> works running: 0
}
