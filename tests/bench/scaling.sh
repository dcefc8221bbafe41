#!/bin/bash
# Per-replica cost of `faultline sim run` against cluster size, whole process (fork included),
# and the fitted exponent of cost ~ machines^k:
#   tests/bench/scaling.sh FAULTLINE [SCENARIO] [MACHINES...]
# SCENARIO (default scenarios/byterobust-dense-9600.json) is scaled to each size by setting
# cluster.machines and job.dp = machines / job.pp (tp and pp kept). For each size it runs R and
# 2R replicas with --jobs 1, R = $BUDGET / machines (BUDGET defaults to 240000, at least 2),
# and the per-replica cost is the difference of CPU seconds (user+sys, children included)
# divided by R: the platform build and the first replica's warm-up cancel out. Prints one row
# per size, then k fitted by least squares on log(cost) against log(machines), and k between
# each pair of neighbouring sizes. Default sizes: 1200 2400 4800 9600.
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
cpu() {  # CPU seconds of one whole-process run: scenario file, replicas
  /usr/bin/time -f "%U %S" -o "$work/time" "$bin" sim run "$1" --replicas "$2" --jobs 1 \
      --format json --out "$work/out" > /dev/null 2> "$work/stderr" ||
    { echo "scaling.sh: $bin failed on $1: $(tail -1 "$work/stderr")" >&2; exit 1; }
  awk '{ printf "%.3f", $1 + $2 }' "$work/time"
}
printf "%-9s %-9s %-12s %-12s %s\n" machines replicas "cpu_R_s" "cpu_2R_s" "per_replica_ms"
rows=()
for m in "${sizes[@]}"; do
  python3 - "$scenario" "$m" "$work/s$m.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); m = int(sys.argv[2])
pp = d["job"].get("pp", 1)
if m % pp: sys.exit(f"scaling.sh: {m} machines are not a multiple of job.pp {pp}")
d["cluster"]["machines"] = m; d["job"]["dp"] = m // pp
json.dump(d, open(sys.argv[3], "w"))
PY
  r=$(( ${BUDGET:-240000} / m )); [ $r -ge 2 ] || r=2
  a=$(cpu "$work/s$m.json" $r)
  b=$(cpu "$work/s$m.json" $((2 * r)))
  per=$(python3 -c "print(f'{max(($b - $a) / $r, 1e-6) * 1e3:.2f}')")
  printf "%-9s %-9s %-12s %-12s %s\n" "$m" "$r/$((2 * r))" "$a" "$b" "$per"
  rows+=("$m $per")
done
printf "%s\n" "${rows[@]}" | python3 -c '
import math, sys
pts = [tuple(map(float, l.split())) for l in sys.stdin if l.strip()]
if len(pts) < 2: sys.exit(0)
xs = [math.log(m) for m, _ in pts]; ys = [math.log(c) for _, c in pts]
mx = sum(xs) / len(xs); my = sum(ys) / len(ys)
k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
print(f"fitted exponent k = {k:.2f} (cost ~ machines^k, least squares over {len(pts)} sizes)")
print("between neighbours: " + ", ".join(
    f"{int(a[0])}->{int(b[0])}: {math.log(b[1] / a[1]) / math.log(b[0] / a[0]):.2f}" for a, b in zip(pts, pts[1:])))
'
