"""The shared parts of live_replicas_e2e.py's runs (replica groups under real live mode):
the run's sizes and bounds, event predicates, /metrics scrapes, the cluster, and the checks of
progress files and joiners."""

import json
import os
import re
import time
import urllib.request

from live_harness import (Failure, LiveCluster, check, free_port, is_event, job_ports, read_lines)

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

