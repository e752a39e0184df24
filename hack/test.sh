#!/usr/bin/env bash
# test.sh is the project's one test command: it builds the kube-apiserver and
# etcd the integration tests need (once per machine, see testenv.sh), then runs
# go vet, staticcheck (hack/lint.sh) and every test with the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."

assets=$(hack/testenv.sh | tail -n 1)
export KUBEBUILDER_ASSETS="$assets"
# deploy/components' tests render the Components with this pinned kustomize.
PATH="$(hack/kustomize.sh | tail -n 1):$PATH"
export PATH

go vet ./...
hack/lint.sh
# Why -p 4 on a 2-core machine: most packages wait on an API server or on
# lease timings rather than compute (the whole run uses about a third of two
# cores at the default -p 2), so four at a time keeps the suite near 4 minutes
# instead of 6.
go test -race -count=1 -p 4 -timeout 40m ./...
