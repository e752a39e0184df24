#!/usr/bin/env bash
# lint.sh runs staticcheck, at the version pinned in hack/tools/staticcheck,
# with its default checks over every package of the module (hack/tool.sh builds
# it once per machine). A finding fails the run; a finding that is the point
# of a test carries a //lint:ignore naming why.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(hack/tool.sh staticcheck honnef.co/go/tools/cmd/staticcheck | tail -n 1)
"$bin" ./...
