#!/usr/bin/env bash
# Builds the envtest control-plane binaries (kube-apiserver, etcd) from the Go module
# proxy into bin/k8s, because the usual envtest download site is unreachable here.
# Reuses binaries already present; the first kube-apiserver build takes ~9 minutes.
# Prints the assets directory (for KUBEBUILDER_ASSETS) on its last line.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
STAGING_VERSION=${STAGING_VERSION:-0.37.2}
ETCD_VERSION=${ETCD_VERSION:-3.6.16}

root=$(cd "$(dirname "$0")/.." && pwd)
out=${ENVTEST_ASSETS_DIR:-$root/bin/k8s}
# Built binaries are also cached outside the checkout, so a fresh clone on the same
# machine (CI runs on one) links them instead of rebuilding for minutes.
cache=${OUTBOX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-operator}/envtest-k8s$K8S_VERSION-etcd$ETCD_VERSION
mkdir -p "$out" "$cache"
for b in kube-apiserver etcd; do
  if [ ! -x "$out/$b" ] && [ -x "$cache/$b" ]; then cp "$cache/$b" "$out/$b"; fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

build_apiserver() {
  local dir=$work/kube-apiserver
  mkdir -p "$dir"
  cat >"$dir/main.go" <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }
GO
  (
    cd "$dir"
    go mod init envtest/kube-apiserver >/dev/null 2>&1
    modfile=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    # Every k8s.io/<staging> module points at ./staging in kubernetes' own go.mod;
    # outside that repo they must be pinned to the published v0.x tags.
    grep -E '=> \./staging/src/' "$modfile" | awk '{print $1}' | while read -r m; do
      go mod edit -replace "$m=$m@v$STAGING_VERSION"
    done
    go mod edit -require "k8s.io/kubernetes@v$K8S_VERSION"
    go mod tidy >/dev/null
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/kube-apiserver.tmp" .
    mv "$out/kube-apiserver.tmp" "$out/kube-apiserver"
  )
}

build_etcd() {
  local dir=$work/etcd
  mkdir -p "$dir"
  cat >"$dir/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (
    cd "$dir"
    go mod init envtest/etcd >/dev/null 2>&1
    go mod edit -require "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
    go mod tidy >/dev/null
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/etcd.tmp" .
    mv "$out/etcd.tmp" "$out/etcd"
  )
}

[ -x "$out/etcd" ] || { echo "building etcd v$ETCD_VERSION into $out" >&2; build_etcd; }
[ -x "$out/kube-apiserver" ] || { echo "building kube-apiserver v$K8S_VERSION into $out (about 9 minutes)" >&2; build_apiserver; }
for b in kube-apiserver etcd; do
  [ -x "$cache/$b" ] || cp "$out/$b" "$cache/$b"
done
if [ ! -x "$out/kubectl" ]; then
  if command -v kubectl >/dev/null 2>&1; then ln -sf "$(command -v kubectl)" "$out/kubectl"; fi
fi
echo "$out"
