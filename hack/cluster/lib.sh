# Shared settings of the local one-node cluster (sourced by every script here).
# Everything lives on this machine: the node's address is on the loopback interface
# (this kernel has no dummy interfaces), pods
# sit on their own bridge with routes only to the node and the service range, and
# forwarding between the bridge and any other interface is dropped. Nothing is routed
# off the machine.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
STATE=${CLUSTER_STATE_DIR:-/var/lib/outbox-cluster}
RUN=${CLUSTER_RUN_DIR:-/run/outbox-cluster}
K8S_BIN=${ENVTEST_ASSETS_DIR:-$ROOT/bin/k8s}
CLUSTER_BIN=${CLUSTER_BIN_DIR:-$ROOT/bin/cluster}
IMAGES=${IMAGES_DIR:-$ROOT/bin/images}

NODE_NAME=outbox-node
NODE_NET=10.200.0.0/24       # the node's range: up.sh refuses to start when any of it is in use
NODE_IP=10.200.0.1           # apiserver, kubelet, and the host services pods reach
NODE_IP_LABEL=lo:outbox      # the node address sits on lo under this label
POD_BRIDGE=outbox-br0
POD_CIDR=10.201.0.0/24
POD_GATEWAY=10.201.0.1
SERVICE_CIDR=10.202.0.0/24
SERVICE_IP=10.202.0.1        # the `kubernetes` Service
APISERVER_PORT=16443
ETCD_PORT=23790
ETCD_PEER_PORT=23800
FW_CHAIN=OUTBOX-CLUSTER      # our FORWARD guard
CGROUP_ROOT=/outbox-cluster  # the kubelet's cgroupRoot: pods live in <hierarchy>/outbox-cluster/kubepods
KUBECONFIG_ADMIN=$STATE/admin.kubeconfig
CONTAINERD_SOCK=$RUN/containerd.sock

# The order up.sh starts the daemons in; down.sh stops them in reverse.
DAEMONS=(etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy)

log() { printf 'cluster: %s\n' "$*" >&2; }

pidfile() { echo "$RUN/$1.pid"; }

running() {
  local f
  f=$(pidfile "$1")
  [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null
}

kubectl_admin() { "$CLUSTER_BIN/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

# export_cluster_env hands the cluster to a Go program (internal/testenv/clusterstack
# reads these).
export_cluster_env() {
  export OUTBOX_CLUSTER_KUBECONFIG=$KUBECONFIG_ADMIN OUTBOX_CLUSTER_KUBECTL=$CLUSTER_BIN/kubectl \
    OUTBOX_CLUSTER_CTR=$CLUSTER_BIN/ctr OUTBOX_CLUSTER_CONTAINERD_SOCK=$CONTAINERD_SOCK \
    OUTBOX_CLUSTER_NODE_IP=$NODE_IP OUTBOX_CLUSTER_POD_CIDR=$POD_CIDR
}

# cgroup_v2: the unified hierarchy alone is mounted at /sys/fs/cgroup (cgroup v2). On
# cgroup v1 and hybrid hosts /sys/fs/cgroup is a tmpfs with one directory per
# hierarchy (hybrid: the unified one too, at /sys/fs/cgroup/unified, without
# controllers).
cgroup_v2() { [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; }

# cgroup_unsupported prints why the kubelet cannot run in a cgroup root of its own
# here without changing the host's cgroups, and succeeds; fails when it can.
cgroup_unsupported() {
  local c missing=""
  if ! cgroup_v2; then
    # What the kubelet checks on cgroup v1 before it starts (validateSystemRequirements).
    for c in cpu cpuacct cpuset memory; do
      awk -v c="$c" '$3 == "cgroup" { n = split($4, o, ","); for (i = 1; i <= n; i++) if (o[i] == c) f = 1 } END { exit !f }' /proc/self/mounts ||
        missing+=" $c"
    done
    [ -z "$missing" ] && return 1
    echo "cgroup v1: the kubelet needs the cpu, cpuacct, cpuset and memory controllers mounted; not mounted:$missing"
    return 0
  fi
  if ! grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    echo "cgroup v2: no memory controller (not in /sys/fs/cgroup/cgroup.controllers)"
    return 0
  fi
  # runc and the kubelet (the cgroupfs driver, opencontainers/cgroups' fs2) write every
  # controller of the root's cgroup.controllers into the cgroup.subtree_control of each
  # ancestor of the cgroups they make, the host's root included, and the kubelet
  # refuses a cgroup root lacking any of cpu, cpuset, memory, hugetlb and pids. Where
  # the root already delegates them all, those writes change nothing; otherwise they
  # would switch controllers on for the whole host, and nothing would switch them off.
  for c in $(cat /sys/fs/cgroup/cgroup.controllers); do
    grep -qw "$c" /sys/fs/cgroup/cgroup.subtree_control || missing+=" $c"
  done
  [ -z "$missing" ] && return 1
  echo "cgroup v2: the root cgroup does not delegate$missing (not in /sys/fs/cgroup/cgroup.subtree_control); runc and the kubelet would enable them there for the whole host and nothing would disable them"
  return 0
}

# supported prints why this host cannot run the cluster and fails, or succeeds quietly.
supported() {
  local why
  if [ "$(id -u)" != 0 ]; then echo "needs root (kubelet, containerd, network namespaces)"; return 1; fi
  if [ "$(uname -s)" != Linux ]; then echo "needs Linux"; return 1; fi
  if why=$(cgroup_unsupported); then echo "$why"; return 1; fi
  if ! ip link add outbox-probe0 type bridge 2>/dev/null; then echo "cannot create a bridge (ip link add type bridge)"; return 1; fi
  ip link del outbox-probe0
  if [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then echo "no br_netfilter (/proc/sys/net/bridge missing)"; return 1; fi
  return 0
}
