//go:build tools

// Package tools pins staticcheck, the linter hack/test.sh runs, so every
// machine lints with the same version.
package tools

import _ "honnef.co/go/tools/cmd/staticcheck"
