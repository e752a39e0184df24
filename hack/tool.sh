#!/usr/bin/env bash
# tool.sh TOOLDIR PACKAGE builds the command PACKAGE at the version that
# hack/tools/TOOLDIR/go.mod pins (the module PACKAGE belongs to), once per
# machine, into the same cache as testenv.sh, and prints the binary's path on
# its last line. lint.sh (staticcheck) and kustomize.sh use it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tooldir=$1 pkg=$2
name=$(basename "$pkg")
[ "$name" = v5 ] && name=$(basename "$(dirname "$pkg")") # kustomize/v5
version=$(awk -v pkg="$pkg" '$1 == "require" && index(pkg, $2) == 1 {print $3}' "$root/hack/tools/$tooldir/go.mod")
if [ -z "$version" ]; then
  echo "tool.sh: hack/tools/$tooldir/go.mod pins no module of $pkg" >&2
  exit 1
fi
dir="${XDG_CACHE_HOME:-$HOME/.cache}/baton/${name}-${version}.d"
if [ ! -x "$dir/$name" ]; then
  echo "tool.sh: building $name $version (once per machine)" >&2
  mkdir -p "$dir"
  (cd "$root/hack/tools/$tooldir" && go build -o "$dir/$name.tmp" "$pkg")
  mv "$dir/$name.tmp" "$dir/$name"
fi
echo "$dir/$name"
