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

# supported prints why this host cannot run the cluster and fails, or succeeds quietly.
supported() {
  if [ "$(id -u)" != 0 ]; then echo "needs root (kubelet, containerd, network namespaces)"; return 1; fi
  if [ "$(uname -s)" != Linux ]; then echo "needs Linux"; return 1; fi
  if [ ! -d /sys/fs/cgroup/memory ] && [ ! -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "no memory cgroup controller mounted"; return 1
  fi
  if ! ip link add outbox-probe0 type bridge 2>/dev/null; then echo "cannot create a bridge (ip link add type bridge)"; return 1; fi
  ip link del outbox-probe0
  if [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then echo "no br_netfilter (/proc/sys/net/bridge missing)"; return 1; fi
  return 0
}
