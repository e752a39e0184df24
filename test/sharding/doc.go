// Package sharding tests pkg/k8s/sharding against a real kube-apiserver and etcd
// (pkg/batontest): replicas of a ring on real Leases joining and leaving, with
// the checks of shardingtest.
package sharding
