#!/usr/bin/env bash
# bench.sh runs the project's benchmarks, each beside its baseline in the same
# run. The election benchmark needs the real API server, which testenv.sh
# builds once per machine. Extra arguments go to go test (e.g. -count 5).
set -euo pipefail
cd "$(dirname "$0")/.."

assets=$(hack/testenv.sh | tail -n 1)
export KUBEBUILDER_ASSETS="$assets"

go test -run '^$' -bench . -benchmem "$@" $(go list ./... | grep -v /test/)
go test -run '^$' -bench . -benchtime 1x -timeout 60m "$@" ./test/...
