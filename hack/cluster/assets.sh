#!/usr/bin/env bash
# Builds (once) the node and control-plane binaries the one-node cluster needs that
# envtest does not already provide: kubelet, kube-controller-manager, kube-scheduler,
# kube-proxy and a kubectl of the same version from k8s.io/kubernetes, containerd and its runc shim from
# github.com/containerd/containerd/v2, all from the Go module proxy. kubelet 1.37 needs
# containerd 2.x (it asks the runtime for its cgroup driver), so Debian's 1.6 will not
# do. Binaries are cached outside the checkout like the envtest ones; the first build
# takes 10-20 minutes on two cores. Prints the binaries' directory on its last line.
set -euo pipefail

K8S_VERSION=${K8S_VERSION:-1.37.2}
STAGING_VERSION=${STAGING_VERSION:-0.37.2}
CONTAINERD_VERSION=${CONTAINERD_VERSION:-2.4.2}

root=$(cd "$(dirname "$0")/../.." && pwd)
out=${CLUSTER_BIN_DIR:-$root/bin/cluster}
cache=${OUTBOX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/outbox-operator}/cluster-k8s$K8S_VERSION-containerd$CONTAINERD_VERSION
kube_bins=(kubelet kube-controller-manager kube-scheduler kube-proxy kubectl)
containerd_bins=(containerd containerd-shim-runc-v2 ctr)
mkdir -p "$out" "$cache"
for b in "${kube_bins[@]}" "${containerd_bins[@]}"; do
  if [ ! -x "$out/$b" ] && [ -x "$cache/$b" ]; then cp "$cache/$b" "$out/$b"; fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

missing() { for b in "$@"; do [ -x "$out/$b" ] || return 0; done; return 1; }

# main_for <binary> prints the main package of one Kubernetes component.
main_for() {
  case $1 in
  kubelet) echo 'app.NewKubeletCommand(context.Background())' ;;
  kube-controller-manager) echo 'app.NewControllerManagerCommand()' ;;
  kube-scheduler) echo 'app.NewSchedulerCommand()' ;;
  kube-proxy) echo 'app.NewProxyCommand()' ;;
  esac
}

build_kube() {
  local mod=$work/kube
  mkdir -p "$mod"
  for b in "${kube_bins[@]}"; do
    mkdir -p "$mod/$b"
    if [ "$b" = kubectl ]; then
      cat >"$mod/$b/main.go" <<'GO'
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
GO
      continue
    fi
    cat >"$mod/$b/main.go" <<GO
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/$b/app"
)

var _ = context.Background

func main() { os.Exit(cli.Run($(main_for "$b"))) }
GO
  done
  (
    cd "$mod"
    go mod init cluster/kube >/dev/null 2>&1
    modfile=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    # Every k8s.io/<staging> module points at ./staging in kubernetes' own go.mod;
    # outside that repo they must be pinned to the published v0.x tags.
    grep -E '=> \./staging/src/' "$modfile" | awk '{print $1}' | while read -r m; do
      go mod edit -replace "$m=$m@v$STAGING_VERSION"
    done
    go mod edit -require "k8s.io/kubernetes@v$K8S_VERSION"
    go mod tidy >/dev/null
    for b in "${kube_bins[@]}"; do
      [ -x "$out/$b" ] && continue
      echo "building $b v$K8S_VERSION" >&2
      CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/$b.tmp" "./$b"
      mv "$out/$b.tmp" "$out/$b"
    done
  )
}

build_containerd() {
  local mod=$work/containerd
  mkdir -p "$mod"
  (
    cd "$mod"
    go mod init cluster/containerd >/dev/null 2>&1
    cat >tools.go <<'GO'
//go:build tools

package tools

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
)
GO
    go mod edit -require "github.com/containerd/containerd/v2@v$CONTAINERD_VERSION"
    go mod tidy >/dev/null
    for b in "${containerd_bins[@]}"; do
      [ -x "$out/$b" ] && continue
      echo "building $b v$CONTAINERD_VERSION" >&2
      # No btrfs/devmapper/zfs snapshotters: overlayfs and native are all a node here needs.
      CGO_ENABLED=0 go build -trimpath -tags 'no_btrfs no_devmapper no_zfs' -ldflags='-s -w' \
        -o "$out/$b.tmp" "github.com/containerd/containerd/v2/cmd/$b"
      mv "$out/$b.tmp" "$out/$b"
    done
  )
}

if missing "${containerd_bins[@]}"; then build_containerd; fi
if missing "${kube_bins[@]}"; then build_kube; fi
for b in "${kube_bins[@]}" "${containerd_bins[@]}"; do
  [ -x "$cache/$b" ] || cp "$out/$b" "$cache/$b"
done
echo "$out"
