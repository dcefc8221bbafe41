#!/usr/bin/env python3
"""End to end: replica groups (examples/pytorch/ft_replicas.py) under real live mode.

A controller and five agents on loopback (4 job machines m0-m3, 1 standby s0, 1 rank each,
job.replica_groups) run the example as 4 replicas under the byterobust stack with
recovery=replica-drop.
Each replica hosts a TCPStore on master_port + 1 + its id; the controller writes each quorum
to the machines' quorum.json. Scenario:

  step ~40   `inject --fault kill` on m1: the agent SIGKILLs replica 1. Expected: a
             ReplicaDropped (replica 1), the others train on without a restart, then a
             ReplicaRejoined (replica 1, a new process on m1 that receives the state from a
             live peer).
  later      `inject --fault machine_down` on m2: its agent SIGKILLs its rank and exits (the
             machine is lost; recorded as a fault, so the replay reproduces it).
             Expected: the policy evicts m2 on the lost agent's host alert, which drops
             replica 2 (ReplicaDropped), and the standby s0 takes its slot: ReplicaRejoined
             (replica 2, a process on s0).
  later      `inject --fault hang` on m3 (replica 3 blocks for good). The others'
             collectives time out after the replicas' timeout and they report
             quorum_failed; the controller kills the silent replica 3: ReplicaDropped
             ("hang: ..."), then ReplicaRejoined (a new process on m3).

Checks: (a) the processes never killed keep their pid (every progress file has one pid per
process: m0 one, m1 and m3 the killed one then its replacement, m2 one, s0 one); (b) no
survivor stalls longer than GAP_BOUND_S between consecutive committed steps (HANG_GAP_BOUND_S
around the hang; maxima printed);
(c) each joiner starts restored from a peer, with the parameters its peers recorded for the
same step, bit for bit, and after its first step too; (d) every process alive at the end
reaches STEPS with the same final digest (digest.txt of m0, m1, m3, s0); (e) the controller
notes "every rank finished its steps" and exits 0; (f) one JobStarted in the whole run but the
adoption's, no JobStopped before the end: the world never restarted. (g) Each drop is an
incident, as the simulator counts it (issue 52): `live status` (text and --json) and /metrics
count them (category replica_drop; closed "recovered" when the replica trains again), each
RejoinReplica that brought a replica back has an ok outcome with its duration, and the live
report's incidents close at the rejoins. (h) The controller is killed (SIGKILL) while replica 3
is out and started again on the same state directory: it adopts the job without replica 3
(no process of the others relaunched), tells the policy replica 3 is out, which rejoins it, and
its status and /metrics counters go on from the journal. With --replay, last, `faultline sim
replay` of the event log must take the live run's decisions (as live_ddp_e2e.py) and credit
as many incidents to replica_drop as the live run.

With --faults, another run (issue 52: a recorded fault is a fault that happened):

  step ~40   the agent of m3 is stopped (SIGSTOP) and `inject --fault kill` on m3 times out
             (15 s); the controller notes it as not a fault of this run and cancels it. The
             agent, resumed, reads the inject and the cancel behind it: the cancel wins, replica
             3 lives on, no fault is recorded (the old agent killed it late, unrecorded).
  then       `inject --fault nan` on m1 (not the replica that carries the step): confirmed by
             the job's acknowledgement, recorded, and seen by the policy as a NaN step sample of
             replica 0, whose all-reduce carried it; the world stops for it and starts again,
             as the replay does (the old replica groups ignored nan: the replay diverged).
  then       `inject --fault crash` on m3: replica 3 exits in its own words (its drop carries
             the injected signature and exit code 1), drops out and rejoins; the world never
             stops.
  then       `inject --fault stop` on m2: replica 2 is frozen (SIGSTOP); the others'
             collectives time out, the controller kills it (a drop for a hang) and it rejoins;
             the world never stops.
  then       `inject --fault sdc` on m1: replica 1 flips an exponent bit of its local gradient
             at each step; the all-reduce carries it to every replica (a metric anomaly), the
             bit-wise test, which applies m1's persistent faults, fails on m1, which is
             evicted; the world starts again with the standby s0 in its slot.
  then       `inject --fault slow --detail 4` on m2, SLOW_AT steps in: recorded once
             acknowledged; the carrier's step times grow (the group waits for replica 2 in its
             all-reduce).
  the end    the job finishes; with --replay the replay takes the live decisions.

Exit 0 on success, 1 with the reason on failure (a missing torch included).
"""

import json
import os
import re
import subprocess
import sys
import time

import live_harness
from live_harness import (check, check_replay_decisions, is_event, read_lines, require_torch)
from live_replicas_support import (STEPS, RANKS, KILL_AT, AFTER_REJOIN, REPLICA_TIMEOUT_S,
                                   GAP_BOUND_S, HANG_GAP_BOUND_S, FINISHED, replica_event,
                                   restarted, stopped, check_drops_counted, Cluster, by_pid,
                                   committed, largest_gap, pid_alive, check_joiner)
from live_replicas_faults import run_faults
from live_replicas_migrate import run_migrate


def run(args):
    t_begin = time.monotonic()
    require_torch(args.python)
    c = Cluster(args)
    with c.kept_on_failure():
        c.start()
        first_start = c.wait_for(lambda r: is_event(r, "JobStarted"), 90, "the first JobStarted")
        t0 = first_start["t_s"]

        # --- replica 1's process is killed; it rejoins on m1 ---
        c.wait_step(KILL_AT, 90)
        orig = {n: by_pid(c.progress(n)) for n in c.names[:RANKS]}
        for n in c.names[:RANKS]:
            check(len(orig[n]) == 1, "%s: %d processes in progress.jsonl before any fault, "
                  "not 1" % (n, len(orig[n])))
        pid1 = orig["m1"][0][0]
        t_kill = c.inject("m1", "kill")
        drop1 = c.wait_for(replica_event("ReplicaDropped", 1, t_kill), 30,
                           "a ReplicaDropped of replica 1", forbid=restarted(t0))
        print("kill of replica 1 (pid %d) at t=%.1f s: ReplicaDropped after %.2f s, %s live"
              % (pid1, t_kill, drop1["t_s"] - t_kill, drop1["event"].get("live")))
        check(drop1["event"].get("live") == RANKS - 1, "the ReplicaDropped of replica 1 says "
              "%s live replicas, not %d" % (drop1["event"].get("live"), RANKS - 1))
        rejoin1 = c.wait_for(replica_event("ReplicaRejoined", 1, drop1["t_s"]), 60,
                             "a ReplicaRejoined of replica 1", forbid=restarted(t0))
        print("replica 1: ReplicaRejoined %.2f s after its drop (%.2f s after the kill), %s live"
              % (rejoin1["t_s"] - drop1["t_s"], rejoin1["t_s"] - t_kill,
                 rejoin1["event"].get("live")))
        status = subprocess.run([args.faultline, "live", "status", c.config],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        line = next((x for x in status.stdout.splitlines() if x.startswith("replica groups")), "")
        check(status.returncode == 0 and line.startswith("replica groups: on, "),
              "`faultline live status` (exit %d) has no line \"replica groups: on, ...\": %s"
              % (status.returncode, status.stdout.strip()[-300:]))
        print("status: %s" % line)
        check(re.search(r"\bincidents 1\b", status.stdout),
              "`faultline live status` does not count the drop of replica 1 as an incident: %s"
              % status.stdout.strip()[:300])
        check_drops_counted(c, 1, 1, "after replica 1's rejoin")
        new1 = lambda r: r.get("pid") != pid1 and "event" not in r and r.get("replica") == 1
        first1 = c.wait_progress("m1", new1, 30, "a step of the rejoined replica 1 on m1")
        c.wait_progress("m1", lambda r: new1(r) and r["step"] >= first1["step"] + AFTER_REJOIN,
                        60, "%d steps of the rejoined replica 1 on m1" % AFTER_REJOIN)

        # --- machine m2 dies; replica 2 rejoins on the standby s0 ---
        pid2 = orig["m2"][0][0]
        t_kill2 = c.kill_machine("m2")
        end = time.monotonic() + 10
        check(c.procs["agent-m2"].wait(timeout=10) == 137,
              "the agent of m2 did not exit with 137 after machine_down")
        while pid_alive(pid2) and time.monotonic() < end:
            time.sleep(0.1)
        check(not pid_alive(pid2), "replica 2 (pid %d) outlived machine_down on m2" % pid2)
        drop2 = c.wait_for(replica_event("ReplicaDropped", 2, t_kill2), 30,
                           "a ReplicaDropped of replica 2", forbid=restarted(t0))
        print("kill of m2 (replica 2, pid %d) at t~%.1f s: ReplicaDropped after %.2f s, %s live"
              % (pid2, t_kill2, drop2["t_s"] - t_kill2, drop2["event"].get("live")))
        rejoin2 = c.wait_for(replica_event("ReplicaRejoined", 2, drop2["t_s"]), 90,
                             "a ReplicaRejoined of replica 2 (on the standby s0)",
                             forbid=restarted(t0))
        drops2 = [r for r in c.records()
                  if replica_event("ReplicaDropped", 2, t_kill2)(r) and r["t_s"] <= rejoin2["t_s"]]
        print("replica 2: ReplicaRejoined %.2f s after its first drop (%.2f s after the kill), "
              "%d drops of it in between (machines %s), %s live"
              % (rejoin2["t_s"] - drop2["t_s"], rejoin2["t_s"] - t_kill2, len(drops2),
                 [r["event"].get("machine") for r in drops2], rejoin2["event"].get("live")))
        c.wait_progress("s0", lambda r: r.get("event") == "joined", 30,
                        "the \"joined\" record of replica 2 in s0's progress.jsonl")
        first2 = c.wait_progress("s0", lambda r: "event" not in r, 30,
                                 "a step of replica 2 on s0")
        c.wait_progress("s0", lambda r: "event" not in r and r["step"] >= first2["step"]
                        + AFTER_REJOIN, 60, "%d steps of replica 2 on s0" % AFTER_REJOIN)

        # --- replica 3 hangs (the fault file's hang: blocked for good, as in a collective that
        # never returns): the others' collectives time out, they say so, the controller kills
        # the silent one and it rejoins on m3 ---
        pid3 = orig["m3"][0][0]
        t_hang = c.inject("m3", "hang")
        drop3 = c.wait_for(replica_event("ReplicaDropped", 3, t_hang), 60,
                           "a ReplicaDropped of replica 3 (hung)", forbid=restarted(t0))
        check(drop3["event"].get("signature", "").startswith("hang: "),
              "the ReplicaDropped of replica 3 says %r, not a hang"
              % drop3["event"].get("signature"))
        print("hang of replica 3 (pid %d) at t=%.1f s: ReplicaDropped after %.2f s (the "
              "replicas' timeout is %d s), %s live" % (pid3, t_hang, drop3["t_s"] - t_hang,
                                                       REPLICA_TIMEOUT_S,
                                                       drop3["event"].get("live")))
        # (h) the controller dies while replica 3 is out; the restarted one adopts the job
        # without it and the policy it builds afresh rejoins it
        check_drops_counted(c, 3, 2, "replica 3 out")
        t_restart = c.restart_controller()
        retold = c.wait_for(lambda r: (replica_event("ReplicaDropped", 3, t_restart)(r) and
                                       r["event"].get("signature", "").startswith(
                                           "out of the quorum when the controller restarted")),
                            30, "the restarted controller's ReplicaDropped of replica 3",
                            forbid=stopped(t0))
        print("controller killed and restarted at t=%.1f s: replica 3 told out again after %.2f s"
              % (t_restart, retold["t_s"] - t_restart))
        check_drops_counted(c, 3, 2, "after the controller's restart", forgotten=2)
        rejoin3 = c.wait_for(replica_event("ReplicaRejoined", 3, retold["t_s"]), 60,
                             "a ReplicaRejoined of replica 3", forbid=stopped(t0))
        print("replica 3: ReplicaRejoined %.2f s after its drop" % (rejoin3["t_s"] - drop3["t_s"]))
        check_drops_counted(c, 3, 3, "after replica 3's rejoin", forgotten=2)

        # --- to the end ---
        c.wait_for(lambda r: r.get("kind") == "note" and r.get("text") == FINISHED, 240,
                   "the note \"%s\"" % FINISHED, forbid=stopped(t0))
        code = c.procs["controller"].wait(timeout=60)
        check(code == 0, "the controller exited %d, not 0 (the job finished)" % code)
        total_s = time.monotonic() - t_begin
        records = c.records()

        # (f) the world never restarted: the one JobStarted after the first is the restarted
        # controller's adoption of the running generation
        starts = [r for r in records if is_event(r, "JobStarted")]
        adopted = {r["id"] for r in records if r.get("kind") == "outcome" and r["ok"]
                   and r["detail"].startswith("adopted generation")}
        check(len(starts) == 2 and starts[1]["event"]["action"] in adopted,
              "JobStarted at %s, not the first start and the restarted controller's adoption"
              % ["t=%.1f" % r["t_s"] for r in starts])
        check_rejoin_outcomes(records, t_restart)
        check_report(c)
        t_end = next(r["t_s"] for r in records
                     if r.get("kind") == "note" and r.get("text") == FINISHED)
        stops = [r for r in records if is_event(r, "JobStopped") and r["t_s"] < t_end]
        check(not stops, "a JobStopped at t=%.1f s before the end" % (stops[0]["t_s"]
                                                                      if stops else 0))

        # The account: steps trained with replicas missing count for their share, the rest
        # (and the quorum changes' pauses) is missing_replicas; the phases add up.
        account = [r for r in records if r.get("kind") == "account"][-1]
        lost = account["lost_s"]
        check(lost.get("missing_replicas", 0) > 0, "the account has no missing_replicas time: %s"
              % json.dumps(lost))
        total = account["productive_s"] + sum(lost.values())
        check(abs(total - account["elapsed_s"]) < 0.01 * account["elapsed_s"],
              "productive %.2f s + lost %.2f s != elapsed %.2f s"
              % (account["productive_s"], sum(lost.values()), account["elapsed_s"]))
        # Independently, from replica 0's progress file (it trained every step): each step
        # counts for the share of the replicas in the quorum it was committed in, at the
        # account's step time.
        summary = next(r for r in records if r.get("kind") == "summary")
        members = {r["step"]: len(r["members"]) for r in committed(c.progress("m0"))}
        expected = sum(summary["step_time_s"] * n / RANKS for n in members.values())
        print("account: ETTR %.2f%%, productive %.2f s (from the steps' quorums: %.2f s), "
              "missing_replicas %.2f s of %.2f s"
              % (100 * account["ettr"], account["productive_s"], expected,
                 lost["missing_replicas"], account["elapsed_s"]))
        check(abs(account["productive_s"] - expected) < 0.03 * expected,
              "productive %.2f s, but the steps' quorums give %.2f s"
              % (account["productive_s"], expected))

        # (a) one pid per process, the processes never killed kept theirs
        procs = {n: by_pid(c.progress(n)) for n in c.names}
        # m3: its rejoin under way when the controller died may have left a record before the
        # restarted controller killed it
        expected = {"m0": [1], "m1": [2], "m2": [1], "m3": [2, 3], "s0": [1]}
        for n, count in expected.items():
            check(len(procs[n]) in count, "%s: %d processes in progress.jsonl (pids %s), not %s"
                  % (n, len(procs[n]), [p for p, _ in procs[n]], count))
        for n in ("m0", "m1", "m2", "m3"):
            check(procs[n][0][0] == orig[n][0][0], "%s: the first process's pid changed from "
                  "%d to %d" % (n, orig[n][0][0], procs[n][0][0]))
        replica_of = lambda recs: {r["replica"] for r in recs}
        for n, pl in procs.items():
            want = 2 if n == "s0" else int(n[1:])
            for pid, recs in pl:
                check(replica_of(recs) == {want}, "%s: pid %d ran replicas %s, not %d"
                      % (n, pid, sorted(replica_of(recs)), want))
        # (b) no survivor stalled longer than a quorum change (or, around the hang, than the
        # replicas' timeout, the grace for the others to say so, and a quorum change)
        hung = committed(procs["m3"][0][1])
        hang_step = (hung[-1]["step"], hung[-1]["step"] + 2) if hung else (-1, -1)
        for n, pl in procs.items():
            for pid, recs in pl:
                gap, at = largest_gap(recs)
                last = max((r["step"] for r in committed(recs)), default=0)
                print("%s pid %d: steps %d..%d, largest gap between committed steps %.2f s "
                      "(before step %s)" % (n, pid, min((r["step"] for r in committed(recs)),
                                                        default=0), last, gap, at))
                bound = HANG_GAP_BOUND_S if hang_step[0] <= (at or 0) <= hang_step[1] \
                    else GAP_BOUND_S
                check(gap <= bound, "%s pid %d stalled %.2f s before step %s (bound %.1f s)"
                      % (n, pid, gap, at, bound))
        # (c) the joiners hold their peers' parameters, bit for bit
        reference = procs["m0"][0][1]
        check_joiner("m1", 1, procs["m1"][1], reference)
        check_joiner("s0", 2, procs["s0"][0], reference)
        check_joiner("m3", 3, procs["m3"][-1], reference)
        # (d) everyone alive at the end at STEPS, equal digests
        finals = {}
        for n, (pid, recs) in (("m0", procs["m0"][0]), ("m1", procs["m1"][1]),
                               ("m3", procs["m3"][-1]), ("s0", procs["s0"][0])):
            steps = {r["step"]: r for r in committed(recs)}
            check(steps and max(steps) == STEPS, "%s pid %d ended at step %d, not %d"
                  % (n, pid, max(steps) if steps else 0, STEPS))
            path = os.path.join(c.workdir(n), "digest.txt")
            check(os.path.exists(path), "%s: no digest.txt at the end" % n)
            with open(path) as f:
                finals[n] = f.read().strip()
            check(finals[n] == steps[STEPS]["digest"], "%s: digest.txt differs from its step %d "
                  "record" % (n, STEPS))
        check(len(set(finals.values())) == 1, "final digests differ: %s" % finals)
        killed_at = {n: max(r["step"] for r in committed(procs[n][0][1]))
                     for n in ("m1", "m2", "m3")}
        print("replica 1 killed after step %d, replica 2 after step %d, replica 3 hung after "
              "step %d; final digest %s" % (killed_at["m1"], killed_at["m2"], killed_at["m3"],
                                            finals["m0"][:16]))
        quorum = read_lines(os.path.join(c.workdir("m0"), "quorum.json"))
        if quorum:
            print("last quorum: %s" % json.dumps(quorum[-1]))
        if args.replay:
            out = check_replay_decisions(args, c.dir, "the replay's rejoin has no process start")
            live_n = out["live"]["resolved_by"].get("replica_drop", 0)
            sim_n = out["sim"]["resolved_by_per_replica"].get("replica_drop", 0)
            print("incidents resolved by replica_drop: live %d, replayed %.2f" % (live_n, sim_n))
            check(live_n == 3 and sim_n == 3, "incidents resolved by replica_drop: live %s, "
                  "replayed %s, not 3 and 3" % (live_n, sim_n))
        print("passed: %d steps, %.1f s in all" % (STEPS, total_s))


def check_rejoin_outcomes(records, t_restart):
    """(g) Each ReplicaRejoined answers a RejoinReplica whose outcome is ok, with the time from
    the action to the rejoin as its duration; every other RejoinReplica has a failed outcome, or
    none when it died with the controller killed at t_restart."""
    actions = {r["id"]: r for r in records if r.get("kind") == "action"
               and r["action"].get("type") == "RejoinReplica"}
    outcomes = {r["id"]: r for r in records if r.get("kind") == "outcome" and r["id"] in actions}
    rejoined = [r for r in records if is_event(r, "ReplicaRejoined")]
    check(len(rejoined) == 3, "%d ReplicaRejoined, not 3" % len(rejoined))
    for r in rejoined:
        a = actions.get(r["event"]["action"])
        o = outcomes.get(r["event"]["action"])
        check(a and o and o["ok"], "the RejoinReplica of the ReplicaRejoined at t=%.1f s has no ok "
              "outcome: %s" % (r["t_s"], o))
        check(abs(o["duration_s"] - (r["t_s"] - a["t_s"])) < 0.1 and o["duration_s"] > 0,
              "the RejoinReplica outcome says %.2f s, but its replica rejoined %.2f s after it"
              % (o["duration_s"], r["t_s"] - a["t_s"]))
    for i, a in actions.items():
        if i not in outcomes:
            check(a["t_s"] < t_restart, "RejoinReplica #%d at t=%.1f s has no outcome" % (i, a["t_s"]))
        elif i not in {r["event"]["action"] for r in rejoined}:
            check(not outcomes[i]["ok"], "RejoinReplica #%d succeeded without a ReplicaRejoined" % i)
    print("RejoinReplica outcomes: %s" % ", ".join(
        "#%d %s %.2f s" % (i, "ok" if o["ok"] else "failed", o["duration_s"])
        for i, o in sorted(outcomes.items())))


def check_report(c):
    """(g) The live report's incidents (analysis/report.py): one per drop, each closed at its
    replica's rejoin, resolved by replica_drop."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "analysis"))
    import report
    live = report.Live(os.path.join(c.dir, "state"))
    got = [(i.resolution, i.closed is not None) for i in live.incidents]
    check(got == [("replica_drop", True)] * 3, "the live report's incidents are %s, not three "
          "closed by replica_drop" % got)




def main():
    import sys
    if "--migrate" in sys.argv:
        sys.argv.remove("--migrate")
        live_harness.main(__doc__, run_migrate, replay_flag=True)
    elif "--faults" in sys.argv:
        sys.argv.remove("--faults")
        live_harness.main(__doc__, run_faults, replay_flag=True)
    else:
        live_harness.main(__doc__, run, replay_flag=True)


if __name__ == "__main__":
    main()
