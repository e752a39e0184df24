#!/usr/bin/env bash
# kustomize.sh prints the directory of kustomize, at the version pinned in
# hack/tools/kustomize (hack/tool.sh builds it once per machine), on its last
# line: hack/test.sh puts it on PATH for deploy/components' tests.
set -euo pipefail
cd "$(dirname "$0")/.."
dirname "$(hack/tool.sh kustomize sigs.k8s.io/kustomize/kustomize/v5 | tail -n 1)"
