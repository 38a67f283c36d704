# What the local cluster may touch on this host, and how it knows what is its own
# (sourced after lib.sh by up.sh, down.sh and check-clean.sh; docs/cluster.md, "What
# it touches on the host").
#
# - up.sh refuses to start (one line saying why, exit 4) when the host holds anything
#   of another installation that the cluster's daemons would share or that down.sh
#   could not tell from its own: another kubelet or containerd, iptables chains named
#   KUBE-* (kube-proxy's and the kubelet's chain names cannot be changed) or an
#   nftables-mode kube-proxy's table (ours would delete it when it starts), addresses
#   or routes in its ranges, a route covering them (a VPN's 10.0.0.0/8), its listening
#   ports taken, or its own names (state directories, bridge, FORWARD guard, cgroup
#   root) made by someone else.
# - Before it creates a host object, up.sh records it in $OWNED; down.sh removes only
#   what is recorded there, and the processes in the cluster's own cgroup root.
# - $HOST_BEFORE records the sysctls the cluster changes, as they were before up;
#   down.sh puts them back and check-clean.sh compares against it, then removes it.

OWNED=$STATE/owned
HOST_BEFORE=$STATE/host-before
MARKER=.outbox-cluster # in $STATE and $RUN: "made by this cluster"

# The kubelet runs with protectKernelDefaults: it refuses to start unless these hold,
# and never sets them itself. up.sh sets them, down.sh restores the host's values.
KUBELET_SYSCTLS=(vm.overcommit_memory=1 vm.panic_on_oom=0 kernel.panic=10 kernel.panic_on_oops=1
  kernel.keys.root_maxkeys=1000000 kernel.keys.root_maxbytes=25000000)
# Services backed by pods on the same bridge need bridged traffic to see iptables.
NET_SYSCTLS=(net.bridge.bridge-nf-call-iptables=1)
# Saved before up and restored by down: the above, and ip_forward, which the CNI
# bridge plugin turns on when the first pod starts.
SAVED_SYSCTLS=(net.ipv4.ip_forward "${NET_SYSCTLS[@]%%=*}" "${KUBELET_SYSCTLS[@]%%=*}")
# The TCP ports the daemons listen on (etcd, apiserver, controller-manager, scheduler,
# kubelet, kube-proxy).
PORTS=("$ETCD_PORT" "$ETCD_PEER_PORT" "$APISERVER_PORT" 10257 10259 10248 10250 10249 10256)

own() { mkdir -p "$OWNED" && echo "${2:-}" >"$OWNED/$1"; }
owns() { [ -f "$OWNED/$1" ]; }

sysctl_path() { echo "/proc/sys/${1//.//}"; }
sysctl_get() { cat "$(sysctl_path "$1")"; }
sysctl_set() { echo "$2" >"$(sysctl_path "$1")"; }

# cgroup_roots prints the cluster's cgroup root in every hierarchy: one directory per
# cgroup v1 hierarchy (hybrid hosts: also the unified one), or one on cgroup v2.
cgroup_roots() {
  awk -v n="${CGROUP_ROOT#/}" '$3 == "cgroup" || $3 == "cgroup2" {print $2 "/" n}' /proc/self/mounts
}

# ipt_saves prints the iptables-save commands of every backend present: a foreign
# cluster may use the other one (iptables-legacy vs iptables-nft).
ipt_saves() {
  local c
  for c in iptables-save ip6tables-save iptables-legacy-save ip6tables-legacy-save iptables-nft-save ip6tables-nft-save; do
    command -v "$c" >/dev/null 2>&1 && echo "$c"
  done
}

# chains <regex>: "<save command> <table> <chain>" for every chain whose name matches.
chains() {
  local s
  for s in $(ipt_saves); do
    "$s" 2>/dev/null | awk -v s="$s" -v re="^($1)" '/^\*/ {t = substr($0, 2)} /^:/ {c = substr($1, 2); if (c ~ re) print s, t, c}'
  done
}

# foreign_daemon <name>: the first process called <name> that is not one of ours.
foreign_daemon() {
  local pid ours
  ours=$(cat "$RUN"/*.pid 2>/dev/null || true)
  for pid in $(pgrep -x "$1"); do
    grep -qx "$pid" <<<"$ours" && continue
    # A killed process its parent has not reaped yet is not running.
    [ "$(awk '{print $3}' /proc/"$pid"/stat 2>/dev/null)" = Z ] && continue
    echo "pid $pid: $(tr '\0' ' ' </proc/"$pid"/cmdline 2>/dev/null | sed 's/ *$//' | cut -c1-100)"
    return 0
  done
  return 1
}

# foreign_daemons prints why another kubelet or containerd rules this cluster out.
foreign_daemons() {
  local d p
  for d in kubelet containerd; do
    if p=$(foreign_daemon "$d"); then
      echo "another $d is running ($p); this cluster would share the node's cgroups, ports and iptables chains with it"
      return 0
    fi
  done
  return 1
}

# covering_route <cidr>: the first route, in any table, whose prefix holds all of
# <cidr> (a VPN's 10.0.0.0/8, a LAN's 10.200.0.0/16), and succeeds; fails when there
# is none. A default route covers everything and says nothing about who uses the
# range, so it does not count (in any table: a full-tunnel VPN's default route in its
# own table neither).
covering_route() {
  ip -4 route show table all match "$1" | awk '
    # The destination is the first word, or the second after a route type.
    { d = $1; if (d ~ /^(unicast|local|broadcast|multicast|throw|unreachable|prohibit|blackhole|nat|anycast)$/) d = $2 }
    d != "default" && d != "0.0.0.0/0" { sub(/ +$/, ""); print; found = 1; exit }
    END { exit !found }'
}

# preflight prints the first reason this host's state rules out a fresh start and
# fails, or succeeds quietly. Run before anything is created.
preflight() {
  local d c r cidr a p
  for d in "$STATE" "$RUN"; do
    if [ -e "$d" ] && [ ! -f "$d/$MARKER" ]; then
      echo "$d exists and was not made by this cluster (no $MARKER in it); set CLUSTER_STATE_DIR/CLUSTER_RUN_DIR elsewhere"
      return 1
    fi
  done
  if r=$(foreign_daemons); then echo "$r"; return 1; fi
  c=$(chains 'KUBE-' | head -1)
  if [ -n "$c" ]; then
    set -- $c
    echo "iptables chain $3 (table $2, $1) belongs to another Kubernetes installation: kube-proxy's and the kubelet's KUBE-* chain names are fixed, so this cluster would share them and could not remove its own"
    return 1
  fi
  # Our kube-proxy (iptables mode) deletes the nftables table of an nftables-mode
  # kube-proxy when it starts.
  if command -v nft >/dev/null 2>&1 && c=$(nft list tables 2>/dev/null | grep -E '^table (ip|ip6) kube-proxy$' | head -1) && [ -n "$c" ]; then
    echo "nftables $c belongs to another Kubernetes installation: this cluster's kube-proxy would delete it when it starts"
    return 1
  fi
  c=$(chains "$FW_CHAIN\$" | head -1)
  if [ -n "$c" ]; then set -- $c; echo "iptables chain $3 (table $2) exists and was not made by this cluster"; return 1; fi
  for cidr in "$NODE_NET" "$POD_CIDR" "$SERVICE_CIDR"; do
    a=$(ip -4 -o addr show to "$cidr" | awk '{print $4 " on " $2; exit}')
    [ -z "$a" ] && a=$(ip -4 route show table all root "$cidr" | head -1)
    if [ -n "$a" ]; then
      echo "$cidr is in use on this host ($a); the cluster needs $NODE_NET, $POD_CIDR and $SERVICE_CIDR to itself"
      return 1
    fi
    if a=$(covering_route "$cidr"); then
      echo "route $a covers $cidr: that network (a VPN's, a LAN's) would lose these addresses to the cluster; the cluster needs $NODE_NET, $POD_CIDR and $SERVICE_CIDR to itself"
      return 1
    fi
  done
  # The kubelet keeps its device-plugin socket in /var/lib/kubelet/device-plugins
  # whatever its root dir, and clears that directory when it starts.
  if [ -e /var/lib/kubelet ]; then
    echo "/var/lib/kubelet exists: another kubelet's state, whose device-plugins directory this cluster's kubelet would take over"
    return 1
  fi
  if ip link show "$POD_BRIDGE" >/dev/null 2>&1; then echo "interface $POD_BRIDGE exists and was not made by this cluster"; return 1; fi
  for d in $(cgroup_roots); do
    if [ -d "$d" ]; then echo "cgroup $d exists and was not made by this cluster"; return 1; fi
  done
  for p in "${PORTS[@]}"; do
    a=$(ss -Hltnp "sport = :$p" 2>/dev/null | head -1)
    if [ -n "$a" ]; then echo "TCP port $p, which the cluster listens on, is taken ($(echo $a))"; return 1; fi
  done
  return 0
}

# claim_host records the host as it is before a fresh start and what up.sh is about
# to create, after preflight found none of it in use.
claim_host() {
  local s
  mkdir -p "$STATE" "$RUN"
  touch "$STATE/$MARKER" "$RUN/$MARKER"
  {
    for s in "${SAVED_SYSCTLS[@]}"; do echo "sysctl $s $(sysctl_get "$s")"; done
    for s in /var/log/containers /run/containerd /var/lib/kubelet /var/lib/cni; do [ -e "$s" ] || echo "absent $s"; done
  } >"$HOST_BEFORE.tmp"
  mv "$HOST_BEFORE.tmp" "$HOST_BEFORE"
  own kube-chains # preflight found no KUBE-* chain: every one from now on is our kubelet's or kube-proxy's
  own bridge
  own fw-chain
  own node-ip
  [ -e /var/log/containers ] || own var-log-containers
  own var-lib-kubelet # preflight found none
  # containerd's CNI library caches each pod's result in /var/lib/cni/results.
  [ -e /var/lib/cni ] || own var-lib-cni
  # containerd puts its shim sockets under /run/containerd/s whatever its state dir.
  [ -e /run/containerd ] || own run-containerd
}

# set_sysctls sets what the kubelet and the network need (claim_host saved the
# host's values first).
set_sysctls() {
  local kv
  own sysctls
  for kv in "${KUBELET_SYSCTLS[@]}" "${NET_SYSCTLS[@]}"; do sysctl_set "${kv%%=*}" "${kv#*=}"; done
}

# restore_sysctls puts back the values of $HOST_BEFORE; fails naming any it could not.
restore_sysctls() {
  local kind name val bad=0
  [ -f "$HOST_BEFORE" ] || return 0
  while read -r kind name val; do
    [ "$kind" = sysctl ] || continue
    sysctl_set "$name" "$val" 2>/dev/null
    if [ "$(sysctl_get "$name")" != "$val" ]; then log "could not restore sysctl $name to $val"; bad=1; fi
  done <"$HOST_BEFORE"
  return "$bad"
}

# make_cgroup_roots creates the cluster's cgroup root (the kubelet's cgroupRoot) in
# every hierarchy; pods live below it in <root>/kubepods.
make_cgroup_roots() {
  local d parent c
  own cgroups
  for d in $(cgroup_roots); do
    [ -d "$d" ] && continue
    mkdir "$d"
    parent=$(dirname "$d")
    # cgroup v1 cpuset: a new cgroup starts with no CPUs and no memory nodes.
    if [ -f "$d/cpuset.cpus" ]; then
      cat "$parent/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$parent/cpuset.mems" >"$d/cpuset.mems"
    fi
    # cgroup v2: hand the controllers the root delegates on to the pods' cgroups.
    if [ -f "$d/cgroup.subtree_control" ]; then
      for c in $(cat "$d/cgroup.controllers"); do echo "+$c" >"$d/cgroup.subtree_control" 2>/dev/null || true; done
    fi
  done
}
