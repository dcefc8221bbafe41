#!/usr/bin/env bash
# The virtual fleet, small: 150 agents and 2 standbys of `faultline-live fleet` against the real
# controller for 16 s with a fault storm. Passes when the job started on every machine (150
# agents dialling at once: before the herd fix the controller cut off all but 64 handshakes
# and the first launch failed) and the controller stopped the job for a fault the fleet
# injected.
# usage: fleet_smoke.sh BIN_DIR WORK_DIR
set -euo pipefail
bin=$1; work=$2
rm -rf "$work"; mkdir -p "$work"; work=$(cd "$work" && pwd)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"; chmod 600 "$work/token"
port=$((20000 + RANDOM % 2000))
/usr/bin/python3 - "$work" "$port" <<'PY'
import json, sys
work, port = sys.argv[1], int(sys.argv[2])
m = lambda n: {"name": n, "addr": "127.0.0.1", "workdir": f"{work}/hosts/{n}"}
json.dump({"controller": f"127.0.0.1:{port}", "token_file": "token",
           "machines": [m(f"m{i}") for i in range(150)], "standby": [m("s0"), m("s1")],
           "job": {"versions": {"v1": ["/bin/true"]}, "nominal_step_time_s": 0.5},
           "policy": {"stack": "byterobust", "params": {"standby_pool": 2}},
           "state_dir": "state", "trainjob_bin": "/bin/true"}, open(f"{work}/live.json", "w"))
PY
"$bin/faultline-live" live run "$work/live.json" --fresh --duration 16 > "$work/controller.log" 2>&1 &
ctl=$!
sleep 0.3
"$bin/faultline-live" fleet "$work/live.json" --duration 20 --storm 3 --storm-start 4 --every 2 \
  --out "$work/fleet.jsonl" > "$work/fleet.out"
wait $ctl || true
cat "$work/fleet.out"
grep -q '"type":"JobStarted"' "$work/state/events.jsonl" || { echo "no JobStarted in the event log" >&2; exit 1; }
first=$(grep -o '"type":"JobStarted"\|launch failed on [a-z0-9]*' "$work/state/events.jsonl" | head -1)
[ "$first" = '"type":"JobStarted"' ] || { echo "the first start failed: $first" >&2; exit 1; }
grep -q '"kind":"decision"' "$work/fleet.jsonl" || { echo "no fault was acted on" >&2; exit 1; }
echo "fleet smoke: ok"
