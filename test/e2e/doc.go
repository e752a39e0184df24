// Package e2e holds the integration test of `baton run` against a real
// API server (pkg/batontest): three controller processes built from
// cmd/baton, running as the ServiceAccount of deploy/ with its
// least-privilege Role, through the SIGKILL of their leader.
//
// Run it with hack/test.sh, which builds etcd and kube-apiserver once per
// machine; without them the test fails, it never skips.
package e2e
