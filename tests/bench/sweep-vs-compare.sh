#!/bin/bash
# A sweep point against the same point under `sim compare --variant`, whole processes:
#   tests/bench/sweep-vs-compare.sh FAULTLINE [RUNS] [REPLICAS] [JOBS]
# The grid is the issue's 63 points on the dense job (scenarios/byterobust-dense-9600.json,
# in-memory checkpoints): policy.params.standby_pool = 0,1,2,4,6,8,12,16,-1 by
# policy.params.checkpoint_interval_s = 300,600,900,1200,1800,2700,3600. `sim sweep` runs it
# into a fresh --out each time; `sim compare` runs the same 63 points as the scenario (set to
# the first point) and 62 --variant's. RUNS (default 3) pairs run in turn, sweep then compare,
# REPLICAS (default 20) replicas per point, JOBS (default 2) --jobs. Prints the wall seconds
# of each side (median and range) and the ratio sweep/compare (median of the pairs); checks
# first that both give every point the same ETTR (they run the same replicas). With
# MAX_RATIO=X it exits 1 when the median ratio is above X. POOLS=A,B,... and INTERVALS=A,B,...
# replace the grid's values (a smaller grid: the ctest bench.sweep_vs_compare).
set -eu
bin=$(readlink -f "${1:?usage: sweep-vs-compare.sh FAULTLINE [RUNS] [REPLICAS] [JOBS]}")
runs=${2:-3}
replicas=${3:-20}
jobs=${4:-2}
[ -x "$bin" ] || { echo "sweep-vs-compare.sh: $bin: not an executable" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
scenario=$root/scenarios/byterobust-dense-9600.json
work=$(mktemp -d /tmp/sweep-vs-compare.XXXXXX)
trap 'rm -rf "$work"' EXIT
IFS=, read -r -a pools <<<"${POOLS:-0,1,2,4,6,8,12,16,-1}"
IFS=, read -r -a intervals <<<"${INTERVALS:-300,600,900,1200,1800,2700,3600}"
common=(--set policy.params.checkpoint=memory --replicas "$replicas" --jobs "$jobs" --quiet --format json)
sweep=("$bin" sim sweep "$scenario" "${common[@]}"
       --grid "policy.params.standby_pool=$(IFS=,; echo "${pools[*]}")"
       --grid "policy.params.checkpoint_interval_s=$(IFS=,; echo "${intervals[*]}")")
compare=("$bin" sim compare "$scenario" "${common[@]}"
         --set "policy.params.standby_pool=${pools[0]}"
         --set "policy.params.checkpoint_interval_s=${intervals[0]}")
for p in "${pools[@]}"; do
  for i in "${intervals[@]}"; do
    [ "$p" = "${pools[0]}" ] && [ "$i" = "${intervals[0]}" ] && continue
    compare+=(--variant "p${p}i${i}:policy.params.standby_pool=$p+policy.params.checkpoint_interval_s=$i")
  done
done
one() {  # TAG ARGS...: one timed run; its stdout in $work/TAG.json, its wall seconds appended
  local tag=$1; shift
  rm -rf "$work/out"
  local t0 t1
  t0=$(date +%s.%N)
  if [ "$tag" = sweep ]; then
    "$@" --out "$work/out" >"$work/$tag.json" 2>"$work/stderr" ||
      { echo "sweep-vs-compare.sh: sim sweep failed: $(tail -1 "$work/stderr")" >&2; exit 1; }
  else
    "$@" >"$work/$tag.json" 2>"$work/stderr" ||
      { echo "sweep-vs-compare.sh: sim compare failed: $(tail -1 "$work/stderr")" >&2; exit 1; }
  fi
  t1=$(date +%s.%N)
  echo "$t0 $t1" | awk '{printf "%.3f\n", $2 - $1}' >>"$work/$tag.times"
}
one sweep "${sweep[@]}"
one compare "${compare[@]}"
python3 - "$work/sweep.json" "$work/compare.json" <<'PY'
import json, sys
sw, cmp = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
a = [p["metrics"]["ettr"]["mean"] for p in sw["points"]]
b = [s["ettr"]["mean"] for s in cmp["stacks"]]
if a != b:
    sys.exit("sweep-vs-compare.sh: the sweep and compare disagree on ETTR: %s vs %s" % (a[:4], b[:4]))
print("same ETTR at all %d points (%d replicas each)" % (len(a), sw["points"][0]["replicas"]))
PY
: >"$work/sweep.times"; : >"$work/compare.times"
for _ in $(seq "$runs"); do
  one sweep "${sweep[@]}"
  one compare "${compare[@]}"
done
python3 - "$work" "$runs" "${MAX_RATIO:-}" <<'PY'
import statistics, sys
work, runs, limit = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sw = [float(x) for x in open(work + "/sweep.times")]
cp = [float(x) for x in open(work + "/compare.times")]
ratio = sorted(a / b for a, b in zip(sw, cp))
for name, v in (("sim sweep", sw), ("sim compare", cp)):
    print("%-12s wall %.2f s [%.2f-%.2f]" % (name, statistics.median(v), min(v), max(v)))
r = statistics.median(ratio)
print("sweep/compare %.2f [%.2f-%.2f] (%d pairs)" % (r, ratio[0], ratio[-1], runs))
if limit and r > float(limit):
    sys.exit("sweep-vs-compare.sh: ratio %.2f above %s" % (r, limit))
PY
