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
import signal
import subprocess
import sys
import time
import urllib.request

import live_harness
from live_harness import (Failure, LiveCluster, check, check_replay_decisions, free_port,
                          is_event, job_ports, read_lines, require_torch)

STEPS = 800
STEP_MS = 40
RANKS = 4
KILL_AT = 40          # step of the first kill (replica 1, by inject)
AFTER_REJOIN = 40     # steps the rejoined replica 1 trains before machine m2 dies
QUORUM_CHANGE_S = 1
REPLICA_TIMEOUT_S = 5
# A survivor's largest gap between committed steps: a death is seen at once (the kernel closes
# the dead process's sockets), the controller changes the quorum in QUORUM_CHANGE_S, and a
# joiner's launch (python + torch import) may hold the group at the store barrier; 10 s leaves
# room for a loaded 2-core CI machine.
GAP_BOUND_S = 10.0
# Around the hang: the replicas' timeout, the controller's grace for the others to say their
# quorum failed (2 s), then a quorum change.
HANG_GAP_BOUND_S = REPLICA_TIMEOUT_S + 2 + GAP_BOUND_S
# --faults: the slow fault lands SLOW_AT steps in and stays to the end.
SLOW_AT = STEPS - 100
SLOW_FACTOR = 4
FINISHED = "every rank finished its steps"
CRASH = "CUDA error: an illegal memory access was encountered"


def replica_event(kind, replica, after):
    return lambda r: (is_event(r, kind) and r["event"].get("replica") == replica
                      and r["t_s"] >= after)


def restarted(after):
    """A JobStopped or JobStarted after t=after: the world stopped, which it must not."""
    return lambda r: ((is_event(r, "JobStopped") or is_event(r, "JobStarted"))
                      and r["t_s"] > after)


def stopped(after):
    """A JobStopped after t=after (a restarted controller's adoption is a JobStarted)."""
    return lambda r: is_event(r, "JobStopped") and r["t_s"] > after


SAMPLE = re.compile(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$')


def scrape(port):
    """GET /metrics: {(name, ((label, value), ...)): value}; retried while the endpoint of a
    controller just started is not up yet."""
    end = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                text = r.read().decode()
            break
        except OSError as e:
            check(time.monotonic() < end, "GET /metrics on port %d: %s" % (port, e))
            time.sleep(0.2)
    out = {}
    for line in text.splitlines():
        m = SAMPLE.match(line)
        if m:
            labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2) or "")))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def incident_metrics(port):
    """The replica_drop incidents /metrics counts: opened, recovered, and the detection and
    recovery histograms' counts."""
    m = scrape(port)
    return {"opened": m.get(("faultline_incidents_opened_total", (("category", "replica_drop"),)), 0),
            "recovered": m.get(("faultline_incidents_total", (("category", "replica_drop"),
                                                              ("resolution", "recovered"))), 0),
            "detections": m.get(("faultline_detection_latency_seconds_count", ()), 0),
            "recoveries": m.get(("faultline_recovery_latency_seconds_count", ()), 0),
            "open": m.get(("faultline_incidents_open", ()), 0)}


def check_drops_counted(c, drops, rejoined, when, forgotten=0):
    """(g) `live status --json` and /metrics count `drops` replica_drop incidents, `rejoined`
    of them closed. A restarted controller lists only the incidents it saw or resumed open
    (the `forgotten` first ones closed before it started), and counts them all."""
    st = c.status()
    inc = [i for i in st["incidents"] if i.get("category") == "replica_drop"]
    check(st["incident_count"] == drops and len(inc) == drops - forgotten,
          "%s: live status --json says incident_count %s (%d replica_drop listed), not %d replica "
          "drops: %s" % (when, st["incident_count"], len(inc), drops, json.dumps(st["incidents"])))
    closed = [i for i in inc if i["phase"] == "resolved"]
    check(len(closed) == rejoined - forgotten and all(i["phase"].startswith("replica ") for i in inc
                                          if i not in closed),
          "%s: the replica_drop incidents' phases are %s, not %d resolved and the rest a replica "
          "out or rejoining" % (when, [i["phase"] for i in inc], rejoined))
    m = incident_metrics(c.metrics_port)
    want = {"opened": drops, "recovered": rejoined, "detections": drops,
            "recoveries": rejoined, "open": drops - rejoined}
    check(m == want, "%s: /metrics counts %s, not %s" % (when, m, want))
    print("%s: status incident_count %d (phases %s), /metrics %s"
          % (when, st["incident_count"], [i["phase"] for i in inc], m))


class Cluster(LiveCluster):
    def __init__(self, args, params=None, steps=STEPS):
        super().__init__(args)
        self.example = [args.python, args.example, "--steps", str(steps), "--step-ms",
                        str(STEP_MS), "--progress", "progress.jsonl", "--digest", "digest.txt"]
        self.job_env = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""),
                        "GLOO_SOCKET_IFNAME": "lo",
                        "OMP_NUM_THREADS": "1"}  # 5 torch processes share a small machine
        self.master_port = job_ports(RANKS + 1)  # replica r's store: master_port + 1 + r
        self.write_config(
            "python e2e: replica groups (ft_replicas.py) under live mode",
            ["m%d" % i for i in range(RANKS)], ["s0"],
            {"versions": {"v1": self.example}, "version": "v1", "gpus_per_machine": 1,
             "replica_groups": True, "master_port": self.master_port,
             "nominal_step_time_s": STEP_MS / 1000, "env": self.job_env},
            {"stack": "byterobust",
             "params": params or {"recovery": "replica-drop", "quorum_change_s": QUORUM_CHANGE_S,
                                  "replica_timeout_s": REPLICA_TIMEOUT_S, "stall_window_s": 30,
                                  "recrash_window_s": 5, "probe_deadline_s": 60,
                                  "inspect_nic_s": 1, "standby_pool": 1}})
        self.metrics_port = free_port()
        with open(self.config) as f:
            config = json.load(f)
        config["metrics_listen"] = "127.0.0.1:%d" % self.metrics_port
        with open(self.config, "w") as f:
            json.dump(config, f, indent=2)

    def progress(self, name):
        """The records of machine `name`'s progress.jsonl (every process run there)."""
        return read_lines(os.path.join(self.workdir(name), "progress.jsonl"))

    def kill_machine(self, name):
        """The machine dies: `inject --fault machine_down`, whose agent SIGKILLs its ranks and
        exits 137 without a word to the controller, which sees its connection close. Unlike a
        SIGKILL of the agent from outside, the fault is recorded (ground truth), so that the
        replay can reproduce it. Returns the fault record's run time."""
        p = self.procs["agent-" + name]
        check(p.poll() is None, "the agent of %s exited before its machine was killed" % name)
        return self.inject(name, "machine_down")

    def wait_progress(self, name, pred, timeout_s, what):
        """Waits for a record of machine name's progress.jsonl that matches pred."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            for r in self.progress(name):
                if pred(r):
                    return r
            check(self.procs["controller"].poll() is None,
                  "the controller exited while waiting for %s" % what)
            time.sleep(0.2)
        raise Failure("timed out after %g s waiting for %s" % (timeout_s, what))

def by_pid(records):
    """A machine's progress records split per process, in the order the processes appeared:
    [(pid, [records])]. Fails when a process's records interleave with another's."""
    out = []
    for r in records:
        if not out or out[-1][0] != r["pid"]:
            check(all(pid != r["pid"] for pid, _ in out),
                  "pid %d's progress records interleave with another process's" % r["pid"])
            out.append((r["pid"], []))
        out[-1][1].append(r)
    return out


def committed(records):
    return [r for r in records if "event" not in r]


def largest_gap(records):
    """Largest time between consecutive committed steps, and the step it ended at."""
    steps = sorted((r["step"], r["t"]) for r in committed(records))
    worst = (0.0, None)
    for (_, t0), (s1, t1) in zip(steps, steps[1:]):
        worst = max(worst, (t1 - t0, s1))
    return worst


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (the killed agent's child, not reaped by us) counts as dead.
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def check_joiner(name, replica, procs_of, reference):
    """(c) The process that joined on machine `name` as `replica`: restored from a peer, with
    the reference process's parameters at its join step and after its first step."""
    pid, recs = procs_of
    joined = [r for r in recs if r.get("event") == "joined"]
    check(joined, "%s: no \"joined\" record from replica %d (pid %d)" % (name, replica, pid))
    j = joined[0]
    check(j["replica"] == replica, "%s: the joiner is replica %s, not %d"
          % (name, j["replica"], replica))
    check(j["restored_from"] == "peer", "%s: replica %d (pid %d) started restored from %s, "
          "not from a peer" % (name, replica, pid, j["restored_from"]))
    ref = {r["step"]: r for r in committed(reference)}
    check(j["step"] in ref, "%s: no reference digest for the join step %d" % (name, j["step"]))
    check(j["digest"] == ref[j["step"]]["digest"],
          "%s: replica %d joined at step %d with parameters that differ from its peers'"
          % (name, replica, j["step"]))
    first = committed(recs)
    check(first, "%s: replica %d (pid %d) committed no step" % (name, replica, pid))
    f = first[0]
    check(f["step"] == j["step"] + 1 and f["computed"],
          "%s: replica %d's first committed step is %d (computed %s), not %d"
          % (name, replica, f["step"], f["computed"], j["step"] + 1))
    check(f["digest"] == ref[f["step"]]["digest"],
          "%s: after its first step (%d) replica %d's parameters differ from its peers'"
          % (name, f["step"], replica))
    print("%s: replica %d (pid %d) joined at step %d (quorum %d, members %s) from a peer, "
          "bit-identical at steps %d and %d" % (name, replica, pid, j["step"], j["quorum"],
                                                j["members"], j["step"], f["step"]))


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


MIGRATE_STEPS = 300
WARN_AT = 60          # step of the warning (replica 2's machine m2)
WARN_LEAD_S = 600     # the warned failure's lead: beyond migrate_min_lead_s (60)
MIGRATION_PAUSE_S = 1  # the simulator's pause for the swap (the live one is measured)


def run_migrate(args):
    """--migrate: recovery=migrate on replica groups (issue 52). `inject --fault warn` on m2 at
    step ~WARN_AT: the policy migrates m2 (MigrateMachines); a joiner of replica 2 starts on
    the standby s0 and waits, then takes the slot and a live peer's state in the next quorum,
    and m2's process is killed (m2 leaves for repair). Checks: the outcome is ok and a
    MachinesReady names s0; the world never stops (one JobStarted, no JobStopped before the
    end); m0, m1 and m3 keep one process each, m2's outlives the swap by no more than the
    kill, s0's joiner holds its peers' parameters bit for bit; no survivor stalls longer than
    GAP_BOUND_S; everyone ends at MIGRATE_STEPS with equal digests; the one fault record is the
    warning; with --replay the simulator takes the same decisions."""
    t_begin = time.monotonic()
    require_torch(args.python)
    c = Cluster(args, {"recovery": "migrate", "migration_pause_s": MIGRATION_PAUSE_S,
                       "stall_window_s": 30, "recrash_window_s": 5, "probe_deadline_s": 60,
                       "inspect_nic_s": 1, "standby_pool": 1}, MIGRATE_STEPS)
    with c.kept_on_failure():
        c.start()
        t0 = c.wait_for(lambda r: is_event(r, "JobStarted"), 90, "the first JobStarted")["t_s"]
        c.wait_step(WARN_AT, 90)
        orig = {n: by_pid(c.progress(n)) for n in c.names[:RANKS]}
        t_warn = c.inject("m2", "warn", str(WARN_LEAD_S))
        c.wait_for(lambda r: is_event(r, "FailureWarning") and r["event"].get("machine") == 2,
                   10, "a FailureWarning of m2", forbid=restarted(t0))
        act = c.wait_for(lambda r: r.get("kind") == "action" and "MigrateMachines" in
                         r.get("action", {}).get("type", "") and r["t_s"] >= t_warn, 10,
                         "a MigrateMachines after the warning", forbid=restarted(t0))
        check(act["action"].get("machines") == [2], "MigrateMachines names %s, not [2]"
              % act["action"].get("machines"))
        done = c.wait_for(lambda r: r.get("kind") == "outcome" and r.get("id") == act["id"], 60,
                          "the migration's outcome", forbid=restarted(t0))
        check(done["ok"], "the migration failed: %s" % done.get("detail"))
        ready = c.wait_for(lambda r: is_event(r, "MachinesReady")
                           and r["event"].get("action") == act["id"], 10,
                           "the migration's MachinesReady")
        check(ready["event"].get("machines") == [4], "MachinesReady names %s, not s0 ([4])"
              % ready["event"].get("machines"))
        print("warn on m2 at t=%.1f s: MigrateMachines after %.2f s, done in %.2f s (%s)"
              % (t_warn, act["t_s"] - t_warn, done["duration_s"], done["detail"]))
        c.wait_for(lambda r: r.get("kind") == "note" and r.get("text") == FINISHED, 120,
                   "the note \"%s\"" % FINISHED, forbid=restarted(t0))
        code = c.procs["controller"].wait(timeout=60)
        check(code == 0, "the controller exited %d, not 0 (the job finished)" % code)
        records = c.records()
        check(len([r for r in records if is_event(r, "JobStarted")]) == 1,
              "the world restarted during the migration")
        faults = [(r["fault"], r["machine"]) for r in records if r.get("kind") == "fault"]
        check(faults == [("warn", 2)], "fault records %s, not the warning on m2" % faults)
        procs = {n: by_pid(c.progress(n)) for n in c.names}
        for n, count in {"m0": 1, "m1": 1, "m2": 1, "m3": 1, "s0": 1}.items():
            check(len(procs[n]) == count, "%s: %d processes in progress.jsonl, not %d"
                  % (n, len(procs[n]), count))
            if n != "s0":
                check(procs[n][0][0] == orig[n][0][0], "%s: its process changed" % n)
        check_joiner("s0", 2, procs["s0"][0], procs["m0"][0][1])
        for n, pl in procs.items():
            gap, at = largest_gap(pl[0][1])
            print("%s: largest gap between committed steps %.2f s (before step %s)" % (n, gap, at))
            check(gap <= GAP_BOUND_S, "%s stalled %.2f s before step %s" % (n, gap, at))
        left = max(r["step"] for r in committed(procs["m2"][0][1]))
        finals = {}
        for n in ("m0", "m1", "m3", "s0"):
            with open(os.path.join(c.workdir(n), "digest.txt")) as f:
                finals[n] = f.read().strip()
            check(max(r["step"] for r in committed(procs[n][0][1])) == MIGRATE_STEPS,
                  "%s did not reach step %d" % (n, MIGRATE_STEPS))
        check(len(set(finals.values())) == 1, "final digests differ: %s" % finals)
        print("m2's replica left after step %d; final digest %s" % (left, finals["m0"][:16]))
        if args.replay:
            out = check_replay_decisions(args, c.dir, "the replay's migration has no process "
                                         "start")
            sim = out["sim"].get("migration", {})
            check(sim.get("warnings_per_replica") == 1 and
                  sim.get("migrations_per_replica") == 1,
                  "the replay did not warn and migrate once: %s" % json.dumps(sim))
            print("replay: %s" % json.dumps(sim))
        print("passed in %.1f s" % (time.monotonic() - t_begin))


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
