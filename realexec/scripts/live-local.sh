#!/usr/bin/env bash
# A live run on one machine: 4 job machines and 2 warm standbys as local agents on
# loopback, the reference training job, the byterobust stack and a scripted fault
# schedule injected through `faultline live inject`. Prints the measured ETTR, then
# `faultline sim replay` of the run's event log under the same stack, and last a line
# `live ETTR L%  replayed ETTR R%  diff D pts`; exits 1 when D is over 5 points, when
# the replay's decisions differ from the live run's beyond the listed unmodelled
# differences (its line `decisions: K of N match the live run`; docs/running-live.md), or
# when a scheduled fault of the job's own (nan, slow) was not seen where the job shows it:
# the NaN's step in rank 0's loss log and in a step sample the policy acted on, the slowed
# machine's steps at least twice as long as before (one line per fault, `observed: ...`).
#
# usage: realexec/scripts/live-local.sh BUILD_DIR WORK_DIR [DURATION_S] [options]
#
# options (after DURATION_S, which is then required):
#   --plugin FILE          load a policy-module plugin (FILE.py or FILE.so) into every
#                          program of the run: the controller, the agents, `live inject` and
#                          the `sim replay`; repeatable. (FAULTLINE_PLUGINS, ':'-separated,
#                          set in the environment, reaches them all as well.)
#   --param NAME=VALUE     set policy.params.NAME (a number, or a module's name), over the
#                          script's own; repeatable. E.g. a Python localizer:
#                            live-local.sh build /tmp/live 600 \
#                              --plugin examples/py-localizer/pp_group_replay.py \
#                              --param localization=pp-group-replay
#   --faults KIND[,KIND]   inject only the scheduled faults of these kinds (kill, crash,
#                          machine_down, nan, stop, sdc, slow, hang), with their repairs, at
#                          their usual (scaled) times; e.g. --faults sdc for a short run whose
#                          one incident the localization module decides.
set -euo pipefail
build=$(cd "$1" && pwd); work=$2; duration=${3:-600}
bin=$build/bin
plugin_args=() faults=""
pnames=(stall_window_s recrash_window_s probe_deadline_s standby_pool) pvals=(15 20 60 2)
usage_error() { echo "live-local.sh: $*" >&2; exit 2; }
set_param() {  # NAME VALUE: replaces the script's own value, or adds the parameter
  local i
  for i in "${!pnames[@]}"; do
    if [ "${pnames[$i]}" = "$1" ]; then pvals[$i]=$2; return; fi
  done
  pnames+=("$1"); pvals+=("$2")
}
if [ $# -gt 3 ]; then
  [[ $duration =~ ^[0-9]+$ ]] ||
    usage_error "expected DURATION_S before the options, got '$duration'"
  set -- "${@:4}"
  while [ $# -gt 0 ]; do
    case $1 in
      --plugin)
        [ $# -ge 2 ] && [ -f "$2" ] || usage_error "--plugin: expected a plugin file, got '${2:-}'"
        plugin_args+=(--plugin "$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"); shift 2 ;;
      --param)
        [[ $# -ge 2 && $2 =~ ^([a-z0-9_]+)=([A-Za-z0-9_.+-]+)$ ]] ||
          usage_error "--param: expected NAME=VALUE (a number or a module name), got '${2:-}'"
        set_param "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"; shift 2 ;;
      --faults)
        [[ $# -ge 2 && ,$2, =~ ^(,(kill|crash|machine_down|nan|stop|sdc|slow|hang))+,$ ]] ||
          usage_error "--faults: expected kill, crash, machine_down, nan, stop, sdc, slow or" \
            "hang separated by commas, got '${2:-}'"
        faults=$2; shift 2 ;;
      *) usage_error "unknown option '$1' (--plugin FILE, --param NAME=VALUE, --faults LIST)" ;;
    esac
  done
fi
params=""
for i in "${!pnames[@]}"; do
  v=${pvals[$i]}
  [[ $v =~ ^[-+]?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$ ]] || v="\"$v\""
  params+="${params:+, }\"${pnames[$i]}\": $v"
done
rm -rf "$work"; mkdir -p "$work"; work=$(cd "$work" && pwd)
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"; chmod 600 "$work/token"
# Ports the kernel finds free (python3), so that runs side by side (ctest -j2) do not meet on
# one; without python3, one drawn at random as before.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' \
    2>/dev/null || echo $(($1 + RANDOM % 200))
}
port=$(free_port 17700); master=$(free_port 29600)
machine() { printf '{"name":"%s","addr":"127.0.0.1","workdir":"%s/%s"}' "$1" "$work" "$1"; }
cat > "$work/live.json" <<JSON
{
  "description": "live-local.sh: 4 machines + 2 standbys on loopback, scripted faults",
  "controller": "127.0.0.1:$port",
  "token_file": "token",
  "machines": [$(machine m0), $(machine m1), $(machine m2), $(machine m3)],
  "standby": [$(machine s0), $(machine s1)],
  "job": {"versions": {"v1": ["$bin/faultline-trainjob", "--seed", "11", "--hidden", "48",
                              "--step-ms", "200", "--loss-log", "$work/loss.log"]},
          "master_port": $master, "nominal_step_time_s": 0.2, "replay_steps": 12},
  "policy": {"stack": "byterobust", "params": {$params}},
  "seed": 11,
  "state_dir": "state",
  "trainjob_bin": "$bin/faultline-trainjob"
}
JSON
pids=()
start_agent() {
  "$bin/faultline" agent "$work/live.json" --name "$1" ${plugin_args[@]+"${plugin_args[@]}"} \
    >> "$work/agent-$1.log" 2>&1 &
  pids+=($!)
}
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
"$bin/faultline" live run "$work/live.json" --fresh --duration "$duration" \
  ${plugin_args[@]+"${plugin_args[@]}"} > "$work/controller.log" 2>&1 &
ctl=$!
for m in m0 m1 m2 m3 s0 s1; do start_agent $m; done
inject() {
  "$bin/faultline" live inject "$work/live.json" --machine "$1" --fault "$2" ${3:+--detail "$3"} \
    ${plugin_args[@]+"${plugin_args[@]}"} || true
}
# --faults: a step of the schedule is the kind of the fault it injects; a repair, or an agent
# restarted, that of the last fault scheduled on its machine.
declare -A last_fault=()
wanted() {
  [ -n "$faults" ] || return 0
  local kind
  case $1 in
    inject) kind=$3; [ "$kind" = repair ] && kind=${last_fault[$2]:-} || last_fault[$2]=$kind ;;
    start_agent) kind=${last_fault[$2]:-} ;;
    *) return 0 ;;
  esac
  [[ ,$faults, == *,$kind,* ]]
}
scheduled=()  # the kinds injected that only the job itself can show (nan, slow): checked below
at() {
  local t=$1; shift
  wanted "$@" || return 0
  local now=$(( $(date +%s) - t0 )); [ "$now" -lt "$t" ] && sleep $((t - now))
  [ "$1" = inject ] && [[ $3 == nan || $3 == slow ]] && scheduled+=("$3")
  "$@"
}
t0=$(date +%s)
# The schedule scales with the run (the default is 600 s). The NaN comes from m2, not from
# rank 0's machine: the all-reduce carries it to every rank. m2 stays slow (3x its step time)
# until its hang, after which its eviction takes the slowdown out of the job, as the replay
# models it (a repair of a machine still in the job is not in the event log).
s() { echo $(( $1 * duration / 600 )); }
at "$(s 60)"  inject m1 kill
at "$(s 130)" inject m2 crash "CUDA error: an illegal memory access was encountered"
at "$(s 200)" inject m3 machine_down
at "$(s 230)" start_agent m3
at "$(s 240)" inject m3 repair
at "$(s 270)" inject m2 nan
at "$(s 300)" inject m0 stop
at "$(s 380)" inject m0 repair
at "$(s 420)" inject m1 sdc "after=3"
at "$(s 460)" inject m2 slow 3
at "$(s 500)" inject m1 repair
at "$(s 530)" inject m2 hang
wait $ctl || true
tail -1 "$work/controller.log"
# The replay of the run's event log (its calibration, incidents by mechanism), then both
# figures side by side. More than 5 points apart is a failure: the replay took the run's
# own timings, so it must land near what the run measured. --check-decisions: the replay
# must also take the live run's decisions, each mismatch explained by a listed
# unmodelled difference (its verdict is acted on after the ETTR line).
decisions_rc=0
"$bin/faultline" sim replay "$work/state/events.jsonl" --stack byterobust --check-decisions \
  ${plugin_args[@]+"${plugin_args[@]}"} > "$work/replay.txt" 2> "$work/replay.err" ||
  decisions_rc=$?
cat "$work/replay.txt"; cat "$work/replay.err" >&2
# Each scheduled fault of the job's own was seen where the job shows it (not only recorded,
# and not only replayed alike): a NaN loss in rank 0's loss log at the step of a step sample
# with its NaN, the policy's stop for it and a restart from before that step, after which the
# step trains to a finite loss; a slowdown in the step times rank 0 reports, the median at
# least twice that of the steps before it (a factor of 3 applied: room for a loaded host).
observed_rc=0
if [ ${#scheduled[@]} -gt 0 ]; then
  py=/usr/bin/python3
  [ -x "$py" ] || py=python3
  command -v "$py" > /dev/null ||
    { echo "live-local.sh: python3 is needed to check the injected ${scheduled[*]}" >&2; exit 2; }
  "$py" - "$work/state/events.jsonl" "$work/loss.log" "$(IFS=,; echo "${scheduled[*]}")" \
    <<'PY' || observed_rc=$?
import json, math, statistics, sys

log, loss_log, kinds = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
records = [json.loads(line) for line in open(log) if line.strip()]
names = records[0].get("machine_names", [])
faults = [r for r in records if r["kind"] == "fault"]
samples = [r for r in records if r["kind"] == "event" and r["event"]["type"] == "StepSample"]


def events(kind, t0, t1):
    return [r for r in records if r["kind"] == "event" and r["event"]["type"] == kind and
            t0 <= r["t_s"] < t1]


def window(f):  # from fault record `f` to the next fault record (or the end of the log)
    return f["t_s"], min([g["t_s"] for g in faults if g["t_s"] > f["t_s"]] + [math.inf])


def check_nan(f):  # (ok, what was seen)
    t0, t1 = window(f)
    nan = [s for s in samples if t0 <= s["t_s"] < t1 and s["event"]["nan"]]
    if not nan:
        return False, "no step sample with a NaN after it"
    step, t = nan[0]["event"]["step"], nan[0]["t_s"]
    if nan[0]["event"].get("loss") is not None:
        return False, "the step sample of step %d is NaN, its loss %r" % (
            step, nan[0]["event"]["loss"])
    # Rank 0's own log: the NaN at that step, then (after the restart) that step again with
    # a finite loss: the one-shot directive was consumed, the restored state is clean.
    at_step = [float(x[1]) for x in (line.split() for line in open(loss_log))
               if len(x) == 2 and x[0] == str(step)]
    first_nan = next((i for i, x in enumerate(at_step) if math.isnan(x)), None)
    if first_nan is None:
        return False, "rank 0's loss log has no NaN at step %d: %s" % (step, at_step)
    if not any(math.isfinite(x) for x in at_step[first_nan:]):
        return False, "step %d never trained to a finite loss after its NaN" % step
    detected = [r for r in records if r["kind"] == "note" and t <= r["t_s"] < t1 and
                r["text"].startswith("detected: metric anomaly loss NaN")]
    stops = [r for r in records if r["kind"] == "action" and t <= r["t_s"] < t1 and
             r["action"]["type"] == "StopJob" and
             r["action"].get("reason", "").startswith("metric anomaly")]
    if not detected or not stops:
        return False, "the policy did not stop the job for the NaN at step %d" % step
    started = events("JobStarted", t, t1)
    if not started or started[0]["event"]["step"] >= step:
        return False, "the job did not restart from before step %d (%s)" % (
            step, started[0]["event"] if started else "no restart")
    return True, ("step %d NaN in rank 0's loss log and its step sample (%.1f s); the policy "
                  "stopped the job (%s) and restarted it from step %d; step %d trained again "
                  "to a finite loss" % (step, t, stops[0]["action"]["reason"],
                                        started[0]["event"]["step"], step))


def check_slow(f):
    t0, t1 = window(f)
    restarts = events("JobStarted", t0, t1)  # a restart may have left the slow machine out
    t1 = min([t1] + [r["t_s"] for r in restarts])
    # The first sample after it is the step in flight when the job took it.
    slow = [s["event"]["step_time_s"] for s in samples if t0 < s["t_s"] < t1][1:]
    before = [s["event"]["step_time_s"] for s in samples if s["t_s"] < t0][-50:]
    if len(slow) < 5 or len(before) < 5:
        return False, "too few step samples: %d while slow, %d before" % (len(slow), len(before))
    slow_s, before_s = statistics.median(slow), statistics.median(before)
    if not slow_s >= 2 * before_s:
        return False, ("its steps took %.3f s (median of %d), not twice the %.3f s of the "
                       "steps before" % (slow_s, len(slow), before_s))
    acted = [r["text"] for r in records if r["kind"] == "note" and t0 <= r["t_s"] < t1 and
             r["text"].startswith("detected:")]
    return True, ("%d steps of median %.3f s against %.3f s before (%.1fx, factor %s); the "
                  "policy: %s" % (len(slow), slow_s, before_s, slow_s / before_s, f["detail"],
                                  acted[0] if acted else "nothing detected while it was slow"))


failed = 0
for kind in dict.fromkeys(kinds):
    mine = [f for f in faults if f["fault"] == kind]
    if not mine:
        print("live-local.sh: %s was injected but never recorded (the job did not take it)"
              % kind, file=sys.stderr)
        failed += 1
    for f in mine:
        ok, what = (check_nan if kind == "nan" else check_slow)(f)
        line = "%s on %s at %.1f s: %s" % (
            kind, names[f["machine"]] if f["machine"] < len(names) else f["machine"], f["t_s"], what)
        print(("observed: " if ok else "live-local.sh: not observed: ") + line,
              file=sys.stdout if ok else sys.stderr)
        failed += not ok
sys.exit(1 if failed else 0)
PY
fi
live=$(sed -n 's/^ETTR *live \([0-9.]*\)%.*/\1/p' "$work/replay.txt")
sim=$(sed -n 's/^ *sim  *\([0-9.]*\)%.*/\1/p' "$work/replay.txt")
if [ -z "$live" ] || [ -z "$sim" ]; then
  echo "live-local.sh: no ETTR figures in the replay's output ($work/replay.txt)" >&2
  exit 2
fi
awk -v l="$live" -v s="$sim" 'BEGIN {
  d = s - l; a = d < 0 ? -d : d
  printf "live ETTR %.1f%%  replayed ETTR %.1f%%  diff %.1f pts\n", l, s, a; fflush()
  if (a > 5) { print "live-local.sh: the replay is more than 5 points from the live run" > "/dev/stderr"; exit 1 }
}'
if [ "$observed_rc" -ne 0 ]; then
  echo "live-local.sh: a scheduled fault was not seen in the job (above)" >&2
  exit 1
fi
if [ "$decisions_rc" -ne 0 ]; then
  echo "live-local.sh: the replay's decisions differ from the live run's beyond the listed" \
    "unmodelled differences: $(tail -1 "$work/replay.err")" >&2
  exit 1
fi
