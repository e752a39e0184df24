// Package sharding spreads the work of a controller over its replicas: every
// replica leads a share of a fixed set of shards, each shard elected on its own
// coordination.k8s.io/v1 Lease with Baton's elector (its own term, fencing and
// hand-over). There is no extra component: no sharder Deployment, no webhook, no
// CRD. The replicas' own Leases are the whole state.
//
// # Usage
//
// Every replica of a ring runs a Sharder with the same Name, Namespace and Shards,
// and its leader-only work per shard in Workers:
//
//	workers, err := sharding.NewWorkers(sharding.WorkConfig{Works: []sharding.Work{{
//		Name: "enforce-quota",
//		Run: func(ctx context.Context, t sharding.ShardTerm) error {
//			return enforceQuota(ctx, t.Shard) // until ctx ends with the shard's term
//		},
//	}}})
//	s, err := sharding.New(sharding.Config{Identity: podName, Name: "quota", Namespace: ns},
//		clientset, sharding.Callbacks{OnAcquired: workers.RunShard}, logger)
//	err = s.Run(ctx) // joins the ring; when ctx ends, hands its shards over and leaves
//
// An object's shard is Ring.ShardOf its UID (the hash of Kubernetes' sharded list
// and watch, so Ring.Selector can ask an API server for a replica's shards alone).
// termctx.Get(ctx) in a shard's work gives the shard and its term, the fencing
// token of writes for that shard's objects. Owned lists the shards led now. The
// state a shard's new owner needs at once comes from a leadership.ShardedReplayer
// that every replica fills before it joins. A ring's S is fixed: to change it, stop
// every replica of the old S before the first of the new one starts (a rolling
// update that changes S stalls, its new replicas refusing to lead).
//
// # Design notes
//
// The ring, its shape, placement, membership, renewal, hand-overs, joining, leaving
// and crashing, and why no shard has two leaders at once are in
// docs/design/sharding.md and docs/design/sharding-renewal.md in the repository.
//
// # Concurrency properties
//
// Run's goroutine keeps the view of the members, tells the electors which shards they
// may campaign for, and starts hand-overs; each shard's elector runs in a goroutine
// of its own, and each hand-over too. OnAcquired runs on
// the shard elector's leader goroutine, OnLost on its election goroutine. Run waits
// for all of them before it returns. Owned, Assigned and Members are safe to call
// from any goroutine. No lock is held while calling a callback or a store.
//
// # Testing
//
// NewMemoryStores gives the Leases of a ring in memory, for the replicas of one
// process; everything runs in testing/synctest bubbles, where the timing runs on the
// fake clock. Package shardingtest records the shard terms of a ring's replicas and
// checks them (never two owners, balanced shares, time without owner), and cuts a
// replica off from its stores to simulate a crash.
package sharding
