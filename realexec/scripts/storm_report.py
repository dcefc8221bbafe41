"""live-storm.sh's report: each injected fault matched to the controller's decision for it.

usage: storm_report.py WORK STORM_S REPLAY_RC REPLAY_T0 REPLAY_T1

Reads WORK/fleet.jsonl (the fleet's injections, each with a fault id, its machine and its
wall time; the first kill each crash/hang/NaN machine's agent received after its fault),
WORK/state/events.jsonl (the controller's event log) and WORK/state/journal.json (the run
time's origin on the wall clock), writes WORK/faults.jsonl, prints one line per kind and the
summary, and exits 1 when the storm fails its contract (live-storm.sh's header).
"""

import bisect
import json
import os
import sys

KINDS = ("crash", "hang", "nan", "machine_loss", "partition", "slow")


def quantile(v, q):
    if not v:
        return None
    v = sorted(v)
    return round(v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))], 4)


def load(work):
    fleet = [json.loads(x) for x in open(f"{work}/fleet.jsonl") if x.strip()]
    log = [json.loads(x) for x in open(f"{work}/state/events.jsonl") if x.strip()]
    origin = json.load(open(f"{work}/state/journal.json"))["origin_unix_ns"] / 1e9
    faults = [f for f in fleet if f["kind"] == "inject" and "fid" in f]
    kills = {k["fid"]: k for k in fleet if k["kind"] == "kill_seen"}
    for f in faults:
        f["t_ctl"] = f["wall"] - origin  # on the event log's time line
    return faults, kills, log


def timeline(log):
    """The actions with the event each follows (its cause), and the job's running spans."""
    actions, last_event, running, spans = [], None, False, []
    for r in log:
        if r.get("kind") == "event":
            last_event = r
            if r["event"]["type"] == "JobStarted":
                running = True
                spans.append((r["t_s"], True))
        elif r.get("kind") == "action":
            a = dict(r["action"], id=r["id"], t=r["t_s"], cause=last_event)
            actions.append(a)
            if a["type"] == "StopJob" and running:
                running = False
                spans.append((r["t_s"], False))
    return actions, spans


def running_at(spans, t):
    state = False
    for ts, up in spans:
        if ts > t:
            break
        state = up
    return state


def recorded(f, log, times):
    """The time the event log recorded fault f (None: lost), or f's injection (a hang)."""
    kind, m = f["fault"], f["id"]
    for r in log[bisect.bisect_left(times, f["t_ctl"] - 0.05):]:
        e = r.get("event", {}) if r.get("kind") == "event" else {}
        if kind == "crash" and e.get("signature") == f["signature"]:
            return r["t_s"]
        if kind == "crash" and r.get("kind") == "action" and f["signature"] in r["action"].get(
                "reason", ""):
            return r["t_s"]
        if kind == "crash" and r.get("kind") == "note" and f["signature"] in r.get("text", ""):
            return r["t_s"]  # a crash while another incident is handled
        if kind == "nan" and e.get("type") == "StepSample" and e.get("nan") and e.get(
                "step") == f["step"]:
            return r["t_s"]
        if kind == "nan" and r.get("kind") == "progress" and r.get("step") == f["step"] and r.get(
                "loss") is None and not r.get("restart"):
            return r["t_s"]
        if kind in ("machine_loss", "partition") and e.get("type") == "InspectionAlert" and e.get(
                "machine") == m and "agent lost" in e.get("detail", ""):
            return r["t_s"]
        if kind in ("machine_loss", "partition") and r.get("kind") == "note" and r.get(
                "text", "").startswith(f"standby {f['machine']} lost"):
            f["standby"] = True  # a standby by then: out of the pool, nothing to decide
            return r["t_s"]
        if kind in ("machine_loss", "partition") and r.get("kind") == "note" and r.get(
                "text", "").startswith(f"agent of {f['machine']} lost (") and (
                    "it is out of the job" in r["text"]):
            f["standby"] = True  # evicted by then (its repair check pending): nothing to decide
            return r["t_s"]
    return f["t_ctl"] if kind in ("hang", "slow") else None


def addresses(a, f):
    """Whether action a is a decision on fault f: a stop caused by it, an eviction naming it."""
    kind, m, cause = f["fault"], f["id"], (a["cause"] or {}).get("event", {})
    reason = a.get("reason", "")
    if a["type"] == "EvictMachines":  # a NaN or a hang is the job's, not its machine's
        return m in a.get("machines", []) and kind in ("crash", "machine_loss", "partition")
    if kind == "crash":  # a stop, or the tests of a start that it failed
        return f["signature"] in reason
    if a["type"] != "StopJob":
        return False
    if kind == "hang":
        return "stall" in reason
    if kind == "nan":
        return (cause.get("type") == "StepSample" and cause.get("step") == f["step"]
                and abs(a["cause"]["t_s"] - f["recorded_t"]) < 0.05)  # steps repeat after rollbacks
    if kind in ("machine_loss", "partition"):
        return cause.get("type") == "InspectionAlert" and cause.get("machine") == m
    return False


def match(f, actions, spans, log, times):
    """Fills f's record time, decision (or the decision covering it), and the reason."""
    t_rec = recorded(f, log, times)
    f["recorded_t"] = t_rec
    if t_rec is None:
        f["outcome"] = "lost"
        return
    if f.get("standby"):
        f["outcome"] = "not in the job"
        return
    if f["fault"] == "slow":
        f["outcome"] = "ridden out"
        return
    # Up to the machine's next fault: an eviction after it is that fault's.
    after = [a for a in actions if f["t_ctl"] - 0.001 <= a["t"] < f.get("next_t", 1e18)]
    mine = next((a for a in after if addresses(a, f)), None)
    stops = [a for a in actions if a["type"] == "StopJob"]
    if not running_at(spans, t_rec) and f["fault"] != "partition" and f["fault"] != "machine_loss":
        cover = [a for a in stops if a["t"] <= t_rec]
    else:
        cover = [a for a in stops if a["t"] >= f["t_ctl"] - 0.001][:1]
    first_cover = cover[-1] if cover else None
    # An action naming the fault (its signature, its machine) is its decision; a job-wide stop
    # is one only when no other stop came first.
    if f["fault"] == "hang":  # the first stop after it: a stall's, or another fault's
        first_cover = cover_after = next((a for a in stops if a["t"] >= f["t_ctl"]), None)
        mine = mine if mine is cover_after else None
    if mine and (first_cover is None or mine["t"] <= first_cover["t"] or f["fault"] != "hang"):
        f.update(outcome="decided", decision=mine["id"], action=mine["type"],
                 latency_s=mine["t"] - f["t_ctl"], reason=mine.get("reason", ""))
    elif first_cover:
        f.update(outcome="covered", decision=first_cover["id"],
                 reason=f"covered by decision {first_cover['id']} ({first_cover.get('reason', '')})")
    elif not f["awaits"]:
        f["outcome"] = "not in the job"
    else:
        f.update(outcome="undecided", reason="no stop and no eviction after it")


def replay_figures(work, rc, t0, t1):
    out = {"replay_seconds": round(float(t1) - float(t0), 1), "replay_rc": rc}
    try:
        d = json.load(open(f"{work}/replay.json"))["decisions"]
        out.update({f"replay_{k}": d[k] for k in ("live", "matched", "explained", "unexplained")})
    except (OSError, ValueError, KeyError, TypeError):
        out["replay_error"] = open(f"{work}/replay.err").read().strip()[-300:]
    return out


def usage(work):
    cpu = rss = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for tag in ("1", "2"):
        try:
            _, u, s, hwm = open(f"{work}/usage.{tag}").read().split()
            cpu += (int(u) + int(s)) / tick
            rss = max(rss, int(hwm) / 1024)
        except (OSError, ValueError):
            pass
    return round(cpu, 2), round(rss, 1)


def per_kind(faults, kills):
    lines = []
    for kind in KINDS:
        fs = [f for f in faults if f["fault"] == kind]
        lat = [f["latency_s"] for f in fs if f.get("outcome") == "decided"]
        lag = [kills[f["fid"]]["wall"] - (f["wall"] + f["latency_s"]) for f in fs
               if f.get("outcome") == "decided" and f.get("action") == "StopJob" and f["fid"] in kills]
        count = {o: sum(1 for f in fs if f.get("outcome") == o) for o in
                 ("decided", "covered", "undecided", "lost", "not in the job", "ridden out")}
        lines.append({"kind": kind, "faults": len(fs), **count, "p50_s": quantile(lat, 0.5),
                      "p99_s": quantile(lat, 0.99), "max_s": round(max(lat), 4) if lat else None,
                      "kill_lag_p50_s": quantile(lag, 0.5)})
    return lines


def main():
    work, storm_s, replay_rc, t0, t1 = sys.argv[1:6]
    try:
        faults, kills, log = load(work)
    except (OSError, ValueError, KeyError) as e:
        # A run that never got going (the fleet or the controller did not start): one line.
        print("live-storm.sh: %s: cannot read the run (%s); see fleet.err and controller1.log"
              % (work, e), file=sys.stderr)
        sys.exit(1)
    actions, spans = timeline(log)
    times = [r.get("t_s", 0) for r in log]
    last = {}
    for f in faults:
        if f["id"] >= 0:
            if f["id"] in last:
                last[f["id"]]["next_t"] = f["t_ctl"]
            last[f["id"]] = f
    for f in faults:
        match(f, actions, spans, log, times)
    with open(f"{work}/faults.jsonl", "w") as out:
        for f in faults:
            out.write(json.dumps(f) + "\n")
    kinds = per_kind(faults, kills)
    for k in kinds:
        print(json.dumps(k))
    faulted = {f["id"] for f in faults if f["id"] >= 0}
    evicted = {m for a in actions if a["type"] == "EvictMachines" for m in a.get("machines", [])}
    decided = [f["latency_s"] for f in faults
               if f.get("outcome") == "decided" and f["fault"] not in ("hang", "slow")]
    hangs = [f["latency_s"] for f in faults if f["fault"] == "hang" and f.get("outcome") == "decided"]
    cpu, rss = usage(work)
    jobs = len(json.load(open(f"{work}/live.json"))["machines"])
    summary = {
        "agents": jobs, "storm_s": int(storm_s),
        "load_avg": [float(open(f"{work}/load.{w}").read()) for w in ("start", "end")],
        "faults": len(faults), "decisions": len(decided),
        "decision_p50_s": quantile(decided, 0.5), "decision_p99_s": quantile(decided, 0.99),
        "hang_detections": len(hangs), "hang_detect_p50_s": quantile(hangs, 0.5),
        "hang_detect_p99_s": quantile(hangs, 0.99),
        "covered": sum(1 for f in faults if f.get("outcome") == "covered"),
        "undecided": sum(1 for f in faults if f.get("outcome") == "undecided"),
        "lost_events": sum(1 for f in faults if f.get("outcome") == "lost"),
        "false_evictions": len(evicted - faulted),
        "controller_cpu_s": cpu, "controller_rss_mib": rss,
        **replay_figures(work, int(replay_rc), t0, t1)}
    print(json.dumps(summary))
    bad = (summary["lost_events"] > 0 or summary["false_evictions"] > 0 or len(decided) < 50
           or (summary["decision_p99_s"] or 0) > 1)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
