#!/usr/bin/env bash
# Fetches the real traces the tests and scenarios read (traces/FORMAT.md, "Where the real
# traces come from") from their public sources, each at a pinned commit, into
#   DEST (argument), else $FAULTLINE_TRACES, else ../shared/traces beside the clone
# with the layout the tests expect (infinitehbd/, oobleck/, alibaba-pai-2020/, each with
# its LICENSE), and checks every file against traces/SHA256SUMS.
#
#   traces/fetch.sh [--from DIR] [DEST]
#
# --from DIR copies from a local folder laid out like ../shared/traces instead of
# downloading (an offline mirror). FAULTLINE_TRACES_URL_BASE replaces
# https://raw.githubusercontent.com (URLs are BASE/OWNER/REPO/COMMIT/PATH; curl also takes
# file:// ones). A file already there with the right checksum is left alone; each file is
# written to a temporary name and renamed only once its checksum matches, so a failure
# leaves nothing half-written. A mismatch prints one line naming the file, the expected
# and the actual SHA-256 (the other files are still fetched) and the script exits 1; a
# download that fails stops it at once with exit 1.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
manifest=$root/traces/SHA256SUMS
me=traces/fetch.sh

usage() {
  sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
}

from=""
dest=""
while [ $# -gt 0 ]; do
  case "$1" in
    --from)
      [ $# -ge 2 ] || { echo "$me: --from needs a folder" >&2; exit 2; }
      from=$2
      shift 2
      ;;
    --from=*) from=${1#--from=}; shift ;;
    -h | --help) usage; exit 0 ;;
    -*) echo "$me: unknown option $1 (see --help)" >&2; exit 2 ;;
    *)
      [ -z "$dest" ] || { echo "$me: one destination only (see --help)" >&2; exit 2; }
      dest=$1
      shift
      ;;
  esac
done
dest=${dest:-${FAULTLINE_TRACES:-$root/../shared/traces}}
base=${FAULTLINE_TRACES_URL_BASE:-https://raw.githubusercontent.com}
if [ -n "$from" ] && [ ! -d "$from" ]; then
  echo "$me: --from $from: no such folder" >&2
  exit 2
fi

# What is fetched: local path (under DEST), repository, commit, path in the repository.
# Each commit is pinned; every file is checked against traces/SHA256SUMS (traces/FORMAT.md §10).
hbd="stepfun-ai/InfiniteHBD-Trace 7aacdc8c3d2352c5b784bc0ea31756e1620daed1"
oob="SymbioticLab/Oobleck 796655600207cfb59fae5804740ff720f7428fc5"
ali="alibaba/clusterdata 7a6c496e4f4b6ce6150be8f881cb051bf2abff42"
files=(
  "infinitehbd/LICENSE $hbd LICENSE"
  "infinitehbd/fault_trace.json $hbd fault_trace.json"
  "infinitehbd/fault_statistics.json $hbd fault_statistics.json"
  "oobleck/LICENSE $oob LICENSE"
  "oobleck/5m.csv $oob tools/simulator/traces/5m.csv"
  "oobleck/10m.csv $oob tools/simulator/traces/10m.csv"
  "oobleck/30m.csv $oob tools/simulator/traces/30m.csv"
  "oobleck/1h.csv $oob tools/simulator/traces/1h.csv"
  "oobleck/3h.csv $oob tools/simulator/traces/3h.csv"
  "oobleck/6h.csv $oob tools/simulator/traces/6h.csv"
  "oobleck/p3-trace.csv $oob tools/simulator/traces/p3-trace.csv"
  "oobleck/g4dn-trace.csv $oob tools/simulator/traces/g4dn-trace.csv"
  "alibaba-pai-2020/LICENSE $ali cluster-trace-gpu-v2020/LICENSE"
  "alibaba-pai-2020/coefficient_variation.csv $ali cluster-trace-gpu-v2020/mini-batch-time/data/coefficient_variation.csv"
  "alibaba-pai-2020/job_1_norm.csv $ali cluster-trace-gpu-v2020/mini-batch-time/data/job_1_norm.csv"
  "alibaba-pai-2020/job_2_norm.csv $ali cluster-trace-gpu-v2020/mini-batch-time/data/job_2_norm.csv"
  "alibaba-pai-2020/job_3_norm.csv $ali cluster-trace-gpu-v2020/mini-batch-time/data/job_3_norm.csv"
  "alibaba-pai-2020/job_4_norm.csv $ali cluster-trace-gpu-v2020/mini-batch-time/data/job_4_norm.csv"
)

if command -v sha256sum > /dev/null; then
  sha256() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum > /dev/null; then
  sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
  echo "$me: needs sha256sum (coreutils) or shasum" >&2
  exit 2
fi

if [ -n "$from" ]; then
  get() { cp "$from/$2" "$3"; }
elif command -v curl > /dev/null; then
  get() { curl -fsSL --retry 3 -o "$3" "$1"; }
elif command -v wget > /dev/null; then
  get() { wget -q --tries=3 -O "$3" "$1"; }
else
  echo "$me: needs curl or wget (or --from DIR, a local copy)" >&2
  exit 2
fi

# The expected checksum of a local path, from the manifest ("" when it has none).
expected() { awk -v p="$1" '$2 == p { print $1 }' "$manifest"; }

# Every manifest entry is fetched, and every fetched file has an entry.
[ "$(grep -c . "$manifest")" -eq ${#files[@]} ] || {
  echo "$me: $manifest lists $(grep -c . "$manifest") files, this script ${#files[@]}" >&2
  exit 2
}

tmp=""
trap 'if [ -n "$tmp" ]; then rm -f "$tmp"; fi' EXIT
fetched=0 present=0 failed=0
for entry in "${files[@]}"; do
  read -r path repo commit upstream <<< "$entry"
  want=$(expected "$path")
  [ -n "$want" ] || { echo "$me: $path has no checksum in $manifest" >&2; exit 2; }
  out=$dest/$path
  if [ -f "$out" ] && [ "$(sha256 "$out")" = "$want" ]; then
    present=$((present + 1))
    continue
  fi
  url=$base/$repo/$commit/$upstream
  src=$url
  [ -z "$from" ] || src=$from/$path
  mkdir -p "$(dirname "$out")"
  tmp=$(mktemp "$out.part.XXXXXX")
  if ! get "$url" "$path" "$tmp"; then
    rm -f "$tmp"
    tmp=""
    echo "$me: $path: could not get $src" >&2
    exit 1  # (the others would most likely fail the same way)
  fi
  got=$(sha256 "$tmp")
  if [ "$got" != "$want" ]; then
    rm -f "$tmp"
    tmp=""
    echo "$me: $path: SHA-256 mismatch: expected $want, got $got" >&2
    failed=$((failed + 1))
    continue
  fi
  chmod a+r "$tmp"
  mv -f "$tmp" "$out"
  tmp=""
  fetched=$((fetched + 1))
done

echo "$me: $dest: $fetched fetched, $present already there, $failed failed"
[ "$failed" -eq 0 ]
