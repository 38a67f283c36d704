#!/usr/bin/env bash
# make demo: the demo (hack/demo) on the local one-node cluster where this host can run
# it, taken down again when the demo ends; elsewhere, or with DEMO_CLUSTER=off, the
# process-pod fallback, which says that it is one and why.
set -euo pipefail
cd "$(dirname "$0")/../.."
source hack/cluster/lib.sh

why=""
if [ "${DEMO_CLUSTER:-auto}" = off ]; then
  why="DEMO_CLUSTER=off"
elif ! why=$(supported); then
  why="this host cannot run the cluster: $why"
else
  source hack/cluster/host.sh
  hack/cluster/down.sh >/dev/null 2>&1 || true
  hack/cluster/check-clean.sh >/dev/null 2>&1 || true
  if ! why=$(preflight); then why="hack/cluster/up.sh would refuse to start: $why"; else why=""; fi
fi
if [ -n "$why" ]; then
  DEMO_FALLBACK_REASON=$why exec go run ./hack/demo
fi

make --no-print-directory cluster-deps cluster-assets cluster-images >&2
trap 'hack/cluster/down.sh && hack/cluster/check-clean.sh >/dev/null' EXIT
hack/cluster/up.sh >/dev/null
export_cluster_env
go run ./hack/demo
