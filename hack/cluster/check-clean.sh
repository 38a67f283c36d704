#!/usr/bin/env bash
# Verifies that `make cluster-down` left nothing behind: no processes of the cluster,
# no mounts or pod network namespaces below its directories, no interfaces, no
# iptables rules of kube-proxy, CNI or our guard, no kubelet cgroups. Exits 1 and names
# each leftover otherwise.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
dirty=0
leftover() { echo "cluster-down left behind: $*" >&2; dirty=1; }

for p in "$CLUSTER_BIN/kubelet" "$CLUSTER_BIN/kube-proxy" "$CLUSTER_BIN/kube-scheduler" \
  "$CLUSTER_BIN/kube-controller-manager" "$CLUSTER_BIN/containerd" "containerd-shim-runc-v2 .*$CONTAINERD_SOCK" \
  "kube-apiserver .*--secure-port $APISERVER_PORT" "etcd .*$STATE/etcd"; do
  pids=$(pgrep -f "$p" | grep -vx "$$" || true)
  [ -n "$pids" ] && leftover "process $p (pids $(echo $pids))"
done
m=$(awk -v s="$STATE" -v r="$RUN" '$2 ~ "^"s"(/|$)" || $2 ~ "^"r"(/|$)" {print $2}' /proc/self/mounts)
[ -n "$m" ] && leftover "mounts: $(echo $m)"
[ -e "$STATE" ] && leftover "directory $STATE"
[ -e "$RUN" ] && leftover "directory $RUN"
ip link show "$POD_BRIDGE" >/dev/null 2>&1 && leftover "interface $POD_BRIDGE"
ip -4 -o addr show dev lo | grep -q " $NODE_IP/32 " && leftover "address $NODE_IP on lo"
v=$(ip -o link show type veth 2>/dev/null | grep -c "master $POD_BRIDGE" || true)
[ "${v:-0}" != 0 ] && leftover "$v veth interfaces on $POD_BRIDGE"
for ipt in iptables ip6tables; do
  command -v "$ipt-save" >/dev/null || continue
  r=$("$ipt-save" 2>/dev/null | grep -E "KUBE-|CNI-|$FW_CHAIN" | head -5)
  [ -n "$r" ] && leftover "$ipt rules: $(echo $r)"
done
for cg in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do [ -d "$cg" ] && leftover "cgroup $cg"; done
[ "$dirty" = 0 ] && echo "cluster-down: clean (no processes, mounts, network namespaces, interfaces, iptables rules or cgroups left)"
exit "$dirty"
