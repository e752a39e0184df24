//go:build tools

// Package tools pins the kustomize that deploy/components' tests render the
// Components with (hack/test.sh builds it once per machine); v5.5.0 is the one
// kubectl v1.32 embeds.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5"
