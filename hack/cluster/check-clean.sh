#!/usr/bin/env bash
# Verifies that `make cluster-down` left nothing behind: no processes of the cluster,
# no mounts below its directories, no directories, no interfaces, veths or node
# address, no iptables chain of its kubelet, kube-proxy or FORWARD guard, no cgroups
# in its cgroup root, no container log links, and every sysctl it changed back to its
# value before up (the record down.sh keeps). Exits 1 and names each leftover
# otherwise; on success it removes that record, the last thing of the cluster.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/host.sh"
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
[ -e "$RUN" ] && leftover "directory $RUN"
if [ -f "$STATE/$MARKER" ]; then
  extra=$(find "$STATE" -mindepth 1 -maxdepth 1 ! -name "$MARKER" ! -name "$(basename "$HOST_BEFORE")" | head -5)
  [ -n "$extra" ] && leftover "in $STATE: $(echo $extra)"
fi
ip link show "$POD_BRIDGE" >/dev/null 2>&1 && leftover "interface $POD_BRIDGE"
[ -n "$(ip -4 -o addr show dev lo label "$NODE_IP_LABEL")" ] && leftover "address $NODE_IP on lo ($NODE_IP_LABEL)"
v=$(ip -o link show type veth 2>/dev/null | grep -c "master $POD_BRIDGE" || true)
[ "${v:-0}" != 0 ] && leftover "$v veth interfaces on $POD_BRIDGE"
r=$(chains "$FW_CHAIN\$" | head -3)
[ -n "$r" ] && leftover "iptables chains: $(echo $r)"
for cg in $(cgroup_roots); do [ -d "$cg" ] && leftover "cgroup $cg"; done
l=$(find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" 2>/dev/null | head -3)
[ -n "$l" ] && leftover "container log links: $(echo $l)"
l=$(find /var/lib/cni/results -maxdepth 1 -name 'outbox-pods-*' 2>/dev/null | head -3)
[ -n "$l" ] && leftover "CNI results: $(echo $l)"

# Against the host as it was before up: no KUBE-* chain (up.sh refuses to start
# otherwise), the same sysctls, and nothing where nothing was.
compared=""
if [ -f "$HOST_BEFORE" ]; then
  compared=", sysctls as before up"
  r=$(chains 'KUBE-' | head -3)
  [ -n "$r" ] && leftover "iptables chains: $(echo $r)"
  while read -r kind name val; do
    case $kind in
    sysctl) now=$(sysctl_get "$name"); [ "$now" != "$val" ] && leftover "sysctl $name=$now (it was $val before up)" ;;
    absent) [ -e "$name" ] && leftover "$name (it did not exist before up)" ;;
    esac
  done <"$HOST_BEFORE"
fi
[ "$dirty" = 0 ] || exit 1
if [ -f "$STATE/$MARKER" ]; then rm -f "$HOST_BEFORE" "$STATE/$MARKER" && rmdir "$STATE"; fi
echo "cluster-down: clean (no processes, mounts, directories, interfaces, iptables chains, cgroups or log links left$compared)"
