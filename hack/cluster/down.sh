#!/usr/bin/env bash
# make cluster-down: stops the local cluster and removes what it made, and nothing
# else: its processes and containers, the processes in its own cgroup root, mounts
# below its directories, and the interfaces, iptables chains and directories that
# up.sh recorded as its own (hack/cluster/host.sh); it puts the sysctls back. Safe to
# run when nothing is up. It keeps the record of the host before up, which
# hack/cluster/check-clean.sh compares against and then removes.
set -uo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/host.sh"

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

# Shims outlive containerd by design: ours are the ones serving our socket. Then
# anything left in the cluster's own cgroup root (nobody else's: up.sh refused to
# start if that root existed).
killed=$(pgrep -f "containerd-shim-runc-v2 .*-address $CONTAINERD_SOCK" 2>/dev/null)
for cg in $(cgroup_roots); do
  [ -d "$cg" ] && killed+=" $(find "$cg" -name cgroup.procs -exec cat {} + 2>/dev/null)"
done
if [ -n "${killed// /}" ]; then
  kill -KILL $killed 2>/dev/null
  sleep 0.5
fi

# Mounts below our directories, deepest first (overlay rootfs, netns, pod volumes).
for _ in 1 2 3; do
  mnts=$(awk -v s="$STATE" -v r="$RUN" '$2 ~ "^"s"(/|$)" || $2 ~ "^"r"(/|$)" {print $2}' /proc/self/mounts | sort -r)
  [ -z "$mnts" ] && break
  for m in $mnts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
done

# The cgroup root, leaves first (the kubelet's kubepods tree and the pods' cgroups).
if owns cgroups; then
  for cg in $(cgroup_roots); do
    [ -d "$cg" ] && find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null
  done
fi

# drop_chains <iptables|ip6tables> <regex>: removes the jumps from built-in chains
# into chains whose whole names match, then flushes and deletes those chains, in every
# table.
drop_chains() {
  local ipt=$1 re=$2 t c rule
  command -v "$ipt-save" >/dev/null || return 0
  for t in filter nat mangle raw; do
    "$ipt-save" -t "$t" 2>/dev/null | grep -E "^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j ($re)( |$)" |
      while read -r rule; do eval "$ipt -w -t $t ${rule/-A /-D }" 2>/dev/null; done
    for c in $("$ipt-save" -t "$t" 2>/dev/null | sed -n -E "s/^:($re) .*/\1/p"); do
      "$ipt" -w -t "$t" -F "$c" 2>/dev/null
    done
    for c in $("$ipt-save" -t "$t" 2>/dev/null | sed -n -E "s/^:($re) .*/\1/p"); do
      "$ipt" -w -t "$t" -X "$c" 2>/dev/null
    done
  done
}
# The KUBE-* chains of our kubelet and kube-proxy: up.sh refused to start while any
# existed, so every one there is now is theirs. Not `kube-proxy --cleanup`, which
# would also clear IPVS and nftables state that is not ours.
if owns kube-chains; then
  drop_chains iptables 'KUBE-[^ ]+'
  drop_chains ip6tables 'KUBE-[^ ]+'
fi
if owns fw-chain; then drop_chains iptables "$FW_CHAIN"; fi
if owns bridge; then ip link del "$POD_BRIDGE" 2>/dev/null; fi
if owns node-ip; then ip addr del "$NODE_IP/32" dev lo label "$NODE_IP_LABEL" 2>/dev/null; fi

# The kubelet links every container's log into /var/log/containers (not configurable):
# our links point into our state.
if [ -d /var/log/containers ]; then
  find /var/log/containers -maxdepth 1 -type l -lname "$STATE/*" -delete 2>/dev/null
  if owns var-log-containers; then rmdir /var/log/containers 2>/dev/null; fi
fi
# The kubelet's device-plugin socket (not configurable; up.sh refused to start if
# /var/lib/kubelet existed).
if owns var-lib-kubelet; then rm -rf /var/lib/kubelet; fi
# containerd's CNI library caches each sandbox's results in /var/lib/cni/results: ours
# are those of our network, and the loopback results of the same sandboxes.
if owns var-lib-cni; then
  rm -rf /var/lib/cni
elif [ -d /var/lib/cni/results ]; then
  for f in /var/lib/cni/results/outbox-pods-*; do
    [ -e "$f" ] || continue
    id=${f#/var/lib/cni/results/outbox-pods-}
    id=${id%-*}
    rm -f "$f" "/var/lib/cni/results/cni-loopback-$id-lo"
  done
fi
# containerd 2 keeps shim sockets and ctr's fifos under /run/containerd whatever its
# state dir.
if owns run-containerd; then rm -rf /run/containerd; fi

rc=0
if owns sysctls && ! restore_sysctls; then
  log "sysctls not restored: keeping $OWNED so the next down tries again"
  rc=1
fi
[ -f "$RUN/$MARKER" ] && rm -rf "$RUN"
if [ -f "$STATE/$MARKER" ] && [ "$rc" = 0 ]; then
  # Everything but the marker and the record of the host before up (check-clean.sh's).
  find "$STATE" -mindepth 1 -maxdepth 1 ! -name "$MARKER" ! -name "$(basename "$HOST_BEFORE")" -exec rm -rf {} +
fi
log "down"
exit "$rc"
