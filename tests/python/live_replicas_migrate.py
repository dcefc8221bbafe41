"""live_replicas_e2e.py --migrate: recovery=migrate on replica groups under the real
controller."""

import json
import os
import time

from live_harness import (check, check_replay_decisions, is_event, require_torch)
from live_replicas_support import (RANKS, GAP_BOUND_S, FINISHED, restarted, Cluster, by_pid,
                                   committed, largest_gap, check_joiner)


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

