# The set-up that live-scale.sh and live-storm.sh share: a virtual fleet (`faultline-live
# fleet`) against the real controller on loopback. Sourced by them (not run) once they have
# read build, work and agents from their arguments.

# fleet_setup NAME: bin and py; the file descriptors AGENTS agents need (NAME, the calling
# script, in the message; exit 2); a fresh state directory work (made absolute) with a token.
fleet_setup() {
  local name=$1 need
  bin=$build/bin
  py=/usr/bin/python3
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  need=$((agents * 4 + 200))
  if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    echo "$name: $agents agents need about $need file descriptors; ulimit -n is $(ulimit -n)" >&2
    exit 2
  fi
  rm -rf "$work"; mkdir -p "$work"; work=$(cd "$work" && pwd)
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"; chmod 600 "$work/token"
}

# fleet_port MACHINES: prints a port the kernel finds free (runs side by side, as under ctest
# -j2, do not meet on one) and above the job's ports: job.master_port 29500, the grouped
# probes' ports from 29600 and the replays' from 29700, up to 29699 + MACHINES, which reach the
# kernel's ephemeral ports (32768 up) from about 3,070 machines on; the config check refuses a
# controller port among them.
fleet_port() {
  "$py" - "$1" <<'PY'
import socket, sys
top, held = 29699 + int(sys.argv[1]), []
while len(held) < 1000 and (not held or held[-1].getsockname()[1] <= top):
    held.append(socket.socket())
    held[-1].bind(("127.0.0.1", 0))
if held[-1].getsockname()[1] <= top:
    sys.exit(f"no free port above the job's ports (above {top}) in 1000 tries")
print(held[-1].getsockname()[1])
PY
}

# fleet_config NAME STEP_S STALL_WINDOW_S: $work/live.json, the byterobust stack on AGENTS
# machines and $standby standbys (a pool of all of them), the controller on $port, the job's
# nominal step STEP_S and the stall window STALL_WINDOW_S; NAME in its description.
fleet_config() {
  "$py" - "$work" "$agents" "$standby" "$port" "$bin" "$1" "$2" "$3" <<'PY'
import json, sys
work, n, s, port, bin_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
name, step, stall = sys.argv[6], float(sys.argv[7]), int(sys.argv[8])
m = lambda name: {"name": name, "addr": "127.0.0.1", "workdir": f"{work}/hosts/{name}"}
cfg = {
    "description": f"{name}: {n} virtual agents + {s} standbys",
    "controller": f"127.0.0.1:{port}", "token_file": "token",
    "machines": [m(f"m{i}") for i in range(n)], "standby": [m(f"s{i}") for i in range(s)],
    "job": {"versions": {"v1": [f"{bin_}/faultline-trainjob"]}, "master_port": 29500,
            "nominal_step_time_s": step, "replay_steps": 4},
    "policy": {"stack": "byterobust",
               "params": {"stall_window_s": stall, "recrash_window_s": 20, "probe_deadline_s": 30,
                          "standby_pool": s}},
    "seed": 7, "state_dir": "state", "trainjob_bin": f"{bin_}/faultline-trainjob"}
json.dump(cfg, open(f"{work}/live.json", "w"), indent=1)
PY
}

# The controller ($ctl) and the fleet ($fleet) stopped on exit (0: not running).
cleanup() { for p in $ctl $fleet; do [ "$p" != 0 ] && kill "$p" 2>/dev/null; done; wait 2>/dev/null || true; }

# sample PID TAG: the controller's CPU time and peak RSS, sampled each second into
# $work/usage.TAG while PID lives (the first one dies by SIGKILL).
sample() {
  local p=$1 tag=$2
  while kill -0 "$p" 2>/dev/null; do
    { read -r -a st < "/proc/$p/stat" && hwm=$(awk '/VmHWM/ {print $2}' "/proc/$p/status") &&
      echo "$tag ${st[13]} ${st[14]} $hwm" > "$work/usage.$tag"; } 2>/dev/null || true
    sleep 1
  done
}
