// Package node is the end-to-end suite on a real one-node Kubernetes
// (hack/cluster.sh up; run it with hack/node-e2e.sh). Every test skips unless
// BATON_NODE_E2E=1 and a kubeconfig is given, so go test ./... skips it.
package node
