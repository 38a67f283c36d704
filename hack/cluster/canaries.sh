#!/usr/bin/env bash
# Foreign objects for the host-safety test of `make e2e-cluster` (hack/cluster/e2e.sh;
# docs/cluster.md, "What it touches on the host"): what another Kubernetes
# installation or the host's owner has on a workstation, planted before up.sh and
# checked after down.sh. The state lives in $CANARY_DIR.
#
#   canaries.sh plant <canary>...   plant (and remember) these
#   canaries.sh check               every planted canary is still there, unchanged
#   canaries.sh remove [<canary>...] remove these (default: all planted), restoring sysctls
#   canaries.sh fingerprint         the host's network, iptables, cgroups and sysctls, to diff
#
# Canaries: kube-chain (KUBE-FOREIGN-CANARY in filter, jumped to from FORWARD),
# cni-chain (CNI-FOREIGN-CANARY in nat, jumped to from POSTROUTING, and in ip6tables'
# filter), cgroup-proc (a process in kubepods/foreign-canary: in the cpu and memory
# hierarchies on a cgroup v1 or hybrid host, in the unified hierarchy on cgroup v2),
# address (10.199.255.1 on lo), node-address (the node's own address,
# 10.200.0.1, on lo), kubelet and containerd (processes by those names), sysctls
# (the kubelet's sysctls at values other than the ones it wants).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/host.sh"
: "${CANARY_DIR:?set CANARY_DIR to a directory of this test run}"

CHAIN_KUBE=KUBE-FOREIGN-CANARY
CHAIN_CNI=CNI-FOREIGN-CANARY
CANARY_LABEL=lo:canary
ADDRESS=10.199.255.1
CANARY_CGROUP=kubepods/foreign-canary # where another kubelet (cgroupfs driver) puts pods
# The cgroup filesystem the cgroup-proc canary goes into; its type says the layout
# (cgroup_layout). Only for trying the unified branch on a hybrid host, whose
# /sys/fs/cgroup/unified is a cgroup2 mount without controllers:
#   CANARY_CGROUP_FS=/sys/fs/cgroup/unified canaries.sh plant cgroup-proc
CGROUP_FS=${CANARY_CGROUP_FS:-/sys/fs/cgroup}
# Everything the cluster's daemons and the CNI plugin could plausibly change.
WATCHED_SYSCTLS=("${SAVED_SYSCTLS[@]}" net.bridge.bridge-nf-call-ip6tables net.ipv4.conf.all.route_localnet
  net.ipv6.conf.all.forwarding net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait net.netfilter.nf_conntrack_tcp_be_liberal
  kernel.keys.maxkeys kernel.keys.maxbytes)
# Planted values: each but vm.panic_on_oom (0 is the only safe value) differs from
# the kubelet's, and kernel.panic and the keys' quotas from the kernel's defaults too.
PLANTED_SYSCTLS=(kernel.panic=7 kernel.panic_on_oops=0 vm.overcommit_memory=0 vm.panic_on_oom=0
  kernel.keys.root_maxkeys=999999 kernel.keys.root_maxbytes=24999999)

planted() { [ -f "$CANARY_DIR/planted" ] && grep -qx "$1" "$CANARY_DIR/planted"; }
remember() { planted "$1" || echo "$1" >>"$CANARY_DIR/planted"; }
forget() { sed -i "/^$1\$/d" "$CANARY_DIR/planted" 2>/dev/null || true; }
fail() { echo "canaries: $*" >&2; exit 1; }

watched() {
  local s
  for s in "${WATCHED_SYSCTLS[@]}"; do [ -e "$(sysctl_path "$s")" ] && echo "$s=$(sysctl_get "$s")"; done
  return 0
}

# start_named <name>: a sleeping process whose command name is <name>.
start_named() {
  mkdir -p "$CANARY_DIR/bin"
  cp "$(command -v sleep)" "$CANARY_DIR/bin/$1"
  "$CANARY_DIR/bin/$1" 86400 </dev/null >/dev/null 2>&1 &
  echo $! >"$CANARY_DIR/$1.pid"
}

# cgroup_layout: v2 when $CGROUP_FS is the unified hierarchy itself, v1 when it is a
# tmpfs of per-controller hierarchies (cgroup v1, or hybrid).
cgroup_layout() {
  if [ "$(stat -fc %T "$CGROUP_FS")" = cgroup2fs ]; then echo v2; else echo v1; fi
}

# cgroup_bases <layout>: the hierarchies the canary's cgroup goes into. On v1 the cpu
# one may be a link to a co-mounted cpu,cpuacct.
cgroup_bases() {
  if [ "$1" = v2 ]; then echo "$CGROUP_FS"; else echo "$CGROUP_FS/cpu $CGROUP_FS/memory"; fi
}

# cgroup_missing <pid> <layout>: each hierarchy in which /proc/<pid>/cgroup does not
# show <pid> in the canary's cgroup, one per line; nothing when it is in all of them.
# v2 has one line, "0::<path>"; v1 one per hierarchy, "<id>:<controllers>:<path>",
# the controllers comma-separated ("cpu,cpuacct" where they are co-mounted).
cgroup_missing() {
  local pid=$1 h
  if [ "$2" = v2 ]; then
    grep -qx "0::/$CANARY_CGROUP" "/proc/$pid/cgroup" || echo "0::/$CANARY_CGROUP"
    return 0
  fi
  for h in cpu memory; do
    awk -F: -v h="$h" -v p="/$CANARY_CGROUP" '
      $3 == p { n = split($2, c, ","); for (i = 1; i <= n; i++) if (c[i] == h) found = 1 }
      END { exit !found }' "/proc/$pid/cgroup" || echo "$h:/$CANARY_CGROUP"
  done
}

alive() { # alive <pidfile> <comm>
  local pid
  pid=$(cat "$1")
  [ "$(cat /proc/"$pid"/comm 2>/dev/null)" = "$2" ] || fail "process $2 (pid $pid) is gone"
  [ "$(awk '{print $3}' /proc/"$pid"/stat)" != Z ] || fail "process $2 (pid $pid) was killed"
}

plant() {
  local b pid layout missing
  case $1 in
  kube-chain)
    iptables -w -N "$CHAIN_KUBE"
    iptables -w -A "$CHAIN_KUBE" -j RETURN
    iptables -w -A FORWARD -j "$CHAIN_KUBE"
    ;;
  cni-chain)
    iptables -w -t nat -N "$CHAIN_CNI"
    iptables -w -t nat -A "$CHAIN_CNI" -j RETURN
    iptables -w -t nat -A POSTROUTING -s 198.51.100.7/32 -j "$CHAIN_CNI"
    if ip6tables -w -N "$CHAIN_CNI" 2>/dev/null; then
      ip6tables -w -A "$CHAIN_CNI" -j RETURN
      touch "$CANARY_DIR/cni-chain6"
    fi
    ;;
  cgroup-proc)
    layout=$(cgroup_layout)
    # Remembered before anything is made, so that remove cleans up after a plant that
    # failed half-way: it kills only this pid and removes only the directories
    # recorded in cgroup-dirs, each recorded once made.
    remember cgroup-proc
    echo "$layout" >"$CANARY_DIR/cgroup-layout"
    sleep 86400 </dev/null >/dev/null 2>&1 &
    pid=$!
    echo "$pid" >"$CANARY_DIR/cgroup-proc.pid"
    for b in $(cgroup_bases "$layout"); do
      [ -d "$b" ] || fail "no cgroup hierarchy at $b (layout $layout)"
      if [ ! -d "$b/${CANARY_CGROUP%/*}" ]; then
        mkdir "$b/${CANARY_CGROUP%/*}" || fail "cannot make cgroup $b/${CANARY_CGROUP%/*}"
        echo "$b/${CANARY_CGROUP%/*}" >>"$CANARY_DIR/cgroup-dirs"
      fi
      mkdir "$b/$CANARY_CGROUP" || fail "cannot make cgroup $b/$CANARY_CGROUP (another run's canary?)"
      echo "$b/$CANARY_CGROUP" >>"$CANARY_DIR/cgroup-dirs"
      echo "$pid" >"$b/$CANARY_CGROUP/cgroup.procs" || fail "cannot move pid $pid into $b/$CANARY_CGROUP"
    done
    missing=$(cgroup_missing "$pid" "$layout")
    [ -z "$missing" ] || fail "planted pid $pid, but /proc/$pid/cgroup lacks: ${missing//$'\n'/, }"
    ;;
  address) ip addr add "$ADDRESS/32" dev lo label "$CANARY_LABEL" ;;
  node-address) ip addr add "$NODE_IP/32" dev lo label "$CANARY_LABEL" ;;
  kubelet | containerd) start_named "$1" ;;
  sysctls)
    watched >"$CANARY_DIR/sysctls.orig"
    for kv in "${PLANTED_SYSCTLS[@]}"; do sysctl_set "${kv%%=*}" "${kv#*=}"; done
    watched >"$CANARY_DIR/sysctls.planted"
    ;;
  *) fail "unknown canary $1" ;;
  esac
  remember "$1"
}

check_one() {
  local pid missing
  case $1 in
  kube-chain)
    iptables -w -C "$CHAIN_KUBE" -j RETURN 2>/dev/null || fail "$CHAIN_KUBE or its rule is gone"
    iptables -w -C FORWARD -j "$CHAIN_KUBE" 2>/dev/null || fail "the jump from FORWARD to $CHAIN_KUBE is gone"
    ;;
  cni-chain)
    iptables -w -t nat -C "$CHAIN_CNI" -j RETURN 2>/dev/null || fail "$CHAIN_CNI (nat) or its rule is gone"
    iptables -w -t nat -C POSTROUTING -s 198.51.100.7/32 -j "$CHAIN_CNI" 2>/dev/null || fail "the jump from POSTROUTING to $CHAIN_CNI is gone"
    if [ -f "$CANARY_DIR/cni-chain6" ]; then
      ip6tables -w -C "$CHAIN_CNI" -j RETURN 2>/dev/null || fail "$CHAIN_CNI (ip6tables filter) is gone"
    fi
    ;;
  cgroup-proc)
    alive "$CANARY_DIR/cgroup-proc.pid" sleep
    pid=$(cat "$CANARY_DIR/cgroup-proc.pid")
    missing=$(cgroup_missing "$pid" "$(cat "$CANARY_DIR/cgroup-layout")")
    [ -z "$missing" ] || fail "pid $pid is no longer in ${missing//$'\n'/, }"
    ;;
  address | node-address)
    local a=$ADDRESS
    [ "$1" = node-address ] && a=$NODE_IP
    ip -4 -o addr show dev lo label "$CANARY_LABEL" | grep -q " $a/32 " || fail "address $a on lo is gone"
    ;;
  kubelet | containerd) alive "$CANARY_DIR/$1.pid" "$1" ;;
  sysctls)
    watched >"$CANARY_DIR/sysctls.now"
    diff "$CANARY_DIR/sysctls.planted" "$CANARY_DIR/sysctls.now" >&2 || fail "sysctls changed (< planted, > now)"
    ;;
  esac
}

remove_one() {
  local d
  case $1 in
  kube-chain)
    iptables -w -D FORWARD -j "$CHAIN_KUBE" 2>/dev/null || true
    iptables -w -F "$CHAIN_KUBE" 2>/dev/null || true
    iptables -w -X "$CHAIN_KUBE" 2>/dev/null || true
    ;;
  cni-chain)
    iptables -w -t nat -D POSTROUTING -s 198.51.100.7/32 -j "$CHAIN_CNI" 2>/dev/null || true
    iptables -w -t nat -F "$CHAIN_CNI" 2>/dev/null || true
    iptables -w -t nat -X "$CHAIN_CNI" 2>/dev/null || true
    if [ -f "$CANARY_DIR/cni-chain6" ]; then
      ip6tables -w -F "$CHAIN_CNI" 2>/dev/null || true
      ip6tables -w -X "$CHAIN_CNI" 2>/dev/null || true
    fi
    ;;
  cgroup-proc)
    kill -KILL "$(cat "$CANARY_DIR/cgroup-proc.pid")" 2>/dev/null || true
    # Deepest first; an emptied cgroup can take a moment to accept rmdir.
    for d in $(tac "$CANARY_DIR/cgroup-dirs" 2>/dev/null); do
      for _ in $(seq 20); do rmdir "$d" 2>/dev/null && break; [ -d "$d" ] || break; sleep 0.1; done
    done
    ;;
  address) ip addr del "$ADDRESS/32" dev lo label "$CANARY_LABEL" 2>/dev/null || true ;;
  node-address) ip addr del "$NODE_IP/32" dev lo label "$CANARY_LABEL" 2>/dev/null || true ;;
  kubelet | containerd) kill -KILL "$(cat "$CANARY_DIR/$1.pid")" 2>/dev/null || true ;;
  sysctls)
    while IFS='=' read -r k v; do sysctl_set "$k" "$v" 2>/dev/null || true; done <"$CANARY_DIR/sysctls.orig"
    ;;
  esac
  forget "$1"
}

# fingerprint: the host state up.sh must leave as it found it when it refuses.
fingerprint() {
  local s
  for s in $(ipt_saves); do echo "== $s"; "$s" 2>/dev/null | sed -E '/^#/d; s/\[[0-9]+:[0-9]+\]//' || true; done
  echo "== addresses"; ip -o addr show | sed -E 's/ +valid_lft.*//'
  echo "== links"; ip -o link show | awk '{print $2}'
  echo "== routes"; ip route show table all
  echo "== cgroups"; find /sys/fs/cgroup -mindepth 1 -maxdepth 3 -type d | sort
  echo "== sysctls"; watched
}

cmd=${1:-}
shift || true
case $cmd in
plant) for c in "$@"; do plant "$c"; done ;;
check) for c in $(cat "$CANARY_DIR/planted" 2>/dev/null); do check_one "$c"; done ;;
remove)
  [ $# -gt 0 ] || set -- $(tac "$CANARY_DIR/planted" 2>/dev/null)
  for c in "$@"; do planted "$c" && remove_one "$c"; done
  ;;
fingerprint) fingerprint ;;
*) fail "usage: canaries.sh plant <canary>... | check | remove [<canary>...] | fingerprint" ;;
esac
