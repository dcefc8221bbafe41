#!/usr/bin/env python3
"""End to end: the PyTorch DDP example (examples/pytorch/ddp_gloo.py) under real live mode.

A controller and five agents on loopback (4 job machines, 1 standby, 1 rank each) run the
example with python3, and the test injects, one after the other, each once the job trains
again:

  kill on m1     a ProcessExit; the job restarts from a checkpoint.
  nan on m2      recorded once rank 2 acknowledged it, before the NaN step sample it causes;
                 the job restarts from a checkpoint before that step.
  crash on m1    in the rank's own words: the ProcessExit carries the injected signature and
                 exit code 1; the job restarts from a checkpoint.
  hang on m3     rank 3 blocks at its next step, its peers in the all-reduce: the controller
                 sees the stall and captures the stacks, each rank's own Python stack
                 (faulthandler, on the signal its started report named) in well under a
                 second; m3's is the odd one out, stack aggregation evicts it and s0 takes its
                 slot.
  stop on m1     SIGSTOP: the same stall; the stopped rank cannot run a signal handler and is
                 answered at once as "[stopped]", the odd one out: m1 is evicted, s1 comes in.
  sdc on m2      rank 2 flips an exponent bit of a local gradient element at each step: the
                 all-reduced gradient norm explodes (a metric anomaly), the bit-wise test,
                 which applies m2's persistent faults, fails on m2, which is evicted; s2 takes
                 its slot and the job restarts from a checkpoint before the damage.
  slow 3 on m0   acknowledged, recorded, the job's steps slower to the end.

The job, run to its last step, must end with parameters bit-identical (SHA-256) to a
fault-free run of the same example with the same world size, outside faultline, and the
event log must hold exactly the seven faults.
Last, `faultline sim replay` of the run's event log must take the live run's decisions:
each one matched, or explained by a listed unmodelled difference (docs/running-live.md), and
its ETTR must be within ETTR_POINTS of the live one, beyond the pauses no record explains.
Exit 0 on success, 1 with the reason on failure (a missing torch included).

--flash: recovery=flash with job.in_place (issue 52). The test kills m1's rank: the other
ranks hold in place and keep their processes (their PIDs, read from /proc, unchanged), only
rank 1 is relaunched, and every rank resumes from the newest step a survivor completed (not a
checkpoint: at most the step in flight lost). Then it kills m2's rank, and m3's while the
second in-place restart re-forms the group: that restart fails and the next one falls back to
an ordinary restart from a checkpoint, said in the event log. The job ends bit-identical to
the fault-free run, and the replay takes the live decisions; it prints the in-place and the
ordinary restart's durations and the live and replayed ETTR.
"""

import os
import subprocess
import sys
import time

import live_harness
from live_harness import (LiveCluster, check, check_replay_decisions, free_port, is_event,
                          job_ports, require_torch)

STEPS = 260
FAULTS_STEPS = 300  # run(): seven faults, each 15 steps after the job trains again
STEP_MS = 40
RANKS = 4
CRASH = "CUDA error: an illegal memory access was encountered"
ETTR_POINTS = 5.0


class Cluster(LiveCluster):
    def __init__(self, args, flash=False, standbys=1, steps=STEPS):
        super().__init__(args)
        self.digest = os.path.join(self.dir, "digest.live")
        self.example = [args.python, args.example, "--steps", str(steps), "--step-ms", str(STEP_MS)]
        self.job_env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "GLOO_SOCKET_IFNAME": "lo",
                        "OMP_NUM_THREADS": "1"}  # 5 torch processes share a small machine
        job = {"versions": {"v1": self.example + ["--digest", self.digest]},
               "version": "v1", "gpus_per_machine": 1, "master_port": job_ports(RANKS + 1),
               "nominal_step_time_s": STEP_MS / 1000, "env": self.job_env}
        params = {"stall_window_s": 8, "recrash_window_s": 5, "probe_deadline_s": 60,
                  "inspect_nic_s": 1, "standby_pool": standbys}
        if flash:
            job["in_place"] = True
            params["recovery"] = "flash"
        self.write_config(
            "python e2e: PyTorch DDP example under live mode" + (" (flash)" if flash else ""),
            ["m%d" % i for i in range(RANKS)], ["s%d" % i for i in range(standbys)], job,
            {"stack": "byterobust", "params": params})

    def wait_started_after(self, t, timeout_s):
        return self.wait_for(lambda r: is_event(r, "JobStarted") and r["t_s"] > t, timeout_s,
                             "a JobStarted after t=%.1f" % t)


def reference_digest(args, workdir, steps=STEPS):
    """The fault-free run: the same example, 4 ranks, no faultline (the library is a no-op)."""
    out = os.path.join(workdir, "digest.reference")
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               WORLD_SIZE=str(RANKS), GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    env.pop("FAULTLINE_REPORT_FD", None)
    log = open(os.path.join(workdir, "reference.log"), "ab")
    procs = [subprocess.Popen([args.python, args.example, "--steps", str(steps), "--digest", out],
                              env=dict(env, RANK=str(r)), stdin=subprocess.DEVNULL, stdout=log,
                              stderr=log)
             for r in range(RANKS)]
    codes = [p.wait(timeout=120) for p in procs]
    check(codes == [0] * RANKS, "the reference run failed: exit codes %s" % codes)
    with open(out) as f:
        return f.read().strip()


def evicted_for_a_stall(c, t, machine, what):
    """After a hang or a stop injected on job machine `machine` at run time t: the stall's stack
    capture, whose signatures single out that machine's slot, and its eviction by stack
    aggregation. Returns (the slot's signature, the capture's outcome, the eviction, the
    JobStarted after it)."""
    cap = c.wait_for(lambda r: r.get("kind") == "action" and r["t_s"] >= t
                     and r["action"].get("type") == "CaptureStacks", 60,
                     "the stack capture of the %s's stall" % what)
    out = c.wait_for(lambda r: r.get("kind") == "outcome" and r.get("id") == cap["id"], 30,
                     "the outcome of the %s's stack capture" % what)
    stacks = c.wait_for(lambda r: is_event(r, "StacksCaptured")
                        and r["event"].get("action") == cap["id"], 30,
                        "the stacks captured for the %s" % what)["event"]["by_slot"]
    evict = c.wait_for(lambda r: r.get("kind") == "action" and r["t_s"] >= cap["t_s"]
                       and r["action"].get("type") == "EvictMachines", 60,
                       "an eviction after the %s's stack capture" % what)
    started = c.wait_started_after(evict["t_s"], 90)
    print("%s on m%d at t=%.1f s: stall captured at t=%.1f s in %.2f s, stacks %s; evicted %s "
          "(%s) at t=%.1f s; resumed from step %d at t=%.1f s"
          % (what, machine, t, cap["t_s"], out["duration_s"], stacks,
             evict["action"].get("machines"), evict["action"].get("mechanism"), evict["t_s"],
             started["event"].get("step", -1), started["t_s"]))
    # The hung or stopped rank's slot alone differs (slot i holds mi: the evictions before
    # these took other slots).
    odd = [i for i, sig in enumerate(stacks) if sig != stacks[(machine + 1) % len(stacks)]]
    check(odd == [machine], "the stacks do not single out m%d's slot: %s" % (machine, stacks))
    check(evict["action"].get("machines") == [machine],
          "the %s evicted %s, not m%d" % (what, evict["action"].get("machines"), machine))
    check(evict["action"].get("mechanism") == "analyzer_over_eviction",
          "m%d was evicted by %s, not by stack aggregation"
          % (machine, evict["action"].get("mechanism")))
    # Each rank's own dump, not gdb (9 to 10 s per PyTorch rank on a loaded 2-core machine,
    # the 15 s deadline everywhere): well under the deadline, with margin for a loaded host.
    check(out["duration_s"] < 5, "the stack capture took %.2f s" % out["duration_s"])
    check(started["event"].get("step", -1) > 0,
          "the restart after the %s did not restore a checkpoint" % what)
    return stacks[machine], out, evict, started


def run(args):
    t_begin = time.monotonic()
    require_torch(args.python)
    c = Cluster(args, standbys=3, steps=FAULTS_STEPS)
    with c.kept_on_failure():
        reference = reference_digest(args, c.dir, FAULTS_STEPS)
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
        # Recorded only on the job's acknowledgement (issue 52), which comes before the NaN.
        with open(os.path.join(c.dir, "agent-m2.log"), errors="replace") as f:
            check("rank 2 took the injected directive 'id=" in f.read(),
                  "the agent of m2 did not log rank 2's acknowledgement of the nan")
        check(t_nan <= nan_ev["t_s"], "the nan was recorded after the NaN it caused")
        # crash on m1, in the rank's own words: its fatal report's signature is the
        # ProcessExit's, recorded once rank 1 acknowledged it (before it exited).
        c.wait_step(started["event"].get("step", 0) + 15, 60)
        t_crash = c.inject("m1", "crash", CRASH)
        crash_ev = c.wait_for(lambda r: is_event(r, "ProcessExit") and r["t_s"] >= t_crash
                              and r["event"].get("machine") == 1, 20, "a ProcessExit of m1")
        started = c.wait_started_after(crash_ev["t_s"], 60)
        print("crash on m1 at t=%.1f s: ProcessExit (exit %s, \"%s\") after %.1f s, resumed "
              "from step %d after %.1f s"
              % (t_crash, crash_ev["event"].get("exit_code"), crash_ev["event"].get("signature"),
                 crash_ev["t_s"] - t_crash, started["event"].get("step", -1),
                 started["t_s"] - t_crash))
        check(CRASH in crash_ev["event"].get("signature", ""),
              "the ProcessExit of m1 does not carry the crash's signature: %s" % crash_ev["event"])
        check(crash_ev["event"].get("exit_code") == 1, "the crashed rank exited %s, not 1"
              % crash_ev["event"].get("exit_code"))
        check(started["event"].get("step", -1) > 0,
              "the restart after the crash did not restore a checkpoint")
        # hang on m3 (issue 52): acknowledged by rank 3, which then blocks in its step; the
        # stall's capture reads each rank's own Python stack, m3's blocked in the hang.
        c.wait_step(started["event"].get("step", 0) + 15, 60)
        t_hang = c.inject("m3", "hang")
        sig, _, _, started = evicted_for_a_stall(c, t_hang, 3, "hang")
        check(" < _fire < begin_step < " in sig,
              "m3's stack is not the rank's Python stack in the hang: %s" % sig)
        # stop on m1: SIGSTOP; the stopped rank is answered at once, without a signal.
        c.wait_step(started["event"].get("step", 0) + 15, 60)
        t_stop = c.inject("m1", "stop")
        sig, _, _, started = evicted_for_a_stall(c, t_stop, 1, "stop")
        check(sig.startswith("[stopped] "), "m1's stack is not marked stopped: %s" % sig)
        # sdc on m2: from its next step rank 2 flips an exponent bit of a local gradient
        # element each step; the all-reduce carries it to every rank, the gradient norm
        # explodes (a metric anomaly), and m2 must leave the job for it to train (the
        # directive stays in m2's fault file, as a broken GPU would).
        c.wait_step(started["event"].get("step", 0) + 15, 60)
        t_sdc = c.inject("m2", "sdc")
        anomaly = c.wait_for(lambda r: r.get("kind") == "note" and r["t_s"] >= t_sdc
                             and r.get("text", "").startswith("detected: metric anomaly"),
                             30, "the sdc's metric anomaly")
        evict = c.wait_for(lambda r: r.get("kind") == "action" and r["t_s"] >= t_sdc
                           and r["action"].get("type") == "EvictMachines"
                           and 2 in r["action"].get("machines", []), 150,
                           "m2 evicted for the sdc")
        # after=0 corrupts the bit-wise test's one step too: it fails on m2 (after=3 would pass
        # it, and the replay module would locate the machine instead).
        check(evict["action"].get("mechanism") == "stop_time_eviction",
              "m2 was evicted by %s, not by the failed bit-wise test"
              % evict["action"].get("mechanism"))
        started = c.wait_started_after(evict["t_s"], 90)
        print("sdc on m2 at t=%.1f s: %s after %.1f s; m2 evicted (%s) after %.1f s; resumed "
              "from step %d after %.1f s"
              % (t_sdc, anomaly["text"], anomaly["t_s"] - t_sdc,
                 evict["action"].get("mechanism"), evict["t_s"] - t_sdc,
                 started["event"].get("step", -1), started["t_s"] - t_sdc))
        check(started["event"].get("step", -1) > 0,
              "the restart after the sdc did not restore a checkpoint")
        # slow 3 on m0: acknowledged by rank 0, recorded, and the job's steps slow down (every
        # rank waits for it in the all-reduce). It stays to the end, as in the replay.
        c.wait_step(started["event"].get("step", 0) + 15, 60)
        samples = lambda a, b: sorted(r["event"]["step_time_s"] for r in c.records()
                                      if is_event(r, "StepSample") and a <= r["t_s"] < b
                                      and r["event"].get("step_time_s"))
        before = samples(started["t_s"], float("inf"))
        t_slow = c.inject("m0", "slow", "3")
        c.wait_for(lambda r: r.get("kind") == "progress" and r["t_s"] > t_slow + 2, 60,
                   "training under the slow fault")
        after = samples(t_slow + 0.5, float("inf"))
        check(before and after, "no step samples around the slow fault")
        median = lambda xs: xs[len(xs) // 2]
        added = median(after) - median(before)
        print("slow 3 on m0 at t=%.1f s: median step %.3f s -> %.3f s (x%.1f)"
              % (t_slow, median(before), median(after), median(after) / median(before)))
        # Rank 0 sleeps (3 - 1) x its own step, which holds the example's STEP_MS pause, and every
        # rank waits for it in the all-reduce: the job's median step grows by at least half of
        # 2 x STEP_MS however loaded the host (a ratio shrinks when load inflates both medians).
        floor = 0.5 * (3 - 1) * STEP_MS / 1000
        check(added >= floor, "the slow fault on m0 added %.3f s to the job's median step, not "
              "the %.3f s its pause alone must" % (added, floor))
        faults = [(r["fault"], r["machine"]) for r in c.records() if r.get("kind") == "fault"]
        check(faults == [("kill", 1), ("nan", 2), ("crash", 1), ("hang", 3), ("stop", 1),
                         ("sdc", 2), ("slow", 0)],
              "fault records %s, not the seven injected" % faults)
        code = c.procs["controller"].wait(timeout=120)
        check(code == 0, "the controller exited %d, not 0 (the job finished)" % code)
        with open(c.digest) as f:
            live = f.read().strip()
        print("digest fault-free %s\ndigest live       %s" % (reference, live))
        check(live == reference, "the parameters after the faults differ from the fault-free run's")
        check_replay_decisions(args, c.dir, ettr_points=ETTR_POINTS)
        print("passed in %.1f s" % (time.monotonic() - t_begin))


def rank_pids(c):
    """The job's rank processes by rank, from /proc: the example's command line with this
    run's digest file, and RANK from its environment."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                argv = f.read().split(b"\0")
            if c.digest.encode() not in argv:
                continue
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue  # gone meanwhile
        out[int(env[b"RANK"])] = int(pid)
    return out


def outcome_of(c, start):
    """The outcome record of the action a JobStarted event completed."""
    aid = start["event"]["action"]
    return c.wait_for(lambda r: r.get("kind") == "outcome" and r.get("id") == aid, 10,
                      "the outcome of start %d" % aid)


def run_flash(args):
    t_begin = time.monotonic()
    require_torch(args.python)
    c = Cluster(args, flash=True)
    with c.kept_on_failure():
        reference = reference_digest(args, c.dir)
        c.start()
        # As above: the kill comes once the replayed job runs too.
        c.wait_step(100, 90)
        before = rank_pids(c)
        check(sorted(before) == list(range(RANKS)), "rank processes found: %s" % before)
        t_kill = c.inject("m1", "kill")
        exited = lambda r: is_event(r, "ProcessExit") and r["t_s"] >= t_kill
        exit_ev = c.wait_for(exited, 20, "a ProcessExit")
        started = c.wait_started_after(t_kill, 60)
        out = outcome_of(c, started)
        resumed = started["event"]["step"]
        after = rank_pids(c)
        records = c.records()
        last_before = max(r["step"] for r in records
                          if r.get("kind") == "progress" and r["t_s"] <= exit_ev["t_s"])
        held = [int(r["text"].split("after step ")[1]) for r in records
                if r.get("kind") == "note" and "holds in place after step" in r.get("text", "")
                and t_kill <= r["t_s"] <= started["t_s"]]
        print("kill m1 at t=%.1f s: in-place restart took %.2f s (%s); resumed from step %d "
              "(rank 0 reported step %d before the exit; held: %s)"
              % (t_kill, out["duration_s"], out["detail"], resumed, last_before, held))
        print("pids before %s, after %s" % (before, after))
        check(out["detail"].startswith("in place: ranks 0,2,3 kept, ranks 1 relaunched"),
              "the restart after the kill was not in place: %s" % out["detail"])
        check(all(after.get(r) == before[r] for r in (0, 2, 3)),
              "a survivor's process was replaced: %s then %s" % (before, after))
        check(after.get(1) not in (None, before[1]), "rank 1 was not relaunched: %s" % after)
        check(len(held) == RANKS - 1 and resumed == max(held),
              "the job did not resume from the survivors' step: held %s, resumed %d"
              % (held, resumed))
        # At most the step in flight lost: the survivors held the step rank 0 reported last
        # before the exit, or the one after it.
        check(resumed >= last_before, "resumed from step %d, before rank 0's last step %d"
              % (resumed, last_before))
        in_place_s = out["duration_s"]
        # A second in-place restart, and a kill of a survivor (m3) while it re-forms: that
        # start fails, and the next one, with no rank holding, is an ordinary restart.
        c.wait_step(resumed + 20, 60)
        t_kill2 = c.inject("m2", "kill")
        reform = c.wait_for(lambda r: r.get("kind") == "note" and r["t_s"] >= t_kill2 and
                            r.get("text", "").startswith("in-place restart of generation"), 30,
                            "the second in-place restart")
        t_kill3 = c.inject("m3", "kill")
        failed = c.wait_for(lambda r: is_event(r, "StartFailed") and r["t_s"] >= t_kill3, 60,
                            "the in-place start failing after the kill during the re-form")
        fallback = c.wait_for(lambda r: r.get("kind") == "note" and r["t_s"] >= t_kill3 and
                              r.get("text", "").startswith("in-place restart not possible"), 60,
                              "the fallback to an ordinary restart")
        started2 = c.wait_started_after(fallback["t_s"], 90)
        out2 = outcome_of(c, started2)
        print("kill m2 at t=%.1f s, in-place re-form at t=%.1f s, kill m3 at t=%.1f s: start "
              "failed at t=%.1f s (%s); %s; ordinary restart took %.2f s (%s)"
              % (t_kill2, reform["t_s"], t_kill3, failed["t_s"],
                 failed["event"].get("signature", ""), fallback["text"], out2["duration_s"],
                 out2["detail"]))
        check(not out2["detail"].startswith("in place"), "the fallback restart was in place")
        check("(local)" in out2["detail"] or "(peer)" in out2["detail"],
              "the fallback restart did not restore a checkpoint: %s" % out2["detail"])
        print("restart durations: in place %.2f s, ordinary %.2f s" % (in_place_s,
                                                                         out2["duration_s"]))
        code = c.procs["controller"].wait(timeout=120)
        check(code == 0, "the controller exited %d, not 0 (the job finished)" % code)
        with open(c.digest) as f:
            live = f.read().strip()
        print("digest fault-free %s\ndigest live       %s" % (reference, live))
        check(live == reference, "the parameters after the faults differ from the fault-free run's")
        check_replay_decisions(args, c.dir)
        print("passed in %.1f s" % (time.monotonic() - t_begin))


if __name__ == "__main__":
    if "--flash" in sys.argv:
        sys.argv.remove("--flash")
        live_harness.main(__doc__, run_flash)
    else:
        live_harness.main(__doc__, run)
