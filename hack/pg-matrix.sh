#!/usr/bin/env bash
# Runs the PostgreSQL-facing suites against each supported PostgreSQL major version
# (`make test-pg-matrix`; docs/operations.md#supported-postgresql-versions). Each
# version's server comes from hack/install-pg-matrix.sh (installed first, cached) and
# is picked by PG_VERSION in internal/testenv/pgtest. Prints each package's result as
# it lands and, at the end, one line per version with its result, its time and the
# packages that failed; exits non-zero when any version failed. A version that cannot
# run (not installable, a suite that does not build or has no tests) fails with the
# reason: nothing is skipped.
#
# Usage: hack/pg-matrix.sh [MAJOR...]   (default: $PG_MATRIX, else 13 14 15 16 17 18)
# Logs: $PG_MATRIX_LOGS (default bin/pg-matrix)/<major>.log
set -uo pipefail
cd "$(dirname "$0")/.."

# Every package whose tests start PostgreSQL (through pgtest, relaytest, localstack),
# plus internal/relayworker/cdc and internal/pgversion whose code is version-sensitive. Not
# test/cluster (the one-node cluster suite, `make e2e-cluster`) nor the nested
# modules test/ops and test/gitops, which read no version-dependent behaviour.
PKGS=(
  ./internal/testenv/pgtest ./internal/pgversion ./internal/schema
  ./internal/relayworker/store ./internal/relayworker/relay ./internal/relayworker/cdc ./internal/relayworker/cli
  ./internal/relayworker/archive ./internal/relayworker/replay ./cmd/relayworker
  ./internal/relayworker/shardstore ./internal/relayworker/shardrelay
  ./inbox ./outbox ./examples/payments
  ./internal/outboxstats ./internal/replslot ./internal/cmd/plugin
  ./internal/controller ./test/fault ./test/e2e
)
read -r -a versions <<<"${*:-${PG_MATRIX:-13 14 15 16 17 18}}"
logs=${PG_MATRIX_LOGS:-bin/pg-matrix}
flags=${GO_TEST_FLAGS:--count=1 -timeout 45m}
mkdir -p "$logs"

declare -A result seconds failed
run_version() {
  local v=$1 log=$logs/$1.log start=$SECONDS
  if ! hack/install-pg-matrix.sh "$v" >"$log" 2>&1; then
    result[$v]=FAIL failed[$v]="install: $(tail -1 "$log")" seconds[$v]=0
    return
  fi
  echo "== PostgreSQL $v: go test ${PKGS[*]}"
  # shellcheck disable=SC2086 # flags is a word list
  PG_VERSION=$v go test $flags "${PKGS[@]}" >>"$log" 2>&1
  local rc=$?
  seconds[$v]=$((SECONDS - start))
  grep -E '^(ok|FAIL|\?)[[:space:]]' "$log" | sed "s/^/  [$v] /"
  # A package line is "ok <pkg> <time>" or "FAIL <pkg> ..."; anything else (no test
  # files, no tests to run, a build failure) is a failure of that version too.
  local bad
  bad=$(grep -E '^(FAIL|\?)[[:space:]]+[^[:space:]]|\[no tests to run\]|^# ' "$log" | awk '{print $2}' | sed 's#^github.com/outbox-operator/outbox-operator/#./#' | sort -u | tr '\n' ' ')
  if [ "$rc" -eq 0 ] && [ -z "$bad" ]; then
    result[$v]=PASS
  else
    result[$v]=FAIL failed[$v]="${bad:-go test exit $rc} (log $log)"
    # CI keeps only what is printed: show why, not just where (the log stays for more).
    echo "  [$v] first failure in $log:"
    grep -m1 -A60 -E '^(--- FAIL|panic:|# )' "$log" | sed "s/^/  [$v] | /"
  fi
}

for v in "${versions[@]}"; do
  run_version "$v"
done

echo
echo "PostgreSQL matrix (${#PKGS[@]} packages per version):"
passed=0 failedn=0
for v in "${versions[@]}"; do
  printf '  PostgreSQL %-3s %s  %4ss  %s\n' "$v" "${result[$v]}" "${seconds[$v]}" "${failed[$v]:-}"
  if [ "${result[$v]}" = PASS ]; then passed=$((passed + 1)); else failedn=$((failedn + 1)); fi
done
echo "pg-matrix: $passed passed, $failedn failed"
[ "$failedn" -eq 0 ]
