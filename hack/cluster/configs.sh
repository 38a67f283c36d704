# Configuration files of containerd, the CNI bridge, the kubelet and kube-proxy
# (sourced by up.sh). Every path points into $STATE or $RUN, so down.sh can remove all.

# put <file>: writes stdin to file only when it differs, because kube-proxy exits when
# its configuration file changes under it (and up.sh must stay idempotent).
put() {
  local tmp
  tmp=$(mktemp "$STATE/.put.XXXXXX")
  cat >"$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}

write_configs() {
  mkdir -p "$STATE/cni/net.d" "$STATE/cni/ipam" "$STATE/containerd" "$STATE/kubelet" "$RUN"
  put "$STATE/containerd.toml" <<TOML
version = 3
root = "$STATE/containerd"
state = "$RUN/containerd"
# NRI would open /var/run/nri; nothing here uses it.
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = "$STATE/opt"
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      # Built by \`make images\` (hack/cluster/pause): no registry is reachable here.
      sandbox = "docker.io/library/outbox-pause:dev"
  [plugins.'io.containerd.cri.v1.runtime']
    # Pod network namespaces live under $RUN, not /var/run/netns.
    netns_mounts_under_state_dir = true
    # This sandbox's root lacks CAP_SYS_RESOURCE, so runc may not lower a pod's
    # oom_score_adj below containerd's own (the pause container asks for -998).
    restrict_oom_score_adj = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = "${RUNC_BINARY:-$(command -v runc)}"
          SystemdCgroup = false
          # runc's container state under $RUN too (default /run/containerd/runc).
          Root = "$RUN/runc"
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ["/usr/lib/cni"]
      conf_dir = "$STATE/cni/net.d"
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
TOML

  # Pods get routes to the node and the service range only: no default route, so a
  # pod cannot send anything off this machine even by mistake. No masquerading.
  put "$STATE/cni/net.d/10-outbox.conflist" <<JSON
{
  "cniVersion": "1.0.0",
  "name": "outbox-pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$POD_BRIDGE",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$STATE/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$POD_GATEWAY"}]],
        "routes": [{"dst": "$NODE_IP/32"}, {"dst": "$SERVICE_CIDR"}]
      }
    }
  ]
}
JSON

  put "$STATE/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
# kubelet 1.35+ refuses a cgroup v1 (or hybrid) host unless told otherwise; on cgroup
# v2 this setting changes nothing. The cgroupfs driver on both: the pods' cgroups are
# directories under cgroupRoot, not systemd units (lib.sh's supported() says where
# that would change the host's own cgroups).
cgroupDriver: cgroupfs
failCgroupV1: false
# Pods live below the cluster's own cgroup root (host.sh makes it), never in a
# kubepods tree another kubelet on this host may own.
cgroupRoot: $CGROUP_ROOT
# The kubelet would otherwise tune kernel settings and never put them back; with
# this it only checks them, and up.sh sets and down.sh restores them (host.sh).
protectKernelDefaults: true
# Container logs under our state (the default is /var/log/pods).
podLogsDir: $STATE/pod-logs
failSwapOn: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $STATE/pki/ca.crt}
authorization: {mode: AlwaysAllow}
# No cluster DNS: pods reach the node by IP.
resolvConf: ""
# The images were imported, not pulled: never garbage-collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
serializeImagePulls: false
maxPods: 60
YAML

  put "$STATE/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $STATE/kube-proxy.kubeconfig}
mode: iptables
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# NodePorts only on the node's own dummy address, never on eth0.
nodePortAddresses: ["$NODE_IP/32"]
iptables: {localhostNodePorts: false}
# Leave the host's conntrack sysctls alone.
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
YAML
}
