// Package sharding spreads the work of a controller over its replicas: every
// replica leads a share of a fixed set of shards, each shard elected on its own
// coordination.k8s.io/v1 Lease with Baton's elector (its own term, fencing and
// hand-over).
//
// # Ring
//
// A Ring divides the objects into S shards (DefaultShards, 64, unless told
// otherwise; fixed for the life of a ring) by the 64-bit FNV-1a hash of the object's
// UID, each shard a contiguous range of hashes: the function and the ranges of
// Kubernetes' sharded list and watch (KEP-5866), so an API server with the
// ShardedListAndWatch feature can send a replica only its shards' objects
// (Ring.Selector), and a client without it can compute an object's shard itself
// (Ring.ShardOf). Every UID is in exactly one shard.
//
// # Placement
//
// Place decides which member owns which shard, from the set of live members alone,
// so every replica computes the same answer without talking to the others:
// rendezvous (highest random weight) hashing with a fair-share cap. Shares differ by
// at most one shard (at most ceil(S/N) each). A member that joins or leaves moves its
// own share of shards and, because shares shrink or grow by one, a few more: on
// average 2.6 beyond the minimum over the randomized test's histories, never more
// than 2·ceil(S/N) beyond it (TestPlacementRandomized checks both).
package sharding
