#!/usr/bin/env bash
# make cluster-up: a one-node Kubernetes cluster on this machine (docs/cluster.md).
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd + runc,
# kubelet and kube-proxy run as local processes; pods are real containers from the
# images of `make images`, imported into containerd. Idempotent: a second run starts
# only what is not running. The admin kubeconfig path is printed on the last line.
# It refuses to start (exit 4, one line saying why) on a host whose state it would
# share with another installation (hack/cluster/host.sh).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/host.sh"
source "$(dirname "$0")/pki.sh"
source "$(dirname "$0")/configs.sh"

if ! why=$(supported); then
  log "this host cannot run the cluster: $why"
  exit 3
fi
for t in runc iptables conntrack openssl /usr/lib/cni/bridge /usr/lib/cni/host-local /usr/lib/cni/loopback; do
  command -v "$t" >/dev/null 2>&1 || [ -x "$t" ] || { log "missing $t (make cluster-deps installs it)"; exit 1; }
done
for b in "$K8S_BIN"/{etcd,kube-apiserver} "$CLUSTER_BIN"/{kubectl,kubelet,kube-controller-manager,kube-scheduler,kube-proxy,containerd,containerd-shim-runc-v2,ctr}; do
  [ -x "$b" ] || { log "missing $b (make cluster-up builds it)"; exit 1; }
done
for i in manager relayworker devbroker pause; do
  [ -f "$IMAGES/$i.tar" ] || { log "missing $IMAGES/$i.tar (make images cluster-images)"; exit 1; }
done

# start <name> <command...>: run a daemon in its own session unless it already runs.
start() {
  local name=$1
  shift
  if running "$name"; then return 0; fi
  log "starting $name (log: $STATE/logs/$name.log)"
  setsid "$@" >>"$STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$(pidfile "$name")"
}

# wait_for <what> <seconds> <command...>: poll until the command succeeds.
wait_for() {
  local what=$1 secs=$2
  shift 2
  for _ in $(seq $((secs * 4))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.25
  done
  log "$what not up after ${secs}s; last lines of its log:"
  tail -n 20 "$STATE/logs/$what.log" >&2 || true
  exit 1
}

# network_up adds the node address and the FORWARD guard (claim_host recorded both).
network_up() {
  if ! ip -4 -o addr show dev lo | grep -q " $NODE_IP/32 "; then
    ip addr add "$NODE_IP/32" dev lo label "$NODE_IP_LABEL"
  fi
  # The CNI bridge turns on forwarding; nothing may be forwarded between the pod
  # bridge and any other interface.
  iptables -w -N "$FW_CHAIN" 2>/dev/null || iptables -w -F "$FW_CHAIN"
  iptables -w -A "$FW_CHAIN" -i "$POD_BRIDGE" -o "$POD_BRIDGE" -j RETURN
  iptables -w -A "$FW_CHAIN" -i "$POD_BRIDGE" -j DROP
  iptables -w -A "$FW_CHAIN" -o "$POD_BRIDGE" -j DROP
  iptables -w -C FORWARD -j "$FW_CHAIN" 2>/dev/null || iptables -w -I FORWARD 1 -j "$FW_CHAIN"
}

refuse() {
  log "refusing to start: $1"
  exit 4
}

if [ -d "$OWNED" ]; then
  # A cluster of ours is (partly) up: start what is missing.
  if why=$(foreign_daemons); then refuse "$why"; fi
else
  if ! why=$(preflight); then refuse "$why"; fi
  claim_host
fi
mkdir -p "$STATE/logs" "$STATE/etcd"
network_up
set_sysctls
make_cgroup_roots
make_pki
write_configs
PKI=$STATE/pki

start etcd "$K8S_BIN/etcd" --name outbox-local --data-dir "$STATE/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "outbox-local=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" \
  --unsafe-no-fsync --quota-backend-bytes 2147483648

start kube-apiserver "$K8S_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
  --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --client-ca-file "$PKI/ca.crt" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --service-cluster-ip-range "$SERVICE_CIDR" \
  --service-account-issuer https://kubernetes.default.svc \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --kubelet-preferred-address-types InternalIP \
  --authorization-mode Node,RBAC --profiling=false
wait_for kube-apiserver 90 kubectl_admin get --raw /readyz

start kube-controller-manager "$CLUSTER_BIN/kube-controller-manager" \
  --kubeconfig "$STATE/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$STATE/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$STATE/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false \
  --use-service-account-credentials \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key"

start kube-scheduler "$CLUSTER_BIN/kube-scheduler" \
  --kubeconfig "$STATE/scheduler.kubeconfig" \
  --authentication-kubeconfig "$STATE/scheduler.kubeconfig" \
  --authorization-kubeconfig "$STATE/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --leader-elect=false

start containerd env PATH="$CLUSTER_BIN:$PATH" "$CLUSTER_BIN/containerd" --config "$STATE/containerd.toml"
# ctr warns on every call that cgroup v1 is deprecated; keep the rest of stderr.
ctr() { "$CLUSTER_BIN/ctr" --address "$CONTAINERD_SOCK" --namespace k8s.io "$@" 2> >(grep -v "DEPRECATION: The support for cgroup v1" >&2); }
wait_for containerd 60 ctr version

# Imports are idempotent: a rebuilt image replaces the old one under the same name.
for i in manager relayworker devbroker pause; do
  ctr images import "$IMAGES/$i.tar" >/dev/null
done
# The pause image is the sandbox of every pod: keep the kubelet from collecting it.
ctr images label docker.io/library/outbox-pause:dev io.cri-containerd.pinned=pinned >/dev/null

start kubelet "$CLUSTER_BIN/kubelet" --config "$STATE/kubelet.yaml" \
  --kubeconfig "$STATE/kubelet.kubeconfig" --root-dir "$STATE/kubelet" --cert-dir "$STATE/kubelet/pki" \
  --node-ip "$NODE_IP" --hostname-override "$NODE_NAME"
start kube-proxy "$CLUSTER_BIN/kube-proxy" --config "$STATE/kube-proxy.yaml"

wait_for kubelet 120 kubectl_admin wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
log "node $NODE_NAME is Ready; KUBECONFIG=$KUBECONFIG_ADMIN"
echo "$KUBECONFIG_ADMIN"
