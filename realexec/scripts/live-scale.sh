#!/usr/bin/env bash
# The controller at the size of a cluster: AGENTS virtual agents (`faultline-live fleet`:
# the real agent code, fake ranks, one TCP connection and one handshake each) plus a few
# standbys against the real controller (`faultline-live live run`) on loopback, with a fault
# storm (rank crashes, hangs, machine losses, rack partitions, slow hosts) and, half-way,
# the controller killed with SIGKILL and restarted on the same state directory (every agent
# redials at once). Prints as its last line one JSON object:
#   agents, faults, decision_p50_s, decision_p99_s (fault injected -> the controller's first
#   kill request, on the fleet's clock; crashes, machine losses and partitions),
#   hang_detect_p50_s, heartbeats_per_s (at the restarted controller), controller_cpu_s,
#   controller_rss_mib (peak), journal_bytes, lost_events (injected crashes and lost agents
#   the event log lacks), false_evictions (machines evicted that had no fault injected).
# Exits 1 when lost_events > 0, false_evictions > 0 or decision_p99_s > 1.
#
# usage: realexec/scripts/live-scale.sh BUILD_DIR STATE_DIR AGENTS SECONDS
set -euo pipefail
if [ $# -ne 4 ]; then
  echo "usage: $0 BUILD_DIR STATE_DIR AGENTS SECONDS" >&2
  exit 2
fi
build=$(cd "$1" && pwd); work=$2; agents=$3; seconds=$4
case "$agents$seconds" in *[!0-9]*) echo "live-scale.sh: AGENTS and SECONDS: expected integers" >&2; exit 2;; esac
[ "$seconds" -ge 60 ] || { echo "live-scale.sh: SECONDS: expected at least 60" >&2; exit 2; }
. "$(dirname "$0")/lib/fleet-run.sh"
fleet_setup live-scale.sh
# Enough warm standbys that a partitioned rack (8) plus a machine loss do not empty the pool:
# the job keeps running through the storm, so that every fault lands on a running job.
standby=$((agents / 25 > 10 ? agents / 25 : 10))
port=$(fleet_port "$((agents + standby))")
fleet_config live-scale.sh 2.0 15
half=$((seconds / 2))
ctl=0; fleet=0
trap cleanup EXIT
"$bin/faultline-live" live run "$work/live.json" --fresh --duration $((seconds + 30)) \
  > "$work/controller1.log" 2>&1 &
ctl=$!; sample $ctl 1 &
sleep 0.5
"$bin/faultline-live" fleet "$work/live.json" --threads 2 --duration $((seconds + 20)) \
  --storm 11 --storm-start 25 --every 5 --quiet-at "$half" --quiet-for 25 \
  --out "$work/fleet.jsonl" > "$work/fleet.out" 2> "$work/fleet.err" &
fleet=$!
sleep "$half"
kill -9 $ctl; wait $ctl 2>/dev/null || true
sleep 1
"$bin/faultline-live" live run "$work/live.json" --duration $((seconds - half)) \
  > "$work/controller2.log" 2>&1 &
ctl=$!; sample $ctl 2 &
wait $ctl || true
ctl=0
wait $fleet || true
fleet=0
"$py" - "$work" <<'PY'
import json, os, sys
work = sys.argv[1]
fleet = json.loads(open(f"{work}/fleet.out").read().strip().splitlines()[-1])
inj = [json.loads(l) for l in open(f"{work}/fleet.jsonl") if '"inject"' in l]
log = [json.loads(l) for l in open(f"{work}/state/events.jsonl") if l.strip()]
text = open(f"{work}/state/events.jsonl").read()
faulted = {i["id"] for i in inj if i["id"] >= 0}
evicted = set()
lost_alert = set()
for r in log:
    a = r.get("action", {})
    if r.get("kind") == "action" and a.get("type") == "EvictMachines":
        evicted.update(a.get("machines", []))
    e = r.get("event", {})
    if r.get("kind") == "event" and e.get("type") == "InspectionAlert" and "agent lost" in e.get("detail", ""):
        lost_alert.add(e.get("machine"))
jobs = len(json.load(open(f"{work}/live.json"))["machines"])
lost = 0
for i in inj:
    if i["fault"] == "crash" and json.dumps(i["signature"]) not in text:
        lost += 1
    if i["fault"] in ("machine_loss", "partition") and i["id"] < jobs and i["id"] not in lost_alert:
        lost += 1
cpu = rss = 0.0
tick = os.sysconf("SC_CLK_TCK")
for tag in ("1", "2"):
    try:
        _, u, s, hwm = open(f"{work}/usage.{tag}").read().split()
        cpu += (int(u) + int(s)) / tick
        rss = max(rss, int(hwm) / 1024)
    except (OSError, ValueError):
        pass
hb = 0.0
for line in open(f"{work}/controller2.log"):
    if "heartbeats from agents" in line:
        w = line.split("load:")[-1].split()
        hb = float(w[0]) / max(float(w[9]), 1e-9)
out = {"agents": jobs, "agents_with_standbys": fleet["agents"], "faults": fleet["faults"],
       "decision_p50_s": round(fleet["decision_p50_s"], 4),
       "decision_p99_s": round(fleet["decision_p99_s"], 4),
       "hang_detect_p50_s": round(fleet["hang_detect_p50_s"], 3),
       "heartbeats_per_s": round(hb, 1), "controller_cpu_s": round(cpu, 2),
       "controller_rss_mib": round(rss, 1),
       "journal_bytes": os.path.getsize(f"{work}/state/journal.json"),
       "lost_events": lost, "false_evictions": len(evicted - faulted)}
print(json.dumps(out))
sys.exit(1 if out["lost_events"] > 0 or out["false_evictions"] > 0 or out["decision_p99_s"] > 1 else 0)
PY
