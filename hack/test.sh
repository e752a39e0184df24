#!/usr/bin/env bash
# test.sh is the project's one test command: it builds the kube-apiserver and
# etcd the integration tests need (once per machine, see testenv.sh), then runs
# go vet and every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

assets=$(hack/testenv.sh | tail -n 1)
export KUBEBUILDER_ASSETS="$assets"

go vet ./...
go test -race -count=1 -timeout 40m ./...
