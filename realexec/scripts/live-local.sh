#!/usr/bin/env bash
# A live run on one machine: 4 job machines and 2 warm standbys as local agents on
# loopback, the reference training job, the byterobust stack and a scripted fault
# schedule injected through `faultline live inject`. Prints the measured ETTR, then
# `faultline sim replay` of the run's event log under the same stack, and last a line
# `live ETTR L%  replayed ETTR R%  diff D pts`; exits 1 when D is over 5 points, or when
# the replay's decisions differ from the live run's beyond the listed unmodelled
# differences (its line `decisions: K of N match the live run`; docs/running-live.md).
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
#                          machine_down, stop, sdc, hang), with their repairs, at their
#                          usual (scaled) times; e.g. --faults sdc for a short run whose one
#                          incident the localization module decides.
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
        [[ $# -ge 2 && ,$2, =~ ^(,(kill|crash|machine_down|stop|sdc|hang))+,$ ]] ||
          usage_error "--faults: expected kill, crash, machine_down, stop, sdc or hang" \
            "separated by commas, got '${2:-}'"
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
at() {
  local t=$1; shift
  wanted "$@" || return 0
  local now=$(( $(date +%s) - t0 )); [ "$now" -lt "$t" ] && sleep $((t - now)); "$@"
}
t0=$(date +%s)
# The schedule scales with the run (the default is 600 s).
s() { echo $(( $1 * duration / 600 )); }
at "$(s 60)"  inject m1 kill
at "$(s 130)" inject m2 crash "CUDA error: an illegal memory access was encountered"
at "$(s 200)" inject m3 machine_down
at "$(s 230)" start_agent m3
at "$(s 240)" inject m3 repair
at "$(s 300)" inject m0 stop
at "$(s 380)" inject m0 repair
at "$(s 420)" inject m1 sdc "after=3"
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
if [ "$decisions_rc" -ne 0 ]; then
  echo "live-local.sh: the replay's decisions differ from the live run's beyond the listed" \
    "unmodelled differences: $(tail -1 "$work/replay.err")" >&2
  exit 1
fi
