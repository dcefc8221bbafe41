"""The report's inputs: what the C++ side wrote, read as it stands.

A result directory (`sim run|compare|sweep|tune --out`: result.json, replicas.csv,
compare.json, sweep.json, tune.json) and a live state directory (`faultline live run`:
events.jsonl, the event log of eventlog/event_log.h, and journal.json). Refusals are
InputError (exit 2 for a directory of the wrong kind)."""

import csv
import json
import math
import os


BUCKETS = ["detection", "diagnosis", "failover", "restore", "recompute", "checkpoint", "degraded", "warmup",
           "waiting_for_machines", "missing_replicas"]


class InputError(Exception):
    """A directory or file that is not what the report expects (exit 2 for a wrong kind)."""

    def __init__(self, msg, code=1):
        super().__init__(msg)
        self.code = code


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deep to read
        raise InputError("%s: not valid JSON (%s)" % (path, e))
    except OSError as e:
        raise InputError("%s: %s" % (path, e.strerror or e))


def fmt_value(v):
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


def t95(df):
    """Two-sided 95% Student t quantile (table for small df, Cornish-Fisher beyond)."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262,
             10: 2.228}
    if df in table:
        return table[df]
    z = 1.959963984540054
    return (z + (z ** 3 + z) / (4 * df) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * df ** 3))


def mean_ci(xs):
    n = len(xs)
    if n == 0:
        return float("nan"), float("nan"), float("nan")
    m = sum(xs) / n
    if n < 2:
        return m, m, m
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    h = t95(n - 1) * sd / math.sqrt(n)
    return m, m - h, m + h


# The reference stacks that bound what any policy can reach, by stack name (the oracle is the
# upper bound: policies/stacks/baselines.h; tests/sim/bounds_test.cc checks that no stack or module
# beats it on a shipped scenario).
BOUNDS = {"oracle": ("the upper bound", "told every fault at once, the best recovery the job allows per fault")}


class Run:
    """A `sim run --out` directory, one stack of a `sim compare --out` directory, or one sweep point."""

    def __init__(self, path, result, label=None):
        self.path = path
        self.result = result
        self.label = label or result.get("label") or result.get("policy", "?")
        self._replicas = None

    @staticmethod
    def load(path, label=None):
        return Run(path, read_json(os.path.join(path, "result.json")), label)

    @property
    def bound(self):
        """(role, what it knows) when its stack is a reference bound (BOUNDS), else None: a bound is
        what the policies are measured against, never one of them, so never the highest of them."""
        stack = self.result.get("policy") or self.label.split("+")[0]
        return BOUNDS.get(stack)

    def file(self, name):
        if not self.path:
            return None
        p = os.path.join(self.path, name)
        return p if os.path.exists(p) else None

    @property
    def horizon_days(self):
        return float(self.result.get("horizon_days", 0))

    def replica_ettr(self):
        """{replica: ETTR} from replicas.csv, or {} without one."""
        if self._replicas is None:
            self._replicas = {}
            path = self.file("replicas.csv")
            if path:
                with open(path, newline="") as f:
                    for rec in csv.DictReader(f):
                        try:
                            self._replicas[int(rec["replica"])] = float(rec["ettr"])
                        except (KeyError, ValueError):
                            raise InputError("%s: expected replica,ettr,... rows" % path)
        return self._replicas

    def pair_key(self):
        """Runs with equal keys saw the same fault histories, replica by replica."""
        r = self.result
        return (r.get("scenario"), r.get("seed"), r.get("horizon_days"), r.get("machines"))


def paired_diff(run, base):
    """The paired ETTR difference run - base over their common replicas (mean, 95% CI,
    shares won/tied/lost), or None when they cannot be paired."""
    a, b = run.replica_ettr(), base.replica_ettr()
    common = sorted(set(a) & set(b))
    if len(common) < 2 or run.pair_key() != base.pair_key():
        return None
    d = [a[i] - b[i] for i in common]
    m, lo, hi = mean_ci(d)
    n = float(len(d))
    return {"replicas": len(d), "mean": m, "ci95": [lo, hi], "wins": sum(x > 0 for x in d) / n,
            "ties": sum(x == 0 for x in d) / n, "losses": sum(x < 0 for x in d) / n}


class Group:
    """Stacks to set side by side: a `sim compare` directory, or several run directories."""

    def __init__(self, name, runs, baseline, source, files):
        self.name = name
        self.runs = runs
        self.baseline = baseline
        self.source = source  # where the per-stack results are: DIR/compare.json or each result.json
        self.files = files    # what the figures are drawn from, for captions
        for r in runs:
            if r is baseline:
                r.diff = None
            elif isinstance(r.result.get("vs_baseline"), dict):
                r.diff = r.result["vs_baseline"]
            else:
                r.diff = paired_diff(r, baseline)


class Compare:
    def __init__(self, path):
        self.path = path
        self.doc = read_json(os.path.join(path, "compare.json"))
        stacks = self.doc.get("stacks")
        if not isinstance(stacks, list) or not stacks:
            raise InputError("%s/compare.json: expected a list of stacks" % path)
        runs = []
        for st in stacks:
            label = st.get("label", st.get("policy", "?"))
            sub = os.path.join(path, label)
            runs.append(Run(sub if os.path.isdir(sub) else None, st, label))
        base_name = self.doc.get("baseline", runs[0].label)
        base = next((r for r in runs if r.label == base_name), runs[0])
        self.name = "%s (%s)" % (self.doc.get("scenario", "?"), os.path.basename(os.path.normpath(path)))
        self.group = Group(self.name, runs, base, "%s/compare.json" % os.path.basename(os.path.normpath(path)),
                           "%s/compare.json and STACK/replicas.csv" % os.path.basename(os.path.normpath(path)))


class Sweep:
    def __init__(self, path):
        self.path = path
        self.doc = read_json(os.path.join(path, "sweep.json"))
        if not isinstance(self.doc.get("points"), list):
            raise InputError("%s/sweep.json: expected a list of points" % path)
        self.points = self.doc["points"]
        self.axes = self.doc.get("axes", [])
        self.name = "%s (%s)" % (self.doc.get("scenario_name", "?"), os.path.basename(os.path.normpath(path)))

    def point_runs(self):
        runs = []
        for p in self.points:
            rp = os.path.join(self.path, p["result"])
            if not os.path.exists(rp):
                continue
            label = ", ".join("%s=%s" % (k.split(".")[-1], fmt_value(v)) for k, v in p["params"].items())
            runs.append(Run(os.path.dirname(rp), read_json(rp), label or "base"))
        return runs


class Tune:
    def __init__(self, path):
        self.path = path
        self.doc = read_json(os.path.join(path, "tune.json"))
        if isinstance(self.doc.get("params"), list):
            raise InputError("%s/tune.json: a tuning of several parameters or two objectives; the report "
                             "draws one-parameter tunings (its front and candidates are in tune.json)" % path)
        if not isinstance(self.doc.get("candidates"), list) or "best" not in self.doc:
            raise InputError("%s/tune.json: expected candidates and best" % path)
        self.name = "%s (%s)" % (self.doc.get("param", "?"), os.path.basename(os.path.normpath(path)))


def detect(path):
    """The kind of a result directory, from its files."""
    for name, kind in (("compare.json", "compare"), ("tune.json", "tune"), ("sweep.json", "sweep"),
                       ("result.json", "run"), ("events.jsonl", "live")):
        if os.path.exists(os.path.join(path, name)):
            return kind
    return None


# A live run's state directory (`faultline live run`, STATE_DIR): events.jsonl, the event
# log of eventlog/event_log.h, and journal.json. The headline comes from the log's summary
# record; ETTR over time and lost time by phase from its "account" records (cumulative,
# written at each incident's close and with the summary), or, in a log that predates them,
# ETTR from the progress records alone.

# Actions a policy takes once at start (its set-up), or notes: not steps of an incident.
LIVE_SETUP_ACTIONS = {"SetCheckpointPlan", "WatchSteps", "EnableInspection", "SetStandbyPool", "Note",
                      "EnableOracle", "EnableReplicaGroups"}
# Events that only report what an action found, or healthy progress: not a symptom.
LIVE_QUIET_EVENTS = {"StepSample", "JobStarted", "JobStopped", "ProbeResult", "ReplayResult", "MachinesReady",
                     "StacksCaptured", "ActionFailed"}


class Live:
    """A live state directory: its event log, parsed, and the machines' names."""

    def __init__(self, path):
        self.path = path
        self.log = os.path.join(path, "events.jsonl")
        self.records, self.torn = read_event_log(self.log)
        head = self.records[0] if self.records else {}
        if head.get("kind") != "header" or head.get("format") != "faultline-eventlog":
            raise InputError("%s: expected a faultline event log (a header record first)" % self.log, 2)
        self.header = head
        by_kind = {}
        for r in self.records:
            by_kind.setdefault(r.get("kind"), []).append(r)
        self.by_kind = by_kind
        self.summary = by_kind.get("summary", [None])[-1]
        self.accounts = sorted(by_kind.get("account", []), key=lambda r: float(r["t_s"]))
        self.names = machine_names(path, head)
        self.stack = head.get("stack", "?")
        self.label = "live %s" % self.stack
        self.name = "%s (%s)" % (self.label, os.path.basename(os.path.normpath(path)))
        self.replay = None  # a `sim replay --out` run of the same log, when given too
        self.incidents = live_incidents(self)

    def machine(self, m):
        m = int(m)
        return self.names[m] if 0 <= m < len(self.names) else "machine %d" % m

    def machines(self, ms):
        return ", ".join(self.machine(m) for m in ms)

    @property
    def elapsed_s(self):
        if self.summary:
            return float(self.summary["elapsed_s"])
        return max((float(r.get("t_s", 0)) for r in self.records), default=0.0)

    def figures(self):
        """ETTR, elapsed, productive: the summary's, or from the last account record, or
        from the progress records of a log cut short before its summary."""
        if self.summary:
            s = self.summary
            return float(s["ettr"]), float(s["elapsed_s"]), float(s["productive_s"]), "the summary record"
        if self.accounts:
            a = self.accounts[-1]
            return float(a["ettr"]), float(a["elapsed_s"]), float(a["productive_s"]), "the last account record"
        t, cum = progress_ettr(self)
        el = self.elapsed_s
        return (cum[-1] if cum else 0.0), el, (cum[-1] * el if cum else 0.0), "the progress records (no summary)"


def read_event_log(path):
    """Records of a JSON-lines event log; a torn last line (a crash mid-write) is left out."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
    except OSError as e:
        raise InputError("%s: %s" % (path, e.strerror or e))
    records, torn = [], False
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            if not isinstance(rec, dict) or "kind" not in rec:
                raise ValueError("not a record")
        except (ValueError, RecursionError):  # RecursionError: nested too deep to read
            if i == len(lines) - 1:  # no newline after it: cut off mid-write
                torn = True
                continue
            raise InputError("%s:%d: expected one JSON object with a \"kind\" per line" % (path, i + 1), 2)
        records.append(rec)
    return records, torn


def machine_names(path, header):
    """Machine names by id: the header's (the run's, when the log was begun), else the
    journal's, else the config file's (machines then standbys)."""
    names = header.get("machine_names")
    if isinstance(names, list) and names:
        return [str(n) for n in names]
    jp = os.path.join(path, "journal.json")
    try:
        with open(jp) as f:
            names = json.load(f).get("machine_names")
        if isinstance(names, list) and names:
            return [str(n) for n in names]
    except (OSError, ValueError, AttributeError, RecursionError):
        pass
    try:
        with open(header.get("config_file", "")) as f:
            cfg = json.load(f)
        return [str(m["name"]) for m in cfg.get("machines", []) + cfg.get("standby", [])]
    except (OSError, ValueError, AttributeError, KeyError, TypeError, RecursionError):
        return []


class Incident:
    def __init__(self, t, fault=None):
        self.t = t
        self.faults = [fault] if fault else []
        self.symptom = ""
        self.actions = []  # (t_s, text)
        self.detected = None
        self.closed = None
        self.resolution = ""
        self._start_ids = set()
        self._rejoin_ids = set()


def describe_action(live, a, ready):
    """One action as the operator reads it: its kind, machines and mechanism."""
    kind = a.get("type", "?")
    text = kind + (" " + a["test"] if kind == "RunProbe" and a.get("test") else "")
    if a.get("machines"):
        text += " on " + live.machines(a["machines"])
    if kind == "AcquireMachines":
        got = ready.get(a.get("_id"))
        text += " for slot %s: %s" % (",".join(str(s) for s in a.get("slots", [])), live.machines(got) if got else "?")
        text += " (%s)" % a["mode"] if a.get("mode") else ""
    if kind == "StartJob" and a.get("mechanism") not in (None, "none"):
        text += " (%s)" % a["mechanism"]
    return text


def live_incidents(live):
    """Incidents from the log: each opens at an injected fault on a job machine (or the
    policy's first reaction to something no fault record explains) and closes when the job
    it stopped started again (the JobStarted of a StartJob taken during the incident), or,
    with replica groups, when the replica it dropped trains again (the ReplicaRejoined of a
    RejoinReplica taken during the incident: resolved by replica_drop, as the simulator
    counts it; the job trained on meanwhile)."""
    ready = {}
    for r in live.by_kind.get("event", []):
        e = r.get("event", {})
        if e.get("type") == "MachinesReady":
            ready[e.get("action")] = e.get("machines", [])
    out, cur = [], None
    for r in live.records:
        kind, t = r.get("kind"), float(r.get("t_s", 0))
        if kind == "fault":
            if int(r.get("slot", -1)) < 0 and r.get("fault") != "update":
                continue  # a standby's fault: the job did not see it
            f = "%s on %s%s" % (r.get("fault", "?"), live.machine(r.get("machine", -1)),
                                 " (%s)" % r["detail"] if r.get("detail") else "")
            if cur is None:
                cur = Incident(t, f)
                out.append(cur)
            else:
                cur.faults.append(f)
        elif kind == "action":
            a = dict(r.get("action", {}), _id=r.get("id"))
            if a.get("type") in LIVE_SETUP_ACTIONS or a.get("reason") == "initial start":
                continue
            if cur is None:
                cur = Incident(t)
                out.append(cur)
            cur.detected = t if cur.detected is None else cur.detected
            if not cur.symptom and a.get("reason"):
                cur.symptom = a["reason"]
            cur.actions.append((t, describe_action(live, a, ready)))
            if a.get("type") == "StartJob":
                cur._start_ids.add(r.get("id"))
            if a.get("type") == "RejoinReplica":
                cur._rejoin_ids.add(r.get("id"))
            if a.get("mechanism") not in (None, "none"):
                cur.resolution = a["mechanism"]
        elif kind == "event" and cur is not None:
            e = r.get("event", {})
            if e.get("type") == "JobStarted" and e.get("action") in cur._start_ids:
                cur.closed = t
                cur.resolution = cur.resolution or "restart"
                cur = None
            elif e.get("type") == "ReplicaRejoined" and e.get("action") in cur._rejoin_ids:
                cur.closed = t
                cur.resolution = "replica_drop"
                cur = None
            elif e.get("type") not in LIVE_QUIET_EVENTS and not cur.symptom:
                cur.symptom = e.get("signature") or e.get("detail") or e.get("type", "")
        elif kind == "note" and cur is not None and str(r.get("text", "")).startswith("detected: "):
            cur.symptom = r["text"][len("detected: "):]
    return out


def progress_ettr(live):
    """Cumulative ETTR at each progress record: steps kept × the fault-free step time over
    the time since the run started (the summary's definition, eventlog/event_log.h)."""
    st = float((live.summary or {}).get("step_time_s") or live.header.get("nominal_step_time_s", 1.0))
    prog = [(float(r["t_s"]), int(r["step"])) for r in live.by_kind.get("progress", [])]
    if not prog:
        return [], []
    first = int((live.summary or {}).get("first_step", prog[0][1]))
    t = [p[0] for p in prog if p[0] > 0]
    cum = [min(1.0, max(0.0, (p[1] - first) * st / p[0])) for p in prog if p[0] > 0]
    if live.summary and float(live.summary["elapsed_s"]) > (t[-1] if t else 0):
        # No step after the last sample: the curve falls to the summary's figure at the end.
        t.append(float(live.summary["elapsed_s"]))
        cum.append(float(live.summary["ettr"]))
    return t, cum


def live_lost(live):
    """Lost seconds by phase from the last account record, or None for an older log."""
    if not live.accounts:
        return None
    lost = live.accounts[-1].get("lost_s") or {}
    return {b: float(lost.get(b, 0) or 0) for b in BUCKETS}


def is_replay(run):
    """A `sim replay --out` run: its scenario is built from an event log."""
    return run.result.get("trace_mapping", {}).get("mode") == "replay" or run.result.get("scenario") == "events"


def pair_replays(lives, runs):
    """A `sim replay --out` directory given with a live one is set beside it: by the log it
    replayed when its description names it, else the only live directory."""
    paired = []
    for r in runs:
        if not is_replay(r):
            continue
        desc = r.result.get("description", "")
        match = [lv for lv in lives if os.path.realpath(lv.log) in desc or lv.log in desc]
        # A replay run from another directory names the log by another path: its last two parts.
        match = match or [lv for lv in lives if os.path.join(os.path.basename(os.path.normpath(lv.path)),
                                                             "events.jsonl") in desc]
        target = match[0] if match else (lives[0] if len(lives) == 1 else None)
        if target and target.replay is None:
            target.replay = r
            paired.append(r)
    return paired
