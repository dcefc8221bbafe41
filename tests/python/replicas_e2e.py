#!/usr/bin/env python3
"""End to end: fault-tolerant replica groups (faultline.replicas, examples/pytorch/ft_replicas.py).

This script plays the controller: it hosts the TCPStore for the whole run, writes the quorum
file, and runs 4 replicas (ids 0-3) plus a warm standby (id 4, started at once, waiting for a
quorum that contains it), one process each, gloo on loopback. Scenario:

  quorum 1  [0,1,2,3]      training from step 0
            SIGKILL replica 1 at step KILL_AT; the harness sees it exit (Popen.poll)
  quorum 2  [0,2,3]        the survivors redo the interrupted step, 3 replicas
  quorum 3  [0,2,3,4]      (a second later) the standby joins: state from a live peer
            SIGSTOP replica 2 at step HANG_AT (a hang): the others' collective times out
            (--timeout-s); once one reports the failure the harness SIGKILLs it
  quorum 4  [0,3,4]        to the last step

Checks: the survivors keep their pids and exit 0; no survivor's step counter stalls longer
than a quorum change (largest gap between consecutive committed steps, printed); the joiner's
parameters equal its peers' bit for bit when it joins and after its first step; every live
process reaches --steps with the same final digest; and a single-process replay of the
recorded membership of every step (same data, gradient mean over the members) ends with the
same parameters, to 1e-6 (gloo's all_reduce adds in another order than the replay's
sequential sum, so the last bits may differ; a wrong membership for one step is ~1e-4 off).
Exit 0 on success, 1 with the reason on failure (a missing torch included).
"""

import argparse
import datetime
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from live_harness import Failure, check, read_lines

STEPS = 70
STEP_MS = 30
REPLICAS = 4
STANDBY = 4           # the standby's replica id: a new id, never a dead one's
KILL_AT = 12
HANG_AT = 45
TIMEOUT_S = 4         # the replicas' collective timeout: how long a hang goes unnoticed
# A survivor's largest step gap: the failure is seen at once (the kernel closes the dead
# process's sockets), the harness writes the quorum within 50 ms of the exit and the group
# forms in well under a second; 10 s leaves room for a loaded 2-core CI machine. A hang is
# only noticed after TIMEOUT_S.
GAP_BOUND_S = 10.0
HANG_GAP_BOUND_S = TIMEOUT_S + GAP_BOUND_S
REFERENCE_TOLERANCE = 1e-6


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


class Controller:
    def __init__(self, args):
        import torch.distributed as dist
        self.args = args
        self.dir = args.workdir
        self.store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=30),
                                   wait_for_workers=False)
        self.address = "127.0.0.1:%d" % self.store.port
        self.quorum_file = os.path.join(self.dir, "quorum.json")
        self.number = 0
        self.members = []
        self.procs = {}
        self.reform = True  # re-form the quorum when a member reports a failure (see tick)

    def write_quorum(self, members, join=()):
        self.number += 1
        self.members = sorted(members)
        write_atomic(self.quorum_file, json.dumps({"quorum": self.number, "members": self.members,
                                                   "store": self.address, "join": sorted(join)}))
        print("%6.2f s quorum %d: members %s join %s" % (self.elapsed(), self.number,
                                                         self.members, sorted(join)))

    def elapsed(self):
        return time.monotonic() - self.t0

    def spawn(self, replica):
        env = dict(os.environ, FAULTLINE_REPLICA=str(replica), FAULTLINE_REPLICAS=str(REPLICAS),
                   FAULTLINE_QUORUM_FILE=self.quorum_file, OMP_NUM_THREADS="1",
                   GLOO_SOCKET_IFNAME="lo")
        reports = os.open(self.path("reports", replica),
                          os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        env["FAULTLINE_REPORT_FD"] = str(reports)
        log = open(self.path("log", replica), "ab")
        argv = [self.args.python, self.args.example, "--steps", str(STEPS), "--step-ms",
                str(STEP_MS), "--progress", self.path("progress", replica), "--digest",
                self.path("digest", replica), "--save", self.path("params", replica),
                "--timeout-s", str(TIMEOUT_S),
                "--quorum-wait-s", "60", "--join-wait-s", "120"]
        self.procs[replica] = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                               stdout=log, stderr=log, pass_fds=(reports,),
                                               start_new_session=True)
        os.close(reports)
        log.close()

    def path(self, kind, replica):
        ext = {"reports": "jsonl", "progress": "jsonl", "log": "log", "digest": "txt",
               "params": "pt"}[kind]
        return os.path.join(self.dir, "%s-%d.%s" % (kind, replica, ext))

    def progress(self, replica):
        return read_lines(self.path("progress", replica))

    def reports(self, replica):
        return read_lines(self.path("reports", replica))

    def last_step(self, replica):
        steps = [r["step"] for r in self.progress(replica) if "event" not in r]
        return max(steps) if steps else 0

    def tick(self):
        """What a controller does besides the scripted changes: a member that reports a failed
        collective of the current quorum while no process died (a collective that timed out on
        a loaded machine) waits for a new quorum; give it one with the same members."""
        if not self.reform:
            return
        failed = any(x["type"] == "quorum_failed" and x["quorum"] == self.number
                     for r in self.members for x in self.reports(r))
        if failed and all(self.procs[r].poll() is None for r in self.members):
            print("%6.2f s quorum %d failed without a death: re-forming it" % (self.elapsed(),
                                                                              self.number))
            self.write_quorum(self.members)

    def wait(self, pred, timeout_s, what, alive=()):
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if pred():
                return
            self.tick()
            for r in alive:
                code = self.procs[r].poll()
                check(code is None, "replica %d exited %s while waiting for %s (see %s)"
                      % (r, code, what, self.path("log", r)))
            time.sleep(0.05)
        raise Failure("timed out after %g s waiting for %s" % (timeout_s, what))

    def stop(self):
        """Kills what this test started (each process group, by the id it got)."""
        for p in self.procs.values():
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)


def load_example(path):
    spec = importlib.util.spec_from_file_location("ft_replicas_example", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def replay(example, membership, steps):
    """The arithmetic, independently: one model, each step's gradient the mean over that
    step's members of their local gradients (summed in id order), then SGD."""
    import torch
    model, optimizer = example.build(1)
    for step in range(1, steps + 1):
        members = membership[step]
        total = None
        for m in members:
            optimizer.zero_grad()
            example.local_loss(model, step, m).backward()
            g = [p.grad.clone() for p in model.parameters()]
            total = g if total is None else [a + b for a, b in zip(total, g)]
        for p, g in zip(model.parameters(), total):
            p.grad = g / len(members)
        optimizer.step()
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def gaps(records):
    """Largest time between consecutive committed steps, and the step it ended at."""
    steps = sorted((r["step"], r["t"]) for r in records if "event" not in r)
    worst = (0.0, None)
    for (_, t0), (s1, t1) in zip(steps, steps[1:]):
        worst = max(worst, (t1 - t0, s1))
    return worst


def run(args):
    t_begin = time.monotonic()
    rc = subprocess.call([args.python, "-c", "import torch.distributed"],
                         stderr=subprocess.DEVNULL)
    check(rc == 0, "%s cannot import torch: install python3-torch" % args.python)
    c = Controller(args)
    c.t0 = time.monotonic()
    try:
        c.write_quorum(range(REPLICAS))
        for r in list(range(REPLICAS)) + [STANDBY]:
            c.spawn(r)
        pids = {r: p.pid for r, p in c.procs.items()}
        everyone = list(range(REPLICAS)) + [STANDBY]

        # --- a replica dies ---
        c.wait(lambda: all(c.last_step(r) >= KILL_AT for r in range(REPLICAS)), 120,
               "replicas 0-3 at step %d" % KILL_AT, alive=everyone)
        c.wait(lambda: any(x["type"] == "waiting" for x in c.reports(STANDBY)), 60,
               "the standby's \"waiting\" report", alive=everyone)
        c.procs[1].send_signal(signal.SIGKILL)
        t_kill = c.elapsed()
        c.wait(lambda: c.procs[1].poll() is not None, 10, "replica 1 to exit after SIGKILL")
        print("%6.2f s killed replica 1 (pid %d) at step %d" % (t_kill, pids[1], c.last_step(1)))
        survivors = [0, 2, 3]
        c.write_quorum(survivors)
        with_members = lambda r, m: any(x.get("members") == m for x in c.progress(r)
                                        if "event" not in x)
        c.wait(lambda: all(with_members(r, survivors) for r in survivors), 60,
               "the survivors' first step among themselves", alive=survivors)

        # --- the standby joins ---
        time.sleep(1.0)
        c.write_quorum(survivors + [STANDBY], join=[STANDBY])
        members = survivors + [STANDBY]
        joined = lambda: any(x.get("event") == "joined" for x in c.progress(STANDBY))
        c.wait(joined, 60, "the standby to join", alive=members)
        join = next(x for x in c.progress(STANDBY) if x.get("event") == "joined")
        print("%6.2f s standby joined at step %d (pid %d)" % (c.elapsed(), join["step"],
                                                               pids[STANDBY]))

        # --- a replica hangs ---
        if not args.no_hang:
            c.wait(lambda: all(c.last_step(r) >= HANG_AT for r in members), 120,
                   "replicas %s at step %d" % (members, HANG_AT), alive=members)
            c.reform = False  # the failure reports are the hang's, handled below
            q_hung = c.number
            os.kill(c.procs[2].pid, signal.SIGSTOP)
            t_stop = c.elapsed()
            others = [0, 3, STANDBY]
            failed = lambda: any(x["type"] == "quorum_failed" and x["quorum"] == q_hung
                                 for r in others for x in c.reports(r))
            c.wait(failed, TIMEOUT_S + 30, "a replica to report the hung collective",
                   alive=others)
            print("%6.2f s stopped replica 2 at step %d; failure reported after %.2f s"
                  % (t_stop, c.last_step(2), c.elapsed() - t_stop))
            c.procs[2].send_signal(signal.SIGKILL)
            c.wait(lambda: c.procs[2].poll() is not None, 10, "replica 2 to exit after SIGKILL")
            c.write_quorum(others)
            c.reform = True
            members = others

        # --- to the end ---
        c.wait(lambda: all(c.procs[r].poll() is not None for r in members), 180,
               "replicas %s to finish" % members)
        for r in members:
            code = c.procs[r].poll()
            check(code == 0, "replica %d exited %d, not 0 (see %s)" % (r, code, c.path("log", r)))
        total_s = c.elapsed()

        # 1. the same processes ran to the end
        for r in members:
            seen = {x["pid"] for x in c.progress(r)}
            check(seen == {pids[r]}, "replica %d: pids %s in its progress, launched as %d"
                  % (r, sorted(seen), pids[r]))
        # 2. no survivor stalled longer than a quorum change
        kill_survivors = [0, 3] if not args.no_hang else survivors
        for r in kill_survivors + [STANDBY]:
            gap, at = gaps(c.progress(r))
            print("replica %d: largest gap between committed steps %.2f s (before step %s)"
                  % (r, gap, at))
            bound = GAP_BOUND_S if args.no_hang else HANG_GAP_BOUND_S
            check(gap < bound, "replica %d stalled %.2f s before step %s (bound %.1f s)"
                  % (r, gap, at, bound))
        for r in kill_survivors if args.no_hang else [0, 3, 2]:
            recs = [x for x in c.progress(r) if "event" not in x and x["step"] <= HANG_AT]
            gap, at = gaps(recs)
            print("replica %d, kill and join only (steps <= %d): largest gap %.2f s (before "
                  "step %s)" % (r, HANG_AT, gap, at))
            check(gap < GAP_BOUND_S, "replica %d stalled %.2f s before step %s around the kill "
                  "and the join (bound %.1f s)" % (r, gap, at, GAP_BOUND_S))
        # 3. the joiner holds its peers' parameters, bit for bit
        check(join["restored_from"] == "peer", "the standby did not receive its state from a peer")
        by_step = lambda r: {x["step"]: x for x in c.progress(r) if "event" not in x}
        peer = by_step(0)
        check(join["digest"] == peer[join["step"]]["digest"],
              "the joiner's parameters at step %d differ from replica 0's" % join["step"])
        first = by_step(STANDBY)[join["step"] + 1]
        check(first["computed"] and first["digest"] == peer[join["step"] + 1]["digest"],
              "after its first step (%d) the joiner's parameters differ from replica 0's"
              % (join["step"] + 1))
        started = [x for x in c.reports(STANDBY) if x["type"] == "started"]
        check(len(started) == 1 and started[0]["restored_from"] == "peer"
              and started[0]["step"] == join["step"],
              "the standby's \"started\" report: %s" % started)
        # 4. everyone at the last step, equal digests
        finals = {}
        for r in members:
            recs = by_step(r)
            check(max(recs) == STEPS, "replica %d ended at step %d, not %d" % (r, max(recs), STEPS))
            with open(c.path("digest", r)) as f:
                finals[r] = f.read().strip()
            check(finals[r] == recs[STEPS]["digest"], "replica %d: --digest differs" % r)
        check(len(set(finals.values())) == 1, "final digests differ: %s" % finals)
        # the membership of each step, from the processes that computed it; each step has one
        membership = {}
        for r in everyone:
            for x in c.progress(r):
                if "event" in x or not x["computed"]:
                    continue
                prev = membership.setdefault(x["step"], x["members"])
                check(prev == x["members"], "step %d committed by members %s and %s"
                      % (x["step"], prev, x["members"]))
        check(sorted(membership) == list(range(1, STEPS + 1)),
              "steps without a recorded membership: %s"
              % sorted(set(range(1, STEPS + 1)) - set(membership)))
        changes = [(s, membership[s]) for s in sorted(membership)
                   if s == 1 or membership[s] != membership[s - 1]]
        print("membership by step: %s" % ", ".join("%d+ %s" % c_ for c_ in changes))
        check(len(changes) == (3 if args.no_hang else 4),
              "expected %d membership changes, got %s" % (3 if args.no_hang else 4, changes))
        failures = [x for r in everyone for x in c.reports(r) if x["type"] == "quorum_failed"]
        print("failure reports: %s" % sorted({(x["rank"], x["quorum"], x["step"])
                                               for x in failures}))
        # 5. the arithmetic, replayed in one process
        import torch
        example = load_example(args.example)
        ref = replay(example, membership, STEPS)
        saved = torch.load(c.path("params", members[0]))
        live = torch.cat([saved[k].reshape(-1) for k in saved])  # parameters() order
        diff = (live - ref).abs().max().item()
        print("replay of the membership vs. the live run: max |diff| %.3g (tolerance %g)"
              % (diff, REFERENCE_TOLERANCE))
        check(diff < REFERENCE_TOLERANCE, "the live parameters differ from the replay by %.3g"
              % diff)
        wrong = dict(membership)
        s0 = changes[1][0]
        wrong[s0] = changes[0][1]  # as if the interrupted step had been committed by all 4
        diff_wrong = (replay(example, wrong, STEPS) - ref).abs().max().item()
        print("(a replay with step %d committed by %s instead: max |diff| %.3g)"
              % (s0, changes[0][1], diff_wrong))
        check(diff_wrong > 100 * REFERENCE_TOLERANCE, "the replay cannot tell memberships apart")
        print("passed: %d steps, %.1f s of run (%.1f s in all)"
              % (STEPS, total_s, time.monotonic() - t_begin))
    except Exception:
        print("kept %s for inspection" % c.dir, file=sys.stderr)
        raise
    finally:
        c.stop()
    shutil.rmtree(c.dir, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--example", default=os.path.join(here, "..", "..", "examples", "pytorch",
                                                      "ft_replicas.py"))
    ap.add_argument("--workdir", help="default: a new temporary directory")
    ap.add_argument("--no-hang", action="store_true", help="skip the SIGSTOP phase")
    args = ap.parse_args()
    if args.workdir:
        shutil.rmtree(args.workdir, ignore_errors=True)
        os.makedirs(args.workdir)
    else:
        args.workdir = tempfile.mkdtemp(prefix="faultline-replicas-")
    args.workdir = os.path.abspath(args.workdir)
    try:
        run(args)
    except Failure as e:
        print("FAIL: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
