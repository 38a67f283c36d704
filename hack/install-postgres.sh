#!/usr/bin/env bash
# Installs PostgreSQL server binaries (Debian package) when initdb/postgres are missing.
# Tests start their own private server with internal/testenv/pgtest; the system
# service is not used and is stopped if the package starts it.
set -euo pipefail
have() {
  ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1
}
if have && getent passwd postgres >/dev/null; then
  exit 0
fi
echo "installing PostgreSQL server (Debian package 'postgresql')" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq postgresql >/dev/null
# The package may start a cluster service; tests never use it.
$SUDO service postgresql stop >/dev/null 2>&1 || true
have || { echo "PostgreSQL install failed: no postgres binary found" >&2; exit 1; }
