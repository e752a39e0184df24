#!/usr/bin/env bash
# bench.sh runs the project's benchmarks, each beside its baseline in the same
# run. The election benchmark (test/election) and the controller-runtime side by
# side (test/crbench: the same controller on controller-runtime's own leader
# election with EnableWarmup, on Baton's integration, and Baton's bare elector)
# need the real API server, which testenv.sh builds once per machine. Both take
# BATON_BENCH_TIMINGS=15s,10s,2s BATON_BENCH_ROUNDS BATON_BENCH_IDLE to shorten
# them. Extra arguments go to go test (e.g. -count 5).
set -euo pipefail
cd "$(dirname "$0")/.."

assets=$(hack/testenv.sh | tail -n 1)
export KUBEBUILDER_ASSETS="$assets"

go test -run '^$' -bench . -benchmem "$@" $(go list ./... | grep -v /test/)
go test -run '^$' -bench . -benchtime 1x -timeout 60m "$@" ./test/...
