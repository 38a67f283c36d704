#!/usr/bin/env bash
# make e2e-cluster: brings the local one-node cluster up (building what it needs once),
# runs test/cluster against it, takes it down and checks that nothing is left. Where
# this host cannot run a kubelet it prints one line saying why and succeeds, so
# `make test` stays green on such hosts; E2E_CLUSTER=require turns that into a failure,
# E2E_CLUSTER=skip skips on purpose.
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/cluster/lib.sh

case "${E2E_CLUSTER:-auto}" in
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
if ! why=$(supported); then
  if [ "${E2E_CLUSTER:-auto}" = require ]; then
    echo "e2e-cluster: FAILED: this host cannot run the cluster: $why" >&2
    exit 1
  fi
  echo "e2e-cluster: SKIPPED: this host cannot run the cluster: $why"
  exit 0
fi

make --no-print-directory cluster-deps cluster-assets cluster-images >&2
start=$(date +%s)
finish() {
  rc=$?
  if [ "$rc" != 0 ] && [ -d "$STATE/logs" ]; then
    echo "e2e-cluster: failed; last lines of the kubelet and containerd logs:" >&2
    tail -n 15 "$STATE/logs/kubelet.log" "$STATE/logs/containerd.log" >&2 || true
  fi
  hack/cluster/down.sh
  hack/cluster/check-clean.sh || rc=1
  echo "e2e-cluster: done in $(($(date +%s) - start))s (exit $rc)"
  exit "$rc"
}
trap finish EXIT
# A cluster left by an interrupted run would carry old state: start from nothing.
hack/cluster/down.sh >/dev/null 2>&1
hack/cluster/up.sh

export_cluster_env
go test -count=1 -timeout 30m -v ./test/cluster -ginkgo.v ${E2E_CLUSTER_ARGS:-}
