// Package sharding tests pkg/k8s/sharding and the sharded controllers of the
// controller-runtime integration against a real kube-apiserver and etcd
// (pkg/batontest): replicas of a ring on real Leases joining, leaving, restarting
// one by one and crashing, with the checks of shardingtest and of every reconcile.
// BenchmarkShardMoves measures what moving shards costs (hack/bench.sh prints it).
package sharding
