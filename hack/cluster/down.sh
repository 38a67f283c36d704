#!/usr/bin/env bash
# make cluster-down: stops the local cluster and removes everything it made: its
# processes and containers, mounts, pod network namespaces, interfaces, iptables
# rules, cgroups and state. Safe to run when nothing is up. hack/cluster/check-clean.sh
# verifies the result.
set -uo pipefail
source "$(dirname "$0")/lib.sh"

stop() {
  local name=$1 f pid
  f=$(pidfile "$name")
  [ -f "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    log "stopping $name"
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$f"
}

ctr() { "$CLUSTER_BIN/ctr" --address "$CONTAINERD_SOCK" --namespace k8s.io "$@"; }

# Pods first, while containerd still runs: stop the controllers that would recreate
# them and the kubelet that would restart them, then kill every task.
for d in kube-controller-manager kube-scheduler kubelet kube-proxy; do stop "$d"; done
if running containerd; then
  for t in $(ctr tasks ls -q 2>/dev/null); do ctr tasks kill -s SIGKILL "$t" >/dev/null 2>&1; done
  sleep 1
  for t in $(ctr tasks ls -q 2>/dev/null); do ctr tasks delete -f "$t" >/dev/null 2>&1; done
fi
for d in containerd kube-apiserver etcd; do stop "$d"; done

# Shims outlive containerd by design; anything still running from our state dirs goes.
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$cg" ] || continue
  find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null | xargs -r kill -KILL 2>/dev/null
done
sleep 0.5

# Mounts below our directories, deepest first (overlay rootfs, netns, pod volumes).
for _ in 1 2 3; do
  mnts=$(awk -v s="$STATE" -v r="$RUN" '$2 ~ "^"s"(/|$)" || $2 ~ "^"r"(/|$)" {print $2}' /proc/self/mounts | sort -r)
  [ -z "$mnts" ] && break
  for m in $mnts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done

# cgroups the kubelet made (cgroupfs driver), leaves first.
for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
  [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
done

# Network: kube-proxy's rules, our FORWARD guard, the bridge and the node address.
if [ -x "$CLUSTER_BIN/kube-proxy" ] && command -v iptables >/dev/null; then
  "$CLUSTER_BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
fi
# The kubelet's own chains (KUBE-FIREWALL, the canaries) are not kube-proxy's to clean.
# drop_chains <iptables|ip6tables>: removes the jumps from built-in chains into ours,
# then flushes and deletes every KUBE-*, CNI-* and $FW_CHAIN chain in every table.
drop_chains() {
  local ipt=$1 t c rule
  command -v "$ipt-save" >/dev/null || return 0
  for t in filter nat mangle raw; do
    "$ipt-save" -t "$t" 2>/dev/null | grep -E "^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j (KUBE-|CNI-|$FW_CHAIN)" |
      while read -r rule; do eval "$ipt -w -t $t ${rule/-A /-D }" 2>/dev/null; done
    for c in $("$ipt-save" -t "$t" 2>/dev/null | sed -n -E "s/^:((KUBE-|CNI-|$FW_CHAIN)[^ ]*) .*/\1/p"); do
      "$ipt" -w -t "$t" -F "$c" 2>/dev/null
    done
    for c in $("$ipt-save" -t "$t" 2>/dev/null | sed -n -E "s/^:((KUBE-|CNI-|$FW_CHAIN)[^ ]*) .*/\1/p"); do
      "$ipt" -w -t "$t" -X "$c" 2>/dev/null
    done
  done
}
drop_chains iptables
drop_chains ip6tables
ip link del "$POD_BRIDGE" 2>/dev/null
ip addr del "$NODE_IP/32" dev lo 2>/dev/null
if [ -f "$STATE/sysctl.saved" ]; then
  # shellcheck disable=SC1091
  source "$STATE/sysctl.saved"
  echo "$ip_forward" >/proc/sys/net/ipv4/ip_forward
  echo "$bridge_nf" >/proc/sys/net/bridge/bridge-nf-call-iptables
fi

# containerd 2 keeps shim sockets and ctr's fifos under /run/containerd whatever its
# state dir; up.sh notes whether that directory was there before.
if [ -f "$STATE/run-containerd.made" ]; then rm -rf /run/containerd; fi
rm -rf "$RUN" "$STATE"
log "down"
