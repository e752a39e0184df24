#!/usr/bin/env bash
# bench.sh runs the project's benchmarks, each beside its baseline in the same
# run. The election benchmark (test/election) and the controller-runtime side by
# side (test/crbench: the same controller on controller-runtime's own leader
# election with EnableWarmup, on Baton's integration, and Baton's bare elector;
# and crash failover beside client-go's elector, below)
# need the real API server, which testenv.sh builds once per machine. Both take
# BATON_BENCH_TIMINGS=15s,10s,2s BATON_BENCH_ROUNDS BATON_BENCH_IDLE to shorten
# them. The sharded-leadership figures (test/shardbench) run there too: the same
# I/O-bound controller as the single leader and sharded at 1, 2, 3, 5 and 10
# replicas (256 shards, so that shares allow 9x at 10), reconciles per second and
# the ratio to the single leader in a table, and how many
# objects each replica's cache holds at N = 1, 3, 5 with and without the API
# server's ShardedListAndWatch gate; BATON_SHARDBENCH_OBJECTS (2000) and the other
# BATON_SHARDBENCH_* knobs of its package doc shrink it. The benchmark packages run
# one at a time (-p 1), so that their timings do not share the machine. Extra
# arguments go to go test (e.g. -count 5).
set -euo pipefail
cd "$(dirname "$0")/.."

assets=$(hack/testenv.sh | tail -n 1)
export KUBEBUILDER_ASSETS="$assets"

go test -run '^$' -bench . -benchmem "$@" $(go list ./... | grep -v /test/)
go test -p 1 -run '^$' -bench . -skip '^BenchmarkCrashFailover$' -benchtime 1x -timeout 60m "$@" $(go list ./test/... | grep -v /test/sharding)

# Crash failover side by side (test/crbench, BenchmarkCrashFailover): each replica
# a process of its own, the leader SIGKILLed each round; client-go's elector,
# controller-runtime's manager, Baton's integration without and with the death
# signal, 5 rounds each, at 15s/10s/2s and at a long renew deadline that rides out
# API server blips (60s/45s/5s). The benchmark plays the kubelet: 500ms after the
# SIGKILL it writes the killed container's status, terminated, with its termination
# message file (the incarnation's nonce line) as the message. BATON_CRASH_TIMINGS,
# BATON_CRASH_ROUNDS and BATON_CRASH_REPORT_DELAY change that.
go test -run '^$' -bench '^BenchmarkCrashFailover$' -benchtime 1x -timeout 90m "$@" ./test/crbench

# Shard moves (test/sharding BenchmarkShardMoves): a sharded controller of 64 shards
# over 640 ConfigMaps on four replicas; a fifth joins and leaves gracefully, the four
# are replaced one by one (a rolling restart), one crashes. Printed per phase: the
# Lease writes per moved shard and the object writes (0) beside the anchor's two
# patches per moved object, the time from a join to balanced shares, each handed-over
# shard's time without owner (p50/p99/max, both kinds by their terms: term end to next
# term start, by the Sharder's callbacks or the controller's ShardWork; beside it, the
# old owner's write to its arrival on a Lease watch), each phase's slowest moves step
# by step, and how long a crashed replica's shards went without owner, beside the
# lease duration.
go test -count=1 -v -run '^$' -bench '^BenchmarkShardMoves$' -benchtime 1x -timeout 10m "$@" ./test/sharding |
	grep -E 'shardmoves:|^(ok|FAIL|--- FAIL)' | sed 's/^ *moves_bench_test.go:[0-9]*: shardmoves: /[shard moves] /'

# Quiet ring cost (test/sharding TestQuietRingCost): N = 5 replicas of a ring doing
# nothing, at S = 16, 64 and 256 shards: Lease writes, watch events and Lease
# watches per replica, per RetryPeriod. Shard Leases are written only when they
# change hands and the member Leases carry the shard terms (docs/design/
# sharding-renewal.md), so the writes stay at N and the watches at one per replica
# at any S; before that design (3e8157e) the same test printed 21 / 69 / 259.5
# writes and 17 / 65 / 257 watches per replica.
BATON_RING_COST=16,64,256 go test -count=1 -v -run '^TestQuietRingCost$' -timeout 10m ./test/sharding |
	grep -E 'Lease writes per RetryPeriod|^(ok|FAIL|--- FAIL)'
