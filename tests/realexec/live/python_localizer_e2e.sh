#!/usr/bin/env bash
# A policy module written in Python, live (issue 41). First the shipped demo
# (realexec/scripts/live-local.sh) with the Python port of the example localizer
# (examples/py-localizer/pp_group_replay.py) loaded into the controller, the agents and the
# replay, and only the demo's silent data corruption injected (--faults sdc: m1 corrupts
# from its 4th step, the NaN passes bit-wise alignment, and the byterobust stack hands the
# failure to the localization module): the event log must show the Python localizer's
# begin() (a RunReplay over every pipeline group) and answer() (m1 evicted as its failing
# group), and `sim replay --check-decisions` under the same plugin must take every one of
# the live run's decisions. Then the fallback, in two 3 s runs of a controller and one agent:
# a Python checkpoint planner whose plan() raises, and one whose plan() never returns
# (deadline_s 0.5), are each reported in one line on the controller's stderr naming the
# module, its file and the method; the built-in planner's plan is taken instead, the job
# starts and trains, and the controller exits 0 at the end of its duration.
#   python_localizer_e2e.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
src=$(cd "$1" && pwd); build=$(cd "$2" && pwd); work=$3
bin=$build/bin
fail() { echo "FAIL: $*" >&2; exit 1; }
rm -rf "$work"; mkdir -p "$work"; work=$(cd "$work" && pwd)
py=/usr/bin/python3
[ -x "$py" ] || py=python3

# ---------------------------------------------------------------- the demo, Python localizer
# 45 s: the corruption comes at 31 s (the demo's schedule scaled), m1's repair at 37 s.
demo=$work/demo
bash "$src/realexec/scripts/live-local.sh" "$build" "$demo" 45 \
  --plugin "$src/examples/py-localizer/pp_group_replay.py" \
  --param localization=pp-group-replay --faults sdc > "$work/demo.out" 2>&1 ||
  { cat "$work/demo.out"; fail "live-local.sh with the Python localizer"; }
grep -q "faultline-live: policy module" "$demo/controller.log" &&
  { grep "policy module" "$demo/controller.log"; fail "the Python localizer failed live"; }
"$py" - "$demo/state/events.jsonl" "$demo/replay.txt" <<'PY' || fail "the Python localizer live"
import json, re, sys
records = [json.loads(line) for line in open(sys.argv[1])]
notes = [r["text"] for r in records if r["kind"] == "note"]
assert any(re.search(r"^modules: .*localization pp-group-replay v1", n) for n in notes), \
    "the event log does not name the Python localizer: %s" % notes[:1]
actions = [r["action"] for r in records if r["kind"] == "action"]
mine = [a for a in actions if a.get("reason", "").startswith("pp-group replay:")]
began = [a for a in mine if a["type"] == "RunReplay"]
evicted = [a for a in mine if a["type"] == "EvictMachines"]
assert began, "no RunReplay from the Python localizer's begin()"
# pp 1, dp 4: every pipeline group is one machine, replayed as a group of its own.
assert all(len(g) == 1 for g in began[0]["groups"]) and len(began[0]["groups"]) == 4, began[0]
assert evicted, "no eviction from the Python localizer's answer()"
assert evicted[0]["machines"] == [1], evicted[0]  # m1, the corrupting machine
assert evicted[0]["mechanism"] == "analyzer_over_eviction", evicted[0]
assert evicted[0]["reason"] == "pp-group replay: evict 1 failing pipeline group(s)", evicted[0]
faults = [r for r in records if r["kind"] == "fault"]
assert [(f["fault"], f["machine"]) for f in faults] == [("sdc", 1)], faults
text = open(sys.argv[2]).read()
m = re.search(r"^decisions: (\d+) of (\d+) match the live run.*$", text, re.M)
assert m and m.group(1) == m.group(2), "the replay's decisions: %s" % (m and m.group(0))
print("python localizer: %d decisions live (%s), %s" %
      (len(mine), ", ".join(a["type"] for a in mine), m.group(0)))
PY
grep "^live ETTR" "$work/demo.out"

# ---------------------------------------------------------------- the fallback
# A controller with one agent (one machine, the reference training job) for 3 s: the policy
# starts as the agent joins and asks its checkpoint planner for a plan, which fails; the
# built-in planner's plan is taken instead and the job trains until --duration.
cat > "$work/raising_planner.py" <<'PY'
import faultline


class RaisingPlanner(faultline.CheckpointPlanner):
    info = faultline.Info("py-raising-planner", version="1", summary="plan() raises")

    def plan(self, view):
        raise RuntimeError("no plan today")


faultline.register(RaisingPlanner)
PY
cat > "$work/looping_planner.py" <<'PY'
import faultline


class LoopingPlanner(faultline.CheckpointPlanner):
    info = faultline.Info("py-looping-planner", version="1", summary="plan() never returns")
    deadline_s = 0.5

    def plan(self, view):
        while True:
            pass


faultline.register(LoopingPlanner)
PY
# A port the kernel finds free (ctest runs this beside other tests).
free_port() {
  "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
agent=
trap '[ -z "$agent" ] || kill "$agent" 2>/dev/null || true' EXIT
falls_back() {  # NAME PLUGIN MODULE EXPECTED_REGEX: the run, its report checked
  local dir=$work/$1
  mkdir -p "$dir"
  printf 'python-localizer-e2e-token-0123456789\n' > "$dir/token"
  chmod 600 "$dir/token"
  cat > "$dir/live.json" <<JSON
{"controller": "127.0.0.1:$(free_port)", "token_file": "token",
 "machines": [{"name": "m0", "addr": "127.0.0.1", "workdir": "$dir/m0"}],
 "job": {"versions": {"v1": ["$bin/faultline-trainjob", "--seed", "11", "--hidden", "48",
                             "--step-ms", "200"]},
         "master_port": $(free_port), "nominal_step_time_s": 0.2},
 "policy": {"stack": "byterobust", "params": {"checkpoint": "$3", "standby_pool": 0}},
 "trainjob_bin": "$bin/faultline-trainjob", "state_dir": "state"}
JSON
  local rc=0 t0 t1
  t0=$(date +%s.%N)
  timeout 60 "$bin/faultline" live run "$dir/live.json" --duration 3 --plugin "$2" \
    > "$dir/controller.out" 2> "$dir/controller.err" &
  local ctl=$!
  "$bin/faultline" agent "$dir/live.json" --name m0 --plugin "$2" > "$dir/agent.log" 2>&1 &
  agent=$!
  wait $ctl || rc=$?
  t1=$(date +%s.%N)
  kill "$agent" 2>/dev/null || true
  wait "$agent" 2>/dev/null || true
  agent=
  [ $rc -eq 0 ] || { cat "$dir/controller.err"; fail "$1: the controller exited $rc, expected 0"; }
  grep -q "run duration reached" "$dir/controller.out" ||
    { cat "$dir/controller.out"; fail "$1: the controller did not run to the end of its duration"; }
  awk -v a="$t0" -v b="$t1" 'BEGIN { exit !(b - a >= 3) }' ||
    fail "$1: the controller ended before its 3 s"
  # One line on the controller's stderr, naming the module, its file and the method.
  local lines
  lines=$(grep -c "policy module" "$dir/controller.err" || true)
  [ "$lines" -eq 1 ] ||
    { cat "$dir/controller.err"; fail "$1: expected one line reporting the module, got $lines"; }
  local tail="; the built-in checkpoint module '[a-z0-9_-]+' decides for the rest of the run"
  grep -Eq "^faultline-live: policy module $4$tail\$" "$dir/controller.err" ||
    { cat "$dir/controller.err"; fail "$1: the report is not '$4'"; }
  grep "policy module" "$dir/controller.err"
  # It kept running: the built-in planner's plan, then the job started and trained.
  "$py" - "$dir/state/events.jsonl" <<'PY' || fail "$1: the run after the module's failure"
import json, sys
records = [json.loads(line) for line in open(sys.argv[1])]
plans = [r for r in records if r["kind"] == "action" and r["action"]["type"] == "SetCheckpointPlan"]
assert len(plans) == 1, "checkpoint plans: %s" % plans
after = [r for r in records if r["t_s"] > plans[0]["t_s"]]
assert any(r["kind"] == "event" and r["event"]["type"] == "JobStarted" for r in after), \
    "the job did not start after the fallback"
steps = [r["step"] for r in after if r["kind"] == "progress" and r["step"] > 0]
assert len(steps) >= 2, "the job did not train after the fallback: steps %s" % steps
print("  then the built-in plan (%s), the job started, %d steps" %
      (plans[0]["action"]["tier"], len(steps)))
PY
}
falls_back raising "$work/raising_planner.py" py-raising-planner \
  "checkpoint/py-raising-planner \(raising_planner\.py\): plan\(\) raised\
 RuntimeError: no plan today \(raising_planner\.py:[0-9]+\)"
falls_back looping "$work/looping_planner.py" py-looping-planner \
  "checkpoint/py-looping-planner \(looping_planner\.py\): plan\(\) did not\
 return within its deadline_s \(0\.5 s\)"
echo "python_localizer_e2e: ok"
