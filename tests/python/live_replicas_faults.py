"""live_replicas_e2e.py --faults: the fault-file kinds on replica groups under the real
controller (the scenario is in live_replicas_e2e.py's docstring)."""

import os
import signal
import subprocess
import time

from live_harness import (check, check_replay_decisions, is_event, require_torch)
from live_replicas_support import (STEP_MS, KILL_AT, SLOW_AT, SLOW_FACTOR, FINISHED, CRASH,
                                   replica_event, restarted, Cluster, by_pid, pid_alive)


def inject_rc(c, machine, fault, detail=None):
    argv = [c.args.faultline, "live", "inject", c.config, "--machine", machine, "--fault", fault]
    if detail is not None:
        argv += ["--detail", detail]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout.strip()


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def step_samples(records, after, before=float("inf")):
    return [r for r in records if is_event(r, "StepSample") and after <= r["t_s"] < before]


def run_faults(args):
    t_begin = time.monotonic()
    require_torch(args.python)
    c = Cluster(args)
    with c.kept_on_failure():
        c.start()
        c.wait_for(lambda r: is_event(r, "JobStarted"), 90, "the first JobStarted")
        c.wait_step(KILL_AT, 90)

        # --- a timed-out injection is cancelled at the agent, never delivered late ---
        agent3 = c.procs["agent-m3"]
        pid3 = by_pid(c.progress("m3"))[0][0]
        os.kill(agent3.pid, signal.SIGSTOP)
        try:
            rc, out = inject_rc(c, "m3", "kill")
        finally:
            os.kill(agent3.pid, signal.SIGCONT)
        check(rc != 0, "inject kill on the stopped agent of m3 succeeded: %s" % out)
        print("kill on the stopped agent of m3: exit %d (%s)" % (rc, out))
        log3 = os.path.join(c.dir, "agent-m3.log")
        end = time.monotonic() + 20
        while "cancelled by the controller before it was applied" not in read_text(log3):
            check(time.monotonic() < end, "the resumed agent of m3 did not say the cancelled "
                  "inject was dropped: %s" % read_text(log3)[-400:])
            time.sleep(0.2)
        time.sleep(2)
        check(pid_alive(pid3), "replica 3 (pid %d) was killed by the timed-out inject" % pid3)
        recs = c.records()
        check(not [r for r in recs if r.get("kind") == "fault"],
              "a fault was recorded for the timed-out inject")
        check(any(r.get("kind") == "note" and "not a fault of this run" in r.get("text", "")
                  for r in recs), "no note saying the timed-out inject is not a fault of this run")

        # --- nan on m1: acknowledged, recorded, and seen through the all-reduce ---
        t_nan = c.inject("m1", "nan")
        nan_ev = c.wait_for(lambda r: is_event(r, "StepSample") and r["event"].get("nan")
                            and r["t_s"] >= t_nan, 30, "a NaN step sample")
        print("nan on m1 at t=%.1f s: recorded, NaN step sample (replica 0 carries the step) "
              "after %.2f s" % (t_nan, nan_ev["t_s"] - t_nan))
        check("took the injected directive" in read_text(os.path.join(c.dir, "agent-m1.log")),
              "the agent of m1 did not log the job's acknowledgement of the nan")
        restart = c.wait_for(lambda r: is_event(r, "JobStarted") and r["t_s"] > nan_ev["t_s"],
                             90, "a JobStarted after the NaN")
        print("the world restarted %.1f s after the NaN" % (restart["t_s"] - nan_ev["t_s"]))
        c.wait_for(lambda r: r.get("kind") == "progress" and r["t_s"] > restart["t_s"]
                   and r.get("step", 0) >= KILL_AT, 90, "training after the NaN restart")

        # --- crash on m3: replica 3 exits in its own words, drops out and rejoins ---
        t_crash = c.inject("m3", "crash", CRASH)
        drop3 = c.wait_for(replica_event("ReplicaDropped", 3, t_crash), 30,
                           "a ReplicaDropped of replica 3", forbid=restarted(restart["t_s"]))
        back3 = c.wait_for(replica_event("ReplicaRejoined", 3, drop3["t_s"]), 90,
                           "replica 3 rejoined after its crash", forbid=restarted(restart["t_s"]))
        print("crash on m3 at t=%.1f s: ReplicaDropped after %.2f s (exit %s, \"%s\"), "
              "rejoined after %.2f s, the world never stopped"
              % (t_crash, drop3["t_s"] - t_crash, drop3["event"].get("exit_code"),
                 drop3["event"].get("signature"), back3["t_s"] - t_crash))
        check(CRASH in drop3["event"].get("signature", ""),
              "replica 3's drop does not carry the crash's signature: %s" % drop3["event"])
        check(drop3["event"].get("exit_code") == 1, "replica 3 exited %s, not 1"
              % drop3["event"].get("exit_code"))

        # --- stop on m2: replica 2 is frozen (SIGSTOP); the others' collectives time out, the
        # controller kills the silent replica, which drops out and rejoins ---
        t_stop = c.inject("m2", "stop")
        drop2 = c.wait_for(replica_event("ReplicaDropped", 2, t_stop), 40,
                           "a ReplicaDropped of replica 2", forbid=restarted(restart["t_s"]))
        back2 = c.wait_for(replica_event("ReplicaRejoined", 2, drop2["t_s"]), 90,
                           "replica 2 rejoined after its stop", forbid=restarted(restart["t_s"]))
        print("stop on m2 at t=%.1f s: ReplicaDropped after %.2f s (\"%s\"), rejoined after "
              "%.2f s, the world never stopped"
              % (t_stop, drop2["t_s"] - t_stop, drop2["event"].get("signature"),
                 back2["t_s"] - t_stop))
        check(drop2["event"].get("signature", "").startswith("hang:"),
              "replica 2's drop is not the hang of a silent replica: %s" % drop2["event"])

        # --- sdc on m1: replica 1 corrupts its gradient each step; the all-reduce carries it
        # to every replica, the gradient norm explodes: a metric anomaly; m1 must leave ---
        t_sdc = c.inject("m1", "sdc")
        anomaly = c.wait_for(lambda r: r.get("kind") == "note" and r["t_s"] >= t_sdc
                             and r.get("text", "").startswith("detected: metric anomaly"),
                             30, "the sdc's metric anomaly")
        evict = c.wait_for(lambda r: r.get("kind") == "action" and r["t_s"] >= t_sdc
                           and r["action"].get("type") == "EvictMachines"
                           and 1 in r["action"].get("machines", []), 150,
                           "m1 evicted for the sdc")
        # after=0 corrupts the bit-wise test's one step too: it fails on m1 (after=3 would pass
        # it, and the replay module would locate the machine instead).
        check(evict["action"].get("mechanism") == "stop_time_eviction",
              "m1 was evicted by %s, not by the failed bit-wise test"
              % evict["action"].get("mechanism"))
        restart = c.wait_for(lambda r: is_event(r, "JobStarted") and r["t_s"] > evict["t_s"],
                             90, "a JobStarted after m1's eviction")
        print("sdc on m1 at t=%.1f s: %s after %.2f s; m1 evicted (%s) after %.1f s; the world "
              "started again after %.1f s"
              % (t_sdc, anomaly["text"], anomaly["t_s"] - t_sdc,
                 evict["action"].get("mechanism"), evict["t_s"] - t_sdc,
                 restart["t_s"] - t_sdc))
        c.wait_for(lambda r: r.get("kind") == "progress" and r["t_s"] > restart["t_s"] + 2,
                   90, "training after the sdc's eviction")

        # --- slow on m2, near the end (it stays): the group waits for replica 2 ---
        c.wait_step(SLOW_AT, 120)
        recs = c.records()
        before = [r["event"]["step_time_s"] for r in step_samples(recs, restart["t_s"])
                  if r["event"].get("step_time_s")]
        t_slow = c.inject("m2", "slow", str(SLOW_FACTOR))
        c.wait_for(lambda r: r.get("kind") == "progress" and r["t_s"] > t_slow + 2, 60,
                   "training under the slow fault")
        after = [r["event"]["step_time_s"] for r in step_samples(c.records(), t_slow + 0.5)
                 if r["event"].get("step_time_s")]
        check(before and after, "no step samples around the slow fault")
        median = lambda xs: sorted(xs)[len(xs) // 2]
        added = median(after) - median(before)
        print("slow %d on m2 at t=%.1f s: median step time %.3f -> %.3f s (x%.2f)"
              % (SLOW_FACTOR, t_slow, median(before), median(after), median(after) / median(before)))
        # Replica 2 sleeps (FACTOR - 1) x its compute, which holds the example's STEP_MS pause,
        # before the all-reduce every replica waits in: at least that much more per step,
        # however loaded the host (a ratio of step times shrinks as load inflates the rest).
        floor = 0.5 * (SLOW_FACTOR - 1) * STEP_MS / 1000
        check(added >= floor, "the slow fault on m2 added %.3f s to the group's median step, "
              "not the %.3f s its pause alone must" % (added, floor))
        faults = [(r["fault"], r["machine"]) for r in c.records() if r.get("kind") == "fault"]
        check(faults == [("nan", 1), ("crash", 3), ("stop", 2), ("sdc", 1), ("slow", 2)],
              "fault records %s, not nan on m1, crash on m3, stop on m2, sdc on m1 and slow on "
              "m2" % faults)

        c.wait_for(lambda r: r.get("kind") == "note" and r.get("text") == FINISHED, 300,
                   "the note \"%s\"" % FINISHED)
        code = c.procs["controller"].wait(timeout=60)
        check(code == 0, "the controller exited %d, not 0 (the job finished)" % code)
        if args.replay:
            check_replay_decisions(args, c.dir, "the replay's rejoin has no process start")
        print("passed in %.1f s" % (time.monotonic() - t_begin))

