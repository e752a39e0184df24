#!/usr/bin/env bash
# lint.sh runs staticcheck, at the version pinned in hack/tools/staticcheck,
# with its default checks over every package of the module. It builds the
# binary once per machine into the same cache as testenv.sh and skips the
# build when it is there. A finding fails the run; a finding that is the
# point of a test carries a //lint:ignore naming why.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(awk '$1 == "require" && $2 == "honnef.co/go/tools" {print $3}' "$root/hack/tools/staticcheck/go.mod")
bin="${XDG_CACHE_HOME:-$HOME/.cache}/baton/staticcheck-${version}"
if [ ! -x "$bin" ]; then
  echo "lint: building staticcheck ${version} (once per machine)" >&2
  mkdir -p "$(dirname "$bin")"
  (cd "$root/hack/tools/staticcheck" && go build -o "$bin.tmp" honnef.co/go/tools/cmd/staticcheck)
  mv "$bin.tmp" "$bin"
fi
cd "$root"
"$bin" ./...
