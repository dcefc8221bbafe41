"""What the Python end-to-end tests share: a live cluster on loopback (a controller and one agent
per machine, real processes started from the config the test writes), the event log's JSON
lines, and the replay check (`faultline sim replay` takes the live run's decisions).

Used by live_ddp_e2e.py and live_replicas_e2e.py (under the real controller) and
replicas_e2e.py (its JSON-lines reader). Not a test itself (unittest discovers test_*.py).
"""

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def read_lines(path):
    """The JSON objects of a JSON-lines file ([] when it does not exist); a line being written
    (not JSON yet) is skipped."""
    try:
        with open(path) as f:
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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def job_ports(machines):
    """A job.master_port for a live job of `machines` machines whose ports are all free now: the
    port itself, the replicas' stores above it (+1 ..), the grouped probes' (+100 ..) and the
    replays' (+200 ..). Below the kernel's ephemeral range, so that no connection's local port
    (the tests' own gloo and TCP clients) takes one of them while the run goes on: a replay
    whose port had been taken that way waited 60 s for its peer and failed its group."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_lo = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_lo = 32768
    lo, hi = 10000, max(10001, ephemeral_lo - 200 - machines - 1)
    rng = random.Random(os.getpid() ^ int(time.time() * 1000))
    for _ in range(500):
        base = rng.randrange(lo, hi)
        ports = [base + d for off in (0, 100, 200) for d in range(off, off + machines + 1)]
        socks = []
        try:
            for p in ports:
                sock = socket.socket()
                socks.append(sock)
                sock.bind(("", p))
            return base
        except OSError:
            pass
        finally:
            for sock in socks:
                sock.close()
    raise Failure("no free job ports below %d" % ephemeral_lo)


def is_event(r, kind):
    return r.get("kind") == "event" and r.get("event", {}).get("type") == kind


def require_torch(python):
    """Fails (one line) when `python` cannot import torch.distributed: the tests must not pass
    without it."""
    ok = subprocess.call([python, "-c", "import torch.distributed"], stderr=subprocess.DEVNULL)
    check(ok == 0, "%s cannot import torch: install python3-torch (.ci/install-deps)" % python)


class LiveCluster:
    """A fresh work directory with a token, and the processes of a live run on loopback.
    Subclasses write the config (write_config) and keep machine names in self.names."""

    def __init__(self, args):
        self.args = args
        self.dir = os.path.abspath(args.workdir)
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        self.procs = {}
        self.names = []
        self.token = os.path.join(self.dir, "token")
        with open(os.open(self.token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
            f.write("python-e2e-token-%d-0123456789abcdef\n" % os.getpid())
        self.config = os.path.join(self.dir, "live.json")

    def write_config(self, description, machines, standby, job, policy):
        """The config of a run on loopback: `machines` then `standby` (names), each with its
        workdir in the run's directory; the job's and the policy's sections as given."""
        machine = lambda n: {"name": n, "addr": "127.0.0.1", "workdir": self.workdir(n)}
        config = {
            "description": description,
            "controller": "127.0.0.1:%d" % free_port(),
            "token_file": self.token,
            "machines": [machine(n) for n in machines],
            "standby": [machine(n) for n in standby],
            "job": job,
            "policy": policy,
            "seed": 7,
            "state_dir": os.path.join(self.dir, "state"),
            "trainjob_bin": self.args.trainjob,
            "heartbeat_s": 0.5,
            "heartbeat_timeout_s": 3,
        }
        with open(self.config, "w") as f:
            json.dump(config, f, indent=2)
        self.names = list(machines) + list(standby)

    def workdir(self, name):
        return os.path.join(self.dir, name)

    def spawn(self, key, argv):
        log = open(os.path.join(self.dir, key + ".log"), "ab")
        self.procs[key] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                           start_new_session=True)

    def start(self):
        self.spawn("controller", [self.args.faultline, "live", "run", self.config, "--fresh"])
        for n in self.names:
            self.spawn("agent-" + n, [self.args.faultline, "agent", self.config, "--name", n])

    def restart_controller(self):
        """The controller dies (SIGKILL, as a crash: no summary, nothing flushed on purpose) and
        a new one starts on the same config and state directory, which resumes from the journal.
        Returns the run time of the new controller's "restart" record."""
        old = self.procs["controller"]
        os.killpg(old.pid, signal.SIGKILL)
        old.wait()
        before = len([r for r in self.records() if r.get("kind") == "restart"])
        self.spawn("controller", [self.args.faultline, "live", "run", self.config])
        restarts = lambda: [r for r in self.records() if r.get("kind") == "restart"]
        end = time.monotonic() + 30
        while len(restarts()) <= before:
            check(self.procs["controller"].poll() is None,
                  "the restarted controller exited %s" % self.procs["controller"].poll())
            check(time.monotonic() < end, "no \"restart\" record 30 s after the controller "
                  "was started again")
            time.sleep(0.1)
        return restarts()[-1]["t_s"]

    def status(self):
        """`faultline live status --json` of the running controller."""
        p = subprocess.run([self.args.faultline, "live", "status", self.config, "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        check(p.returncode == 0, "live status --json: exit %d: %s" % (p.returncode,
                                                                      p.stderr.strip()))
        return json.loads(p.stdout)

    def stop(self):
        """Kills what this test started (each process group, by the id it got)."""
        for p in self.procs.values():
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def inject(self, machine, fault, detail=None):
        """`faultline live inject`; returns the run time of the fault's record."""
        argv = [self.args.faultline, "live", "inject", self.config, "--machine", machine,
                "--fault", fault] + ([] if detail is None else ["--detail", detail])
        same = lambda r: r.get("kind") == "fault" and r.get("fault") == fault
        before = sum(1 for r in self.records() if same(r))
        rc = subprocess.call(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        check(rc == 0, "inject %s on %s: exit %d" % (fault, machine, rc))
        # This fault's record, not an earlier one of the same kind.
        end = time.monotonic() + 10
        while True:
            found = [r for r in self.records() if same(r)]
            if len(found) > before:
                return found[before]["t_s"]
            check(time.monotonic() < end, "timed out after 10 s waiting for the %s fault in the "
                  "event log" % fault)
            time.sleep(0.2)

    def records(self):
        return read_lines(os.path.join(self.dir, "state", "events.jsonl"))

    def wait_for(self, pred, timeout_s, what="a record", forbid=None, until=None):
        """The first record matching pred; Failure (one line naming what was awaited) after
        timeout_s, when the controller exits, or when a record matching forbid appears.
        until: a function called each poll that may raise Failure (a file-based condition)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for r in self.records():
                if forbid is not None and forbid(r):
                    raise Failure("while waiting for %s: a %s at t=%.1f s (the world restarted)"
                                  % (what, r.get("event", {}).get("type", r.get("kind")),
                                     r.get("t_s", -1)))
                if pred(r):
                    return r
            if until is not None:
                until()
            check(self.procs["controller"].poll() is None,
                  "the controller exited (%s) while waiting for %s"
                  % (self.procs["controller"].poll(), what))
            time.sleep(0.2)
        raise Failure("timed out after %g s waiting for %s" % (timeout_s, what))

    @contextlib.contextmanager
    def kept_on_failure(self):
        """The run: its processes are killed at the end; its directory is removed after a
        success and kept (and named) after a failure."""
        try:
            yield self
        except Exception:
            print("kept %s for inspection" % self.dir, file=sys.stderr)
            raise
        finally:
            self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def wait_step(self, step, timeout_s):
        reached = lambda r: r.get("kind") == "progress" and r.get("step", -1) >= step
        return self.wait_for(reached, timeout_s, "step %d in the event log" % step)


def check_replay_decisions(args, workdir, why_ettr="", ettr_points=None):
    """`faultline sim replay` of the run's event log (replica 0 under the recorded seed): every
    live decision matched, or each mismatch explained by a listed unmodelled difference. Prints
    the ETTRs beside each other (`why_ettr`: what the replay leaves out); with ettr_points, the
    replayed ETTR must be within that many points of the live one beyond the pauses between
    steps that no record explains (a loaded host's: the replay measures them,
    `unmodelled_pauses`). Returns the replay's result document."""
    events = os.path.join(workdir, "state", "events.jsonl")
    p = subprocess.run([args.faultline, "sim", "replay", events, "--replicas", "1",
                        "--format", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    check(p.returncode == 0, "sim replay of %s: exit %d: %s" % (events, p.returncode,
                                                                 p.stderr.strip()))
    out = json.loads(p.stdout)
    d = out["decisions"]
    print("decisions: %d of %d match the live run (%d explained, %d unexplained); ETTR live "
          "%.2f%%, replayed %.2f%%%s"
          % (d["matched"], d["live"], d["explained"], d["unexplained"],
             100 * out["live"]["ettr"], 100 * out["sim_ettr"]["mean"],
             " (%s)" % why_ettr if why_ettr else ""))
    m = d["first_unexplained"]
    side = lambda x: "nothing" if x is None else "#%d t=%.2f s %s" % (x["index"], x["t_s"],
                                                                       x["text"])
    check(d["unexplained"] == 0,
          "the replay's decisions differ from the live run's, unexplained: live %s, sim %s"
          % (side(m and m["live"]), side(m and m["sim"])))
    if ettr_points is not None:
        live, sim = 100 * out["live"]["ettr"], 100 * out["sim_ettr"]["mean"]
        load = out["unmodelled_pauses"]["pts"]
        print("ETTR live %.2f%%, replayed %.2f%%: %.2f points apart, %.2f of them pauses no "
              "record explains (%d gaps)" % (live, sim, abs(live - sim), load,
                                             out["unmodelled_pauses"]["gaps"]))
        check(abs(live - sim) <= ettr_points + load,
              "ETTR live %.2f%%, replayed %.2f%%: %.2f points apart, more than %g beyond the "
              "%.2f points of unexplained pauses" % (live, sim, abs(live - sim), ettr_points,
                                                     load))
    return out


def main(doc, run, replay_flag=False):
    """The scripts' command line: run(args); a Failure is one line on stderr and exit 1."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--faultline", required=True)
    ap.add_argument("--trainjob", default="", help="faultline-trainjob, for the policy's probes")
    ap.add_argument("--python", required=True)
    ap.add_argument("--example", required=True)
    ap.add_argument("--workdir", required=True)
    if replay_flag:
        ap.add_argument("--replay", action="store_true",
                        help="last, check that `faultline sim replay` takes the live decisions")
    args = ap.parse_args()
    try:
        run(args)
    except Failure as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)
