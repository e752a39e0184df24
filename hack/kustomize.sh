#!/usr/bin/env bash
# kustomize.sh builds kustomize, at the version pinned in hack/tools/kustomize,
# once per machine into the same cache as testenv.sh, and prints the directory
# that holds it on its last line (hack/test.sh puts it on PATH for
# deploy/components' tests).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(awk '$1 == "require" && $2 == "sigs.k8s.io/kustomize/kustomize/v5" {print $3}' "$root/hack/tools/kustomize/go.mod")
dir="${XDG_CACHE_HOME:-$HOME/.cache}/baton/kustomize-${version}.d"
if [ ! -x "$dir/kustomize" ]; then
  echo "kustomize: building ${version} (once per machine)" >&2
  mkdir -p "$dir"
  (cd "$root/hack/tools/kustomize" && go build -o "$dir/kustomize.tmp" sigs.k8s.io/kustomize/kustomize/v5)
  mv "$dir/kustomize.tmp" "$dir/kustomize"
fi
echo "$dir"
