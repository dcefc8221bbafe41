#!/usr/bin/env bash
# traces/fetch.sh without a network: --from a local copy of the traces into a temporary
# folder (every file fetched and checked, a second run keeps them all), then from a copy
# with one file changed (one line naming it, exit 1, nothing half-written left).
# Usage: fetch_test.sh REPO_ROOT. The copy is $FAULTLINE_TRACES, else ../shared/traces;
# without one the test is skipped (exit 77), and fails under CI, as the GoogleTest suites
# do (tests/support/shared_data.h).
set -euo pipefail
root=$1
src=${FAULTLINE_TRACES:-$root/../shared/traces}
fetch=$root/traces/fetch.sh
if [ ! -f "$src/infinitehbd/fault_trace.json" ]; then
  if [ -n "${CI:-}" ] && [ "${CI}" != 0 ] && [ "${CI}" != false ]; then
    echo "$src/infinitehbd/fault_trace.json is missing: CI runs with ../shared/traces beside the clone"
    exit 1
  fi
  echo "$src/infinitehbd/fault_trace.json is missing: run traces/fetch.sh to get it"
  exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/faultline-fetch-test.XXXXXX")
trap 'chmod -R u+w "$work"; rm -rf "$work"' EXIT
n=$(grep -c . "$root/traces/SHA256SUMS")

fail() {
  echo "FAIL: $*"
  exit 1
}

out=$("$fetch" --from "$src" "$work/a")
[ "$out" = "traces/fetch.sh: $work/a: $n fetched, 0 already there, 0 failed" ] || fail "first run: $out"
(cd "$work/a" && sha256sum -c --quiet "$root/traces/SHA256SUMS") || fail "checksums of the copy"
out=$(FAULTLINE_TRACES="$work/a" "$fetch" --from "$src")
[ "$out" = "traces/fetch.sh: $work/a: 0 fetched, $n already there, 0 failed" ] || fail "second run: $out"

cp -r "$src" "$work/bad"
chmod -R u+w "$work/bad"
echo x >> "$work/bad/oobleck/p3-trace.csv"
status=0
"$fetch" --from "$work/bad" "$work/c" > "$work/out" 2> "$work/err" || status=$?
[ "$status" -eq 1 ] || fail "a changed file: exit $status, expected 1"
[ "$(wc -l < "$work/err")" -eq 1 ] || fail "a changed file: $(cat "$work/err")"
grep -q "^traces/fetch.sh: oobleck/p3-trace.csv: SHA-256 mismatch: expected [0-9a-f]\{64\}, got [0-9a-f]\{64\}$" \
  "$work/err" || fail "a changed file: $(cat "$work/err")"
[ ! -e "$work/c/oobleck/p3-trace.csv" ] || fail "the changed file was kept"
[ -z "$(find "$work/c" -name '*.part.*')" ] || fail "a temporary file was left"
[ -f "$work/c/oobleck/g4dn-trace.csv" ] || fail "the other files were not fetched"
echo "fetch_test: $n files fetched and checked; a changed file refused in one line"
