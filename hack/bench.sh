#!/usr/bin/env bash
# bench.sh runs the project's benchmarks, each beside its baseline in the same
# run. The election benchmark (test/election) and the controller-runtime side by
# side (test/crbench: the same controller on controller-runtime's own leader
# election with EnableWarmup, on Baton's integration, and Baton's bare elector;
# and crash failover beside client-go's elector, below)
# need the real API server, which testenv.sh builds once per machine. Both take
# BATON_BENCH_TIMINGS=15s,10s,2s BATON_BENCH_ROUNDS BATON_BENCH_IDLE to shorten
# them. Extra arguments go to go test (e.g. -count 5).
set -euo pipefail
cd "$(dirname "$0")/.."

assets=$(hack/testenv.sh | tail -n 1)
export KUBEBUILDER_ASSETS="$assets"

go test -run '^$' -bench . -benchmem "$@" $(go list ./... | grep -v /test/)
go test -run '^$' -bench . -skip '^BenchmarkCrashFailover$' -benchtime 1x -timeout 60m "$@" ./test/...

# Crash failover side by side (test/crbench, BenchmarkCrashFailover): each replica
# a process of its own, the leader SIGKILLed each round; client-go's elector,
# controller-runtime's manager, Baton's integration without and with the death
# signal, 5 rounds each, at 15s/10s/2s and at a long renew deadline that rides out
# API server blips (60s/45s/5s). The benchmark plays the kubelet: 500ms after the
# SIGKILL it writes the killed container's status, terminated, with its termination
# message file (the incarnation's nonce line) as the message. BATON_CRASH_TIMINGS,
# BATON_CRASH_ROUNDS and BATON_CRASH_REPORT_DELAY change that.
go test -run '^$' -bench '^BenchmarkCrashFailover$' -benchtime 1x -timeout 90m "$@" ./test/crbench
