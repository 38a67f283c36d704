#!/usr/bin/env bash
# make e2e-cluster: the host-safety test, then the product on the cluster.
#
# 1. With foreign objects planted (hack/cluster/canaries.sh: a KUBE-* chain, the node's
#    address, a kubelet, a containerd, each in turn), up.sh refuses to start with its
#    one-line reason and changes nothing on the host, and down.sh after it changes
#    nothing either.
# 2. With a CNI-* chain, a process in a foreign kubepods cgroup, an address and the
#    kubelet's sysctls at planted values in place, the cluster comes up, test/cluster
#    runs against it, the cluster goes down, check-clean.sh finds nothing left, and
#    every canary is as it was.
#
# Where this host cannot run a kubelet, or holds another installation that up.sh
# would refuse, it prints one line saying why and succeeds (E2E_CLUSTER=auto, the
# default, so a developer's `make test` stays green there); E2E_CLUSTER=require (CI)
# fails instead, E2E_CLUSTER=skip skips on purpose.
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/cluster/lib.sh
source hack/cluster/host.sh

mode=${E2E_CLUSTER:-auto}
case "$mode" in
skip)
  echo "e2e-cluster: SKIPPED (E2E_CLUSTER=skip)"
  exit 0
  ;;
auto | require) ;;
*)
  echo "e2e-cluster: E2E_CLUSTER must be auto, require or skip, not '${E2E_CLUSTER}'" >&2
  exit 2
  ;;
esac
cannot() {
  if [ "$mode" = require ]; then
    echo "e2e-cluster: FAILED (E2E_CLUSTER=require): $1" >&2
    exit 1
  fi
  echo "e2e-cluster: SKIPPED: $1"
  exit 0
}
if ! why=$(supported); then cannot "this host cannot run the cluster: $why"; fi

make --no-print-directory cluster-deps cluster-assets cluster-images >&2
start=$(date +%s)
# A cluster and canaries left by an interrupted run would carry old state: start
# from nothing (the cluster first: down.sh restores the sysctls it found, the planted
# ones, which removing the canaries then puts back).
export CANARY_DIR=${TMPDIR:-/tmp}/outbox-cluster-canaries
canaries() { hack/cluster/canaries.sh "$@"; }
hack/cluster/down.sh >/dev/null 2>&1 || true
hack/cluster/check-clean.sh >/dev/null 2>&1 || true
if [ -d "$CANARY_DIR" ]; then canaries remove && rm -rf "$CANARY_DIR"; fi
if ! why=$(preflight); then cannot "up.sh would refuse to start: $why"; fi
mkdir "$CANARY_DIR"
finish() {
  rc=$?
  if [ "$rc" != 0 ] && [ -d "$STATE/logs" ]; then
    echo "e2e-cluster: failed; last lines of the kubelet and containerd logs:" >&2
    tail -n 15 "$STATE/logs/kubelet.log" "$STATE/logs/containerd.log" >&2 || true
  fi
  if [ -d "$OWNED" ]; then
    hack/cluster/down.sh || rc=1
    hack/cluster/check-clean.sh || rc=1
    canaries check || rc=1
  fi
  canaries remove || rc=1
  rm -rf "$CANARY_DIR"
  echo "e2e-cluster: done in $(($(date +%s) - start))s (exit $rc)"
  exit "$rc"
}
trap finish EXIT

# refuses <canary> <reason>: with <canary> planted too, up.sh exits 4 with <reason> in
# its one line, and neither it nor down.sh after it changes the host.
refuses() {
  local canary=$1 want=$2 out rc=0
  canaries plant "$canary"
  canaries fingerprint >"$CANARY_DIR/before"
  out=$(hack/cluster/up.sh 2>&1) || rc=$?
  if [ "$rc" != 4 ] || [ "$(wc -l <<<"$out")" != 1 ] || ! grep -qF "refusing to start: $want" <<<"$out"; then
    echo "e2e-cluster: with $canary planted, up.sh exited $rc, want 4 and one line with \"$want\":" >&2
    echo "$out" >&2
    return 1
  fi
  [ ! -d "$OWNED" ] || { echo "e2e-cluster: up.sh refused but left $OWNED" >&2; return 1; }
  canaries fingerprint >"$CANARY_DIR/after-up"
  diff "$CANARY_DIR/before" "$CANARY_DIR/after-up" >&2 || { echo "e2e-cluster: up.sh refused but changed the host (< before, > after)" >&2; return 1; }
  hack/cluster/down.sh 2>/dev/null
  hack/cluster/check-clean.sh >/dev/null
  canaries fingerprint >"$CANARY_DIR/after-down"
  diff "$CANARY_DIR/before" "$CANARY_DIR/after-down" >&2 || { echo "e2e-cluster: down.sh after a refused up changed the host (< before, > after)" >&2; return 1; }
  canaries check
  canaries remove "$canary"
  echo "e2e-cluster: up.sh refuses with $canary planted and changes nothing: $out"
}

canaries plant cni-chain cgroup-proc address sysctls
refuses kube-chain "iptables chain KUBE-FOREIGN-CANARY (table filter"
refuses node-address "$NODE_NET is in use on this host ($NODE_IP/32 on lo)"
refuses kubelet "another kubelet is running (pid "
refuses containerd "another containerd is running (pid "

hack/cluster/up.sh
export_cluster_env
go test -count=1 -timeout 30m -v ./test/cluster -ginkgo.v ${E2E_CLUSTER_ARGS:-}
hack/cluster/down.sh
hack/cluster/check-clean.sh
canaries check
echo "e2e-cluster: the foreign CNI chain, cgroup process, address and sysctls survived up, the suite and down"
