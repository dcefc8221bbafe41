#!/bin/bash
# Runs every shipped scenario with two faultline binaries and compares what they write
# (result.json without its wall time, replicas.csv, timeline, incidents, decisions) byte
# for byte. For performance work, whose results must not move:
#   tests/bench/same-results.sh OLD_FAULTLINE NEW_FAULTLINE [REPLICAS] [JOBS]
# REPLICAS (default 40) caps each scenario's replica count; JOBS (default 2) is --jobs.
# Prints one line per scenario and exits 1 when any differ (the diff is kept in WORK).
set -u
old=${1:?usage: same-results.sh OLD_FAULTLINE NEW_FAULTLINE [REPLICAS] [JOBS]}
new=${2:?usage: same-results.sh OLD_FAULTLINE NEW_FAULTLINE [REPLICAS] [JOBS]}
replicas=${3:-40}
jobs=${4:-2}
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/same-results.XXXXXX)
status=0
for sc in "$root"/scenarios/*.json; do
  name=$(basename "$sc" .json)
  n=$(python3 -c "import json,sys; print(min(int(sys.argv[2]), json.load(open(sys.argv[1])).get('replicas', 1)))" "$sc" "$replicas")
  for side in old new; do
    bin=$old; [ $side = new ] && bin=$new
    out=$work/$name.$side
    if ! "$bin" sim run "$sc" --replicas "$n" --jobs "$jobs" --format json --out "$out" \
         --timeline --incidents --decisions >"$out.stdout" 2>"$out.stderr"; then
      echo "$name: $side binary failed: $(tail -1 "$out.stderr")"; status=1; continue 2
    fi
    python3 - "$out/result.json" <<'PY'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d.pop("wall_s", None)
json.dump(d, open(p, "w"), indent=1, sort_keys=True)
PY
  done
  if diff -r "$work/$name.old" "$work/$name.new" >"$work/$name.diff"; then
    echo "$name: identical ($n replicas, $(ls "$work/$name.new" | tr '\n' ' '))"
  else
    echo "$name: DIFFERENT ($n replicas): see $work/$name.diff"; status=1
  fi
done
[ $status = 0 ] && rm -rf "$work"
exit $status
