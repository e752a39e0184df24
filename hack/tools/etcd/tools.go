//go:build tools

// Package tools pins the etcd that the integration tests run.
// The binary is built by hack/testenv.sh; nothing imports this package.
package tools

import _ "go.etcd.io/etcd/server/v3"
