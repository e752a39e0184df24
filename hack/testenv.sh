#!/usr/bin/env bash
# testenv.sh builds the kube-apiserver and etcd that the integration tests run,
# from the pinned tool modules under hack/tools, into a cache directory keyed by
# version. It skips the build when both binaries are already there and prints
# the directory on its last line, for KUBEBUILDER_ASSETS.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
kube_version=v1.37.2
etcd_version=v3.6.16
dir="${BATON_TESTENV_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/k8s-${kube_version}-etcd-${etcd_version}}"
mkdir -p "$dir"

build() { # build NAME TOOLDIR PACKAGE
  local name=$1 tooldir=$2 pkg=$3
  if [ -x "$dir/$name" ]; then
    return
  fi
  echo "testenv: building $name into $dir (once per machine, several minutes)" >&2
  (cd "$root/hack/tools/$tooldir" && CGO_ENABLED=0 go build -trimpath -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
}

build etcd etcd go.etcd.io/etcd/server/v3
build kube-apiserver kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
echo "$dir"
