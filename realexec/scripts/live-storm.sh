#!/usr/bin/env bash
# A fault storm big enough to measure: AGENTS virtual agents (`faultline-live fleet`, the real
# agent code, fake ranks) plus standbys against the real controller (`faultline-live live
# run`) on loopback, with QUOTA faults of every kind the fleet expresses (rank crash, hang,
# NaN loss, machine loss, rack partition, slow host), each with an id and a target machine,
# paced so that the job runs when a fault lands and, with probability 0.3, a second fault
# lands while the first is handled; the controller is killed with SIGKILL and restarted at
# RESTART_AT s (0: never). Each fault is matched to the controller's first action that
# addresses it in the event log (docs/live-scale.md, "The storm"); `faultline sim replay`
# then replays the event log and checks the live decisions.
#
# Prints one JSON line per fault kind ({"kind": ...}) and, as its last line, one JSON object:
#   agents, load_avg (1 min, at the start and the end), faults, decisions, decision_p50_s,
#   decision_p99_s (every kind but hang and slow: injection -> the first action addressing
#   the fault, on the controller's run-time clock), hang_detect_p50_s, hang_detect_p99_s,
#   covered (faults whose stop an earlier fault's decision already made), undecided,
#   lost_events, false_evictions, kill_lag_p50_s (decision action -> the kill at the
#   fault's agent), replay_{live,matched,explained,unexplained,seconds}, controller_cpu_s,
#   controller_rss_mib. Files in STATE_DIR: faults.jsonl (one line per fault, its decision).
# Exit status: 0 when lost_events = 0, false_evictions = 0, decisions >= 50 and
# decision_p99_s <= 1 (and the run and the replay ran); 1 when one of those fails; 2 for
# bad arguments.
#
# usage: realexec/scripts/live-storm.sh BUILD_DIR STATE_DIR AGENTS [QUOTA [SEED]]
#   QUOTA: faults of each kind (default 50); SEED: the storm's seed (default 11).
#   Environment: RESTART_AT (default 60), MAX_S (the storm's limit, default 1800),
#   REPLAY_TIMEOUT_S (default 900).
set -euo pipefail
if [ $# -lt 3 ] || [ $# -gt 5 ]; then
  echo "usage: $0 BUILD_DIR STATE_DIR AGENTS [QUOTA [SEED]]" >&2
  exit 2
fi
build=$(cd "$1" && pwd); work=$2; agents=$3; quota=${4:-50}; seed=${5:-11}
restart_at=${RESTART_AT:-60}; max_s=${MAX_S:-1800}; replay_timeout=${REPLAY_TIMEOUT_S:-900}
case "$agents$quota$seed$restart_at$max_s$replay_timeout" in
  *[!0-9]*) echo "live-storm.sh: AGENTS, QUOTA, SEED, RESTART_AT, MAX_S, REPLAY_TIMEOUT_S: expected integers" >&2; exit 2;;
esac
[ "$agents" -ge 16 ] || { echo "live-storm.sh: AGENTS: expected at least 16" >&2; exit 2; }
. "$(dirname "$0")/lib/fleet-run.sh"
fleet_setup live-storm.sh
# Standbys: lost machines come back 12 s later and partitioned ones after their repair check,
# so the pool refills; a quarter more than live-scale.sh's for the faster storm.
standby=$((agents / 20 > 12 ? agents / 20 : 12))
port=$(fleet_port "$((agents + standby))")
# A 0.5 s step (the job is running again a few steps after a restart) and a 5 s stall window
# (hangs are detected within seconds), so that 6 x QUOTA faults fit in minutes.
fleet_config live-storm.sh 0.5 5
ctl=0; fleet=0
trap cleanup EXIT
cut -d' ' -f1 /proc/loadavg > "$work/load.start"
start=$(date +%s)
"$bin/faultline-live" live run "$work/live.json" --fresh --duration $((max_s + 60)) \
  > "$work/controller1.log" 2>&1 &
ctl=$!; sample $ctl 1 &
sleep 0.5
quiet=()
[ "$restart_at" -gt 0 ] && quiet=(--quiet-at "$restart_at" --quiet-for 15)
"$bin/faultline-live" fleet "$work/live.json" --threads 2 --duration $((max_s + 120)) \
  --storm "$seed" --quota "$quota" --storm-start 15 --rack 4 --partition-s 8 --slow-s 1 \
  --gap-min 0.8 --gap-max 2 --overlap 0.3 --hang-hold 15 --revive 12 --settle 15 "${quiet[@]}" \
  --out "$work/fleet.jsonl" > "$work/fleet.out" 2> "$work/fleet.err" &
fleet=$!
over() { grep -q '"storm_over"' "$work/fleet.jsonl" 2>/dev/null; }
restarted=0
while ! over && kill -0 $fleet 2>/dev/null && [ $(($(date +%s) - start)) -lt "$max_s" ]; do
  if [ "$restart_at" -gt 0 ] && [ $restarted = 0 ] && [ $(($(date +%s) - start)) -ge "$restart_at" ]; then
    kill -9 $ctl; wait $ctl 2>/dev/null || true
    sleep 1
    "$bin/faultline-live" live run "$work/live.json" --duration $((max_s + 60)) \
      > "$work/controller2.log" 2>&1 &
    ctl=$!; sample $ctl 2 &
    restarted=1
  fi
  sleep 1
done
storm_s=$(($(date +%s) - start))
cut -d' ' -f1 /proc/loadavg > "$work/load.end"
# The controller stops first (SIGTERM: it writes its summary), then the fleet.
kill -TERM $ctl 2>/dev/null || true; wait $ctl 2>/dev/null || true; ctl=0
kill -TERM $fleet 2>/dev/null || true; wait $fleet 2>/dev/null || true; fleet=0
over || echo "live-storm.sh: the storm did not finish within $max_s s" >&2
t0=$(date +%s.%N)
replay_rc=0
timeout "$replay_timeout" "$bin/faultline" sim replay "$work/state/events.jsonl" --replicas 1 \
  --format json > "$work/replay.json" 2> "$work/replay.err" || replay_rc=$?
t1=$(date +%s.%N)
"$py" "$(dirname "$0")/storm_report.py" "$work" "$storm_s" "$replay_rc" "$t0" "$t1"
