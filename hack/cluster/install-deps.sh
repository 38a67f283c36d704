#!/usr/bin/env bash
# Installs the Debian packages the one-node cluster needs when they are missing:
# iptables and conntrack (kube-proxy), the CNI plugins (bridge, host-local, loopback),
# openssl (the cluster's certificates). runc comes from hack/install-runc.sh.
set -euo pipefail
need=()
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v conntrack >/dev/null 2>&1 || need+=(conntrack)
[ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
[ ${#need[@]} -eq 0 ] && exit 0
echo "installing ${need[*]} (Debian packages)" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${need[@]}" >/dev/null
