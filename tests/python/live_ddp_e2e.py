#!/usr/bin/env python3
"""End to end: the PyTorch DDP example (examples/pytorch/ddp_gloo.py) under real live mode.

A controller and five agents on loopback (4 job machines, 1 standby, 1 rank each) run the
example with python3. The test kills machine m1's rank (`inject --fault kill`), then makes
m2's next gradient NaN (`inject --fault nan`), and checks that live mode saw both (a
ProcessExit and a NaN step in state/events.jsonl), restarted the job from a checkpoint each
time, and that the job, run to its last step, ends with parameters bit-identical (SHA-256)
to a fault-free run of the same example with the same world size, outside faultline.
Last, `faultline sim replay` of the run's event log must take the live run's decisions:
each one matched, or explained by a listed unmodelled difference (docs/running-live.md).
Exit 0 on success, 1 with the reason on failure (a missing torch included).
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

STEPS = 200
STEP_MS = 40
RANKS = 4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


class Cluster:
    def __init__(self, args):
        self.args = args
        self.dir = os.path.abspath(args.workdir)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.procs = {}
        token = os.path.join(self.dir, "token")
        with open(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("python-e2e-token-%d-0123456789abcdef\n" % os.getpid())
        names = ["m%d" % i for i in range(RANKS)] + ["s0"]
        machine = lambda n: {"name": n, "addr": "127.0.0.1", "workdir": os.path.join(self.dir, n)}
        self.digest = os.path.join(self.dir, "digest.live")
        self.example = [args.python, args.example, "--steps", str(STEPS), "--step-ms", str(STEP_MS)]
        self.job_env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "GLOO_SOCKET_IFNAME": "lo",
                        "OMP_NUM_THREADS": "1"}  # 5 torch processes share a small machine
        config = {
            "description": "python e2e: PyTorch DDP example under live mode",
            "controller": "127.0.0.1:%d" % free_port(),
            "token_file": token,
            "machines": [machine(n) for n in names[:RANKS]],
            "standby": [machine(n) for n in names[RANKS:]],
            "job": {"versions": {"v1": self.example + ["--digest", self.digest]},
                    "version": "v1", "gpus_per_machine": 1, "master_port": free_port(),
                    "nominal_step_time_s": STEP_MS / 1000, "env": self.job_env},
            "policy": {"stack": "byterobust",
                       "params": {"stall_window_s": 8, "recrash_window_s": 5,
                                  "probe_deadline_s": 60, "inspect_nic_s": 1,
                                  "standby_pool": 1}},
            "seed": 7,
            "state_dir": os.path.join(self.dir, "state"),
            "trainjob_bin": args.trainjob,
            "heartbeat_s": 0.5,
            "heartbeat_timeout_s": 3,
        }
        self.config = os.path.join(self.dir, "live.json")
        with open(self.config, "w") as f:
            json.dump(config, f, indent=2)
        self.names = names

    def spawn(self, key, argv):
        log = open(os.path.join(self.dir, key + ".log"), "ab")
        self.procs[key] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                           start_new_session=True)

    def start(self):
        self.spawn("controller", [self.args.faultline, "live", "run", self.config, "--fresh"])
        for n in self.names:
            self.spawn("agent-" + n, [self.args.faultline, "agent", self.config, "--name", n])

    def stop(self):
        """Kills what this test started (each process group, by the id it got)."""
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def inject(self, machine, fault):
        argv = [self.args.faultline, "live", "inject", self.config, "--machine", machine,
                "--fault", fault]
        rc = subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        check(rc == 0, "inject %s on %s: exit %d" % (fault, machine, rc))
        recorded = lambda r: r.get("kind") == "fault" and r.get("fault") == fault
        return self.wait_for(recorded, 10, "the %s fault in the event log" % fault)["t_s"]

    def records(self):
        try:
            with open(os.path.join(self.dir, "state", "events.jsonl")) as f:
                lines = f.read().splitlines()
        except OSError:
            return []
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # the line being written
        return out

    def wait_for(self, pred, timeout_s, what="a record"):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for r in self.records():
                if pred(r):
                    return r
            check(self.procs["controller"].poll() is None, "the controller exited early")
            time.sleep(0.2)
        raise Failure("timed out after %g s waiting for %s" % (timeout_s, what))

    def wait_step(self, step, timeout_s):
        reached = lambda r: r.get("kind") == "progress" and r.get("step", -1) >= step
        return self.wait_for(reached, timeout_s, "step %d" % step)

    def wait_started_after(self, t, timeout_s):
        return self.wait_for(lambda r: is_event(r, "JobStarted") and r["t_s"] > t, timeout_s,
                             "a JobStarted after t=%.1f" % t)


def is_event(r, kind):
    return r.get("kind") == "event" and r.get("event", {}).get("type") == kind


def check_replay_decisions(args, workdir):
    """`faultline sim replay` of the run's event log (replica 0 under the recorded seed): every
    live decision matched, or each mismatch explained by a listed unmodelled difference."""
    events = os.path.join(workdir, "state", "events.jsonl")
    p = subprocess.run([args.faultline, "sim", "replay", events, "--replicas", "1",
                        "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    check(p.returncode == 0, "sim replay of %s: exit %d: %s" % (events, p.returncode,
                                                                 p.stderr.strip()))
    d = json.loads(p.stdout)["decisions"]
    print("decisions: %d of %d match the live run (%d explained, %d unexplained)"
          % (d["matched"], d["live"], d["explained"], d["unexplained"]))
    m = d["first_unexplained"]
    side = lambda x: "nothing" if x is None else "#%d t=%.2f s %s" % (x["index"], x["t_s"],
                                                                       x["text"])
    check(d["unexplained"] == 0,
          "the replay's decisions differ from the live run's, unexplained: live %s, sim %s"
          % (side(m and m["live"]), side(m and m["sim"])))


def reference_digest(args, workdir):
    """The fault-free run: the same example, 4 ranks, no faultline (the library is a no-op)."""
    out = os.path.join(workdir, "digest.reference")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(RANKS), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    env.pop("FAULTLINE_REPORT_FD", None)
    log = open(os.path.join(workdir, "reference.log"), "ab")
    procs = [subprocess.Popen([args.python, args.example, "--steps", str(STEPS), "--digest", out],
                              env=dict(env, RANK=str(r)), stdin=subprocess.DEVNULL, stdout=log,
                              stderr=log)
             for r in range(RANKS)]
    codes = [p.wait(timeout=120) for p in procs]
    check(codes == [0] * RANKS, "the reference run failed: exit codes %s" % codes)
    with open(out) as f:
        return f.read().strip()


def run(args):
    t_begin = time.monotonic()
    torch_ok = subprocess.call([args.python, "-c", "import torch.distributed"],
                               stderr=subprocess.DEVNULL)
    check(torch_ok == 0,
          "%s cannot import torch: install python3-torch (.ci/install-deps)" % args.python)
    c = Cluster(args)
    try:
        reference = reference_digest(args, c.dir)
        c.start()
        # The kill comes 100 steps (about 6 s) into training: the replay starts its job after
        # the median start of the run (restarts included, slower than the first start), and a
        # kill before the replayed job runs is a decision the replay cannot take (CI saw it at
        # step 15: the first start took 2.2 s, the median one 3.7 s).
        c.wait_step(100, 90)
        t_kill = c.inject("m1", "kill")
        exited = lambda r: is_event(r, "ProcessExit") and r["t_s"] >= t_kill
        exit_ev = c.wait_for(exited, 20, "a ProcessExit")
        started = c.wait_started_after(t_kill, 60)
        resumed_at = started["event"].get("step", -1)
        print("kill at t=%.1f s: ProcessExit after %.1f s, resumed from step %d after %.1f s"
              % (t_kill, exit_ev["t_s"] - t_kill, resumed_at, started["t_s"] - t_kill))
        # From a checkpoint, not from scratch (which would also end bit-identical).
        check(resumed_at > 0, "the restart after the kill did not restore a checkpoint")
        c.wait_step(resumed_at + 15, 60)
        t_nan = c.inject("m2", "nan")
        # The poisoned step's gradient norm is NaN (its loss, computed before, is not): the
        # controller's step sample says nan, and the job restarts from before that step.
        nan_seen = lambda r: (is_event(r, "StepSample") and r["event"].get("nan")
                              and r["t_s"] >= t_nan)
        nan_ev = c.wait_for(nan_seen, 20, "a NaN step sample")
        nan_step = nan_ev["event"]["step"]
        started = c.wait_started_after(nan_ev["t_s"], 60)
        print("nan at t=%.1f s: NaN at step %d after %.1f s, resumed from step %d after %.1f s"
              % (t_nan, nan_step, nan_ev["t_s"] - t_nan, started["event"].get("step", -1),
                 started["t_s"] - t_nan))
        check(0 < started["event"].get("step", -1) < nan_step,
              "the restart after the NaN did not restore a checkpoint from before it")
        code = c.procs["controller"].wait(timeout=120)
        check(code == 0, "the controller exited %d, not 0 (the job finished)" % code)
        with open(c.digest) as f:
            live = f.read().strip()
        print("digest fault-free %s\ndigest live       %s" % (reference, live))
        check(live == reference, "the parameters after the faults differ from the fault-free run's")
        check_replay_decisions(args, c.dir)
        print("passed in %.1f s" % (time.monotonic() - t_begin))
    except Exception:
        print("kept %s for inspection" % c.dir, file=sys.stderr)
        raise
    finally:
        c.stop()
    shutil.rmtree(c.dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--faultline", required=True)
    ap.add_argument("--trainjob", default="", help="faultline-trainjob, for the policy's probes")
    ap.add_argument("--python", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    try:
        run(args)
    except Failure as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
