#!/usr/bin/env bash
# node-e2e.sh runs the node end-to-end suite (test/node) on the one-node
# Kubernetes of hack/cluster.sh, bringing it up first (up is idempotent; it
# needs root), then prints the figures the tests measured. Arguments go to go
# test (e.g. -run TestSIGKILLLeader). It is not part of hack/test.sh: the
# whole suite takes about 15 minutes. hack/cluster.sh down stops the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

kubeconfig=$(hack/cluster.sh up | tail -n 1)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
BATON_NODE_E2E=1 BATON_NODE_KUBECONFIG="$kubeconfig" \
  go test -race -count=1 -timeout 60m -v ./test/node/ "$@" 2>&1 | tee "$out" || status=$?
echo
echo "figures (wall clock on this machine; noisy when it is busy):"
grep -o 'FIGURE .*' "$out" | sed 's/^FIGURE /  /' || true
exit "$status"
