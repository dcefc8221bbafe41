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
bin=$build/bin
py=/usr/bin/python3
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
need=$((agents * 4 + 200))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
  echo "live-scale.sh: $agents agents need about $need file descriptors; ulimit -n is $(ulimit -n)" >&2
  exit 2
fi
rm -rf "$work"; mkdir -p "$work"; work=$(cd "$work" && pwd)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"; chmod 600 "$work/token"
# Enough warm standbys that a partitioned rack (8) plus a machine loss do not empty the pool:
# the job keeps running through the storm, so that every fault lands on a running job.
standby=$((agents / 25 > 10 ? agents / 25 : 10))
# A port the kernel finds free (runs side by side, as under ctest -j2, do not meet on one)
# and above the job's ports: job.master_port 29500, the grouped probes' ports from 29600 and
# the replays' from 29700, up to 29699 + machines, which reach the kernel's ephemeral ports
# (32768 up) from about 3,070 machines on; the config check refuses a controller port among them.
port=$("$py" - "$((agents + standby))" <<'PY'
import socket, sys
top, held = 29699 + int(sys.argv[1]), []
while len(held) < 1000 and (not held or held[-1].getsockname()[1] <= top):
    held.append(socket.socket())
    held[-1].bind(("127.0.0.1", 0))
if held[-1].getsockname()[1] <= top:
    sys.exit(f"no free port above the job's ports (above {top}) in 1000 tries")
print(held[-1].getsockname()[1])
PY
)
"$py" - "$work" "$agents" "$standby" "$port" "$bin" <<'PY'
import json, sys
work, n, s, port, bin_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
m = lambda name: {"name": name, "addr": "127.0.0.1", "workdir": f"{work}/hosts/{name}"}
cfg = {
    "description": f"live-scale.sh: {n} virtual agents + {s} standbys",
    "controller": f"127.0.0.1:{port}", "token_file": "token",
    "machines": [m(f"m{i}") for i in range(n)], "standby": [m(f"s{i}") for i in range(s)],
    "job": {"versions": {"v1": [f"{bin_}/faultline-trainjob"]}, "master_port": 29500,
            "nominal_step_time_s": 2.0, "replay_steps": 4},
    "policy": {"stack": "byterobust",
               "params": {"stall_window_s": 15, "recrash_window_s": 20, "probe_deadline_s": 30,
                          "standby_pool": s}},
    "seed": 7, "state_dir": "state", "trainjob_bin": f"{bin_}/faultline-trainjob"}
json.dump(cfg, open(f"{work}/live.json", "w"), indent=1)
PY
half=$((seconds / 2))
ctl=0; fleet=0
cleanup() { for p in $ctl $fleet; do [ "$p" != 0 ] && kill "$p" 2>/dev/null; done; wait 2>/dev/null || true; }
trap cleanup EXIT
# The controller's CPU time and peak RSS, sampled each second (the first one dies by SIGKILL).
sample() {
  local p=$1 tag=$2
  while kill -0 "$p" 2>/dev/null; do
    { read -r -a st < "/proc/$p/stat" && hwm=$(awk '/VmHWM/ {print $2}' "/proc/$p/status") &&
      echo "$tag ${st[13]} ${st[14]} $hwm" > "$work/usage.$tag"; } 2>/dev/null || true
    sleep 1
  done
}
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
