#!/usr/bin/env bash
# Installs runc (Debian package) when it is missing. hack/images' runc test unpacks each
# OCI image into a bundle and runs its entrypoint with the pods' security context.
set -euo pipefail
if command -v runc >/dev/null 2>&1; then
  exit 0
fi
echo "installing runc (Debian package 'runc')" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq runc >/dev/null
command -v runc >/dev/null 2>&1 || { echo "runc install failed: no runc binary found" >&2; exit 1; }
