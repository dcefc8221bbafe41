#!/bin/bash
# Per-replica cost of `faultline sim run` against cluster size, and the fitted exponent of
# cost ~ machines^k, for the median and for the mean replica:
#   tests/bench/scaling.sh FAULTLINE [SCENARIO] [MACHINES...]
# SCENARIO (default scenarios/byterobust-dense-9600.json) is scaled to each size by setting
# cluster.machines and job.dp = machines / job.pp (tp and pp kept). For each size it runs
# R = $BUDGET / machines replicas (BUDGET defaults to 240000; R at least 5) with --jobs 1
# and reads each replica's CPU time in its process from --replica-cpu (SimGrid included;
# fork and result transfer excluded). Replica 0 is left out: it runs first, in the parent,
# and builds the platform's routes and transfer memo that the others start from. The
# whole-process CPU seconds (user+sys, children included) are printed beside, for
# reference. Prints one row per size, then k fitted by least squares on log(cost) against
# log(machines), for the median and the mean, and k between neighbouring sizes.
# Default sizes: 1200 2400 4800 9600. ROUNDS=N runs the sizes in turn N times and pools.
set -eu
bin=$(readlink -f "${1:?usage: scaling.sh FAULTLINE [SCENARIO] [MACHINES...]}")
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
scenario=$root/scenarios/byterobust-dense-9600.json
if [ $# -gt 0 ] && [ -f "$1" ]; then scenario=$(readlink -f "$1"); shift; fi
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1200 2400 4800 9600)
[ -x "$bin" ] || { echo "scaling.sh: $bin: not an executable" >&2; exit 2; }
work=$(mktemp -d /tmp/scaling.XXXXXX)
trap 'rm -rf "$work"' EXIT
printf "%-9s %-9s %-10s %-14s %-14s %s\n" machines replicas "process_s" "median_ms" "mean_ms" "min..max_ms"
rows=()
# The sizes run in turn ROUNDS times (default 1), each run's replica CPU times pooled by
# size: on a machine whose speed drifts (shared hosts, frequency scaling) a drift then
# spreads over every size instead of bending the fit.
for m in "${sizes[@]}"; do
  python3 - "$scenario" "$m" "$work/s$m.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); m = int(sys.argv[2])
pp = d["job"].get("pp", 1)
if m % pp: sys.exit(f"scaling.sh: {m} machines are not a multiple of job.pp {pp}")
d["cluster"]["machines"] = m; d["job"]["dp"] = m // pp
json.dump(d, open(sys.argv[3], "w"))
PY
  : > "$work/all$m.csv"
  : > "$work/proc$m"
done
for round in $(seq "${ROUNDS:-1}"); do
  for m in "${sizes[@]}"; do
    r=$(( ${BUDGET:-240000} / m )); [ $r -ge 5 ] || r=5
    /usr/bin/time -f "%U %S" -o "$work/time" "$bin" sim run "$work/s$m.json" --replicas "$r" --jobs 1 \
        --format json --out "$work/out" --replica-cpu "$work/cpu.csv" --quiet > /dev/null 2> "$work/stderr" ||
      { echo "scaling.sh: $bin failed on $m machines: $(tail -1 "$work/stderr")" >&2; exit 1; }
    tail -n +2 "$work/cpu.csv" >> "$work/all$m.csv"
    cat "$work/time" >> "$work/proc$m"
  done
done
for m in "${sizes[@]}"; do
  r=$(( ${BUDGET:-240000} / m )); [ $r -ge 5 ] || r=5
  row=$(python3 - "$work/all$m.csv" "$work/proc$m" "$m" "$r" "$(head -1 "$work/cpu.csv")" <<'PY'
import csv, statistics, sys
rows = csv.DictReader(open(sys.argv[1]), fieldnames=sys.argv[5].split(","))
ms = [float(x["cpu_ms"]) for x in rows if x["replica"] != "0"]
lines = [l.split() for l in open(sys.argv[2]) if l.strip()]
proc = statistics.fmean(float(u) + float(s) for u, s, *_ in lines)
med, mean = statistics.median(ms), statistics.fmean(ms)
print(f"{sys.argv[3]:<9} {sys.argv[4]:<9} {proc:<10.2f} {med:<14.3f} {mean:<14.3f} {min(ms):.3f}..{max(ms):.3f}")
print(f"ROW {sys.argv[3]} {med} {mean}")
PY
)
  echo "$row" | grep -v '^ROW'
  rows+=("$(echo "$row" | grep '^ROW' | cut -d' ' -f2-)")
done
printf "%s\n" "${rows[@]}" | python3 -c '
import math, sys
pts = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
if len(pts) < 2: sys.exit(0)
xs = [math.log(p[0]) for p in pts]
mx = sum(xs) / len(xs)
for name, col in (("median", 1), ("mean", 2)):
    ys = [math.log(p[col]) for p in pts]
    my = sum(ys) / len(ys)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    steps = ", ".join(f"{int(a[0])}->{int(b[0])}: {math.log(b[col] / a[col]) / math.log(b[0] / a[0]):.2f}"
                      for a, b in zip(pts, pts[1:]))
    print(f"{name}: fitted exponent k = {k:.2f} (cost ~ machines^k, least squares over {len(pts)} sizes); "
          f"between neighbours {steps}")
'
