package leadership_test

import (
	"context"
	"fmt"

	"github.com/baton-dev/baton/pkg/controller/leadership"
)

// Quota is the state of one shard that every replica computes.
type Quota struct {
	Shard, Used int
}

// A replica records every shard's state; the work of a shard it comes to lead
// starts from that shard's current state at once, then follows it until its term
// ends.
func ExampleShardedReplayer() {
	quotas, err := leadership.NewShardedReplayer[Quota](4)
	if err != nil {
		fmt.Println(err)
		return
	}

	// All-replica side: record each shard's state on every change, led here or not.
	for shard := range 4 {
		_ = quotas.Publish(shard, Quota{Shard: shard, Used: 10 * shard})
	}
	_ = quotas.Publish(2, Quota{Shard: 2, Used: 25})

	// The work of shard 2, when this replica starts leading it: term is the shard
	// term's context (sharding.Workers gives it to each sharding.Work).
	term, endTerm := context.WithCancel(context.Background())
	defer endTerm()
	states, err := quotas.Watch(term, 2)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("starts from", <-states)
	_ = quotas.Publish(2, Quota{Shard: 2, Used: 30})
	fmt.Println("then", <-states)

	// The term ends (the shard is handed over): the channel closes, the state stays.
	endTerm()
	for range states {
	}
	q, _ := quotas.Get(2)
	fmt.Println("still recorded", q)
	// Output:
	// starts from {2 25}
	// then {2 30}
	// still recorded {2 30}
}
