//go:build tools

// Package tools pins the kube-apiserver that the integration tests run.
// The binary is built by hack/testenv.sh; nothing imports this package.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
