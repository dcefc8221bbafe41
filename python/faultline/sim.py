"""The simulator from Python: :func:`simulate`, :func:`compare` and :func:`sweep`.

Each call runs the same code as ``faultline sim run|compare|sweep`` (in this process, through
the extension ``faultline._core``), so the same seed gives the same numbers as the CLI. The
CLI's JSON comes back as attributes (``r.ettr.mean``, ``r.breakdown_s.productive``) and its
CSV files as pandas DataFrames. Failures raise :class:`faultline.Error` (bad input:
:class:`faultline.InputError`, also a ``ValueError``) with the CLI's one-line message.
See docs/python.md.
"""

import json
import math
import numbers
import os
import sys
import tempfile
import time
from collections import namedtuple
from collections.abc import Mapping

from faultline.errors import Error, InputError

__all__ = ["simulate", "compare", "sweep", "Result", "CompareResult", "SweepResult", "Fields",
           "Progress"]

DICT_NAME = "<dict>"  # how a scenario given as a dict is named in error messages


# ---- results ------------------------------------------------------------------------------

def _wrap(value):
    if isinstance(value, dict):
        return Fields(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class Fields(Mapping):
    """A JSON object whose fields are also attributes, recursively: ``f.ettr.mean`` is
    ``f["ettr"]["mean"]``. A read-only mapping (``dict(f)``, ``f.keys()``, ``pd.Series(f)``);
    ``f.to_dict()`` is the plain JSON object. A field named like a mapping method (``keys``,
    ``values``, ``items``, ``get``: a sweep's ``axes``) is read by item: ``axis["values"]``."""

    def __init__(self, data):
        object.__setattr__(self, "_data", data)

    def __getitem__(self, key):
        return _wrap(self._data[key])

    def __getattr__(self, name):
        if name.startswith("__") or name == "_data":
            raise AttributeError(name)
        try:
            return _wrap(self._data[name])
        except KeyError:
            raise AttributeError("no field %r (fields: %s)"
                                 % (name, ", ".join(sorted(self._data)))) from None

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {k for k in self._data if k.isidentifier()})

    def __repr__(self):
        return "Fields(%s)" % _short(self._data)

    def to_dict(self):
        """The JSON object (the dict itself, not a copy)."""
        return self._data


def _short(data, width=300):
    text = json.dumps(data, sort_keys=True)
    return text if len(text) <= width else text[:width] + "...}"


class Result(Fields):
    """What :func:`simulate` returns: the fields of ``sim run --format json`` as attributes
    (``r.ettr.mean``, ``r.ettr.ci95``, ``r.breakdown_s.productive``, ``r.policy``), and:

    - ``r.json``: that JSON (a dict);
    - ``r.replicas``: DataFrame of replicas.csv, one row per replica (``replica``, ``ettr``,
      the ``*_s`` breakdown, ``incidents``, ``faults_injected``, ``evictions_true``, ...);
    - ``r.incidents``: DataFrame of incidents.csv (one row per incident; ``slots``,
      ``machines`` and ``evicted`` as lists of ints) if ``incidents=True`` was asked, else
      None;
    - ``r.timeline``: DataFrame of timeline.csv if ``timeline=True``, else None;
    - ``r.decisions``: the text of decisions.log if ``decisions=True``, else None.

    ``replicas`` and ``incidents`` are also JSON fields (the replica count, the incident
    summary): item access gives the JSON, ``r["replicas"]``, ``r["incidents"].by_category``.
    """

    def __init__(self, data, replicas, incidents=None, timeline=None, decisions=None):
        super().__init__(data)
        self.__dict__.update(json=data, replicas=replicas, incidents=incidents,
                             timeline=timeline, decisions=decisions)

    def __repr__(self):
        d, e = self._data, self._data.get("ettr", {})
        lo, hi = (e.get("ci95") or [math.nan, math.nan])[:2]
        return "<Result %s, %s, %s replicas: ETTR %.4f [%.4f, %.4f]>" % (
            d.get("scenario"), d.get("label", d.get("policy")), d.get("replicas"),
            e.get("mean", math.nan), lo, hi)


class CompareResult(Fields):
    """What :func:`compare` returns: the fields of ``sim compare --format json`` as attributes
    (``c.baseline``, ``c.seed``, ``c.stacks``: the JSON list, one object per stack), and:

    - ``c.json``: that JSON (a dict);
    - ``c.table``: DataFrame, one row per stack (index ``label``, in the order given): ``policy``,
      ``ettr_mean|lo|hi|stddev``, ``diff_mean|lo|hi`` (paired ETTR difference to the baseline,
      95% CI), ``diff_unpaired_lo|hi``, ``wins|ties|losses`` (shares of replicas; NaN on the
      baseline's row), ``<bucket>_s_mean|lo|hi`` for every breakdown bucket, and per-replica
      means ``incidents_mean``, ``faults_injected_mean``, ``evictions_true_mean``,
      ``evictions_false_mean``, ``checkpoints_mean``, ``gpu_hours_lost_mean``,
      ``standby_exhaustions_mean``;
    - ``c.replicas``: every stack's replicas.csv in one DataFrame, column ``stack_name`` first;
    - ``c.paired``: per-replica ETTR differences to the baseline (index ``replica``, one column
      per other stack);
    - ``c.results``: dict label -> :class:`Result` of each stack (its replicas, incidents,
      decisions);
    - ``c.incidents``: every stack's incidents.csv (column ``stack_name`` first) if asked, else None.
    """

    def __init__(self, data, results):
        super().__init__(data)
        self.__dict__.update(json=data, results=results, table=_compare_table(data),
                             replicas=_concat(results, "replicas"),
                             incidents=_concat(results, "incidents"))
        self.__dict__["paired"] = _paired(self.replicas, data)

    def __repr__(self):
        return "<CompareResult %s: %s; baseline %s>" % (
            self._data.get("scenario"), ", ".join(self.results), self._data.get("baseline"))


class SweepResult(Fields):
    """What :func:`sweep` returns: the fields of ``sim sweep --format json`` as attributes
    (``s.axes``, ``s.metrics``, ``s.points``: each point's ``params``, ``metrics`` and full
    ``result``), and:

    - ``s.json``: that JSON (a dict);
    - ``s.table``: DataFrame, one row per point, the columns of sweep.csv: the swept fields
      (their ``set`` paths), ``replicas``, then ``<metric>_mean|lo|hi`` (95% CI) for every
      metric in ``s.metrics`` (ettr, the ``*_s`` buckets, unproductive_s, incidents, ...); for
      a job of fixed work ``time_to_train_days_mean|lo|hi``, ``_p50|_p90|_p99`` with their
      bootstrap CIs (``_lo``, ``_hi``) and ``time_to_train_censored``; with a `baseline`,
      ``<metric>_diff_mean|lo|hi`` (paired difference to the baseline point, 95% CI),
      ``ettr_diff_unpaired_lo|hi``, ``wins|ties|losses`` (shares of replicas; the baseline's
      own row: 0 and all ties) and for a job of fixed work ``time_to_train_days_diff_*``.
    """

    def __init__(self, data, table=None):
        super().__init__(data)
        self.__dict__.update(json=data, table=_sweep_table(data) if table is None else table)

    def __repr__(self):
        return "<SweepResult %s: %d points>" % (
            self._data.get("scenario_name"), len(self._data.get("points", [])))


# ---- argument checks ----------------------------------------------------------------------

def _count(name, value, least=1):
    if value is None:
        return []
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s: expected an integer, got %r" % (name, value))
    if value < least:
        raise ValueError("%s: expected an integer >= %d, got %d" % (name, least, value))
    return ["--" + name, str(int(value))]


def _plain(obj):
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return obj.tolist()
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    raise TypeError("%s is not JSON" % type(obj).__name__)


def _bare(text):
    """Whether the CLI reads `text` unquoted as this very string (so that the CLI's CSVs,
    point ids and messages show it as a CLI user would have written it)."""
    if not text or text != text.strip() or any(c in text for c in ',[]{}"\\+'):
        return False
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


def _value(what, value):
    """`value` as the CLI's VALUE: JSON (a string unquoted where that means the same)."""
    if isinstance(value, str) and _bare(value):
        return value
    try:
        return json.dumps(value, allow_nan=False, default=_plain)
    except (TypeError, ValueError) as e:
        raise type(e)("%s: %s" % (what, e)) from None


def _path_key(what, key):
    if not isinstance(key, str):
        raise TypeError("%s: expected a str key (a dotted scenario path), got %r" % (what, key))
    if not key or "=" in key or key != key.strip():
        raise ValueError("%s: %r is not a dotted scenario path such as 'job.pp'" % (what, key))
    return key


def _mapping(what, value):
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError("%s: expected a dict {path: value}, got %s" % (what, type(value).__name__))
    return value


def _set_flags(sets):
    out = []
    for key, value in _mapping("set", sets).items():
        path = _path_key("set", key)
        out += ["--set", "%s=%s" % (path, _value("set[%r]" % path, value))]
    return out


def _values(what, values):
    if isinstance(values, (str, bytes, Mapping)) or not hasattr(values, "__iter__"):
        raise TypeError("%s: expected a list of values, got %r" % (what, values))
    values = list(values)
    if not values:
        raise ValueError("%s: expected at least one value" % what)
    return ",".join(_value(what, v) for v in values)


def _flag(name, on):
    return ["--" + name] if on else []


def _common(replicas, jobs, seed, sets, allow_unused):
    return (_count("replicas", replicas) + _count("jobs", jobs) + _count("seed", seed, 0)
            + _set_flags(sets) + _flag("allow-unused", allow_unused))


# ---- scenarios and stacks -----------------------------------------------------------------

def _scenario_path(scenario, tmp):
    """The path to give the CLI: the file itself, or `scenario` (a dict) written to
    TMP/scenario.json."""
    if isinstance(scenario, Mapping):
        path = os.path.join(tmp, "scenario.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(scenario, f, indent=1, allow_nan=False, default=_plain)
        return path
    if not isinstance(scenario, (str, bytes, os.PathLike)):
        raise TypeError("scenario: expected a path or a dict, got %s" % type(scenario).__name__)
    path = os.fsdecode(scenario)
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "scenario: no such file", path)
    return path


def _own_stack(scenario, path):
    if isinstance(scenario, Mapping):
        return (scenario.get("policy") or {}).get("stack")
    try:
        with open(path, encoding="utf-8") as f:
            return (json.load(f).get("policy") or {}).get("stack")
    except (OSError, ValueError, AttributeError):
        return None  # the CLI says what is wrong with the file


def _stack_flags(stack, own, sets):
    """``stack`` as compare's --stacks reads one, NAME+PARAM=VALUE+...: a stack other than
    the scenario's own starts from its default parameters."""
    if stack is None:
        return []
    if not isinstance(stack, str):
        raise TypeError("stack: expected a str, got %r" % (stack,))
    if not stack or "," in stack:
        raise ValueError("stack: expected 'NAME' or 'NAME+PARAM=VALUE+...', got %r" % (stack,))
    if "policy.stack" in _mapping("set", sets):
        raise ValueError("stack: give the stack either as stack= or as set['policy.stack']")
    name, *params = stack.split("+")
    out = ["--set", "policy.stack=" + json.dumps(name)]
    if name != own:
        out += ["--set", "policy.params={}"]
    for p in params:
        if "=" not in p or p.startswith("="):
            raise ValueError("stack: %r: expected NAME+PARAM=VALUE, got %r" % (stack, p))
        out += ["--set", "policy.params." + p]
    return out


# ---- running the CLI ----------------------------------------------------------------------

def _core():
    try:
        from faultline import _core
    except ImportError as e:
        raise ImportError("faultline._core (the simulator extension) is not importable: build "
                          "it (cmake --build BUILD --target faultline-python) or install "
                          "faultline (docs/python.md): %s" % e) from e
    return _core


def _message(stderr, rc):
    """The CLI's last `faultline: ` line, prefix (and " (see --help)") stripped; failing
    that (a crash), the first line it wrote."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith("faultline: ")]
    line = said[-1][len("faultline: "):] if said else (lines[0] if lines else "")
    if line.endswith(" (see --help)"):
        line = line[:-len(" (see --help)")]
    if rc < 0:
        line += " (killed by signal %d)" % -rc
    return line.strip() or "faultline exited with code %d" % rc


def _command(args, tmp_scenario=None, progress=None):
    """Runs ``faultline ARGS...``; returns its stdout, or raises Error / InputError.
    `progress(done, total, points_done, points_total)`, if given, is called as it goes."""
    if progress is None:
        rc, out, err = _core().command([str(a) for a in args])
    else:
        rc, out, err = _core().command([str(a) for a in args], progress)
    if tmp_scenario:
        err = err.replace(tmp_scenario, DICT_NAME)
    if rc != 0:
        kind = InputError if rc == 2 else Error
        raise kind(_message(err, rc), exit_code=rc, stderr=err, command=args)
    return out


class _Run:
    """A temporary directory for the scenario (when a dict) and the CLI's --out files,
    removed on exit; `out` (given by the caller) is kept instead."""

    def __init__(self, scenario, out):
        self.tmp = tempfile.TemporaryDirectory(prefix="faultline-")
        try:
            self.path = _scenario_path(scenario, self.tmp.name)
        except BaseException:
            self.tmp.cleanup()
            raise
        self.dict_path = self.path if isinstance(scenario, Mapping) else None
        self.out = os.fsdecode(out) if out is not None else os.path.join(self.tmp.name, "out")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.tmp.cleanup()

    def run(self, args, progress=None):
        return _command(args, self.dict_path, progress)


# ---- reading what the CLI wrote -----------------------------------------------------------

def _ids(text):
    return [int(x) for x in text.split()]


def _csv(path, wanted=True, id_lists=()):
    """The CSV at `path` as a DataFrame (None if not `wanted`); the columns `id_lists` hold
    space-separated ids: lists of ints in the frame (``df.explode("machines")``)."""
    if not wanted:
        return None
    import pandas as pd
    return pd.read_csv(path, converters={c: _ids for c in id_lists})


def _text(path, wanted):
    if not wanted:
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()


def _read_result(data, out, incidents=False, timeline=False, decisions=False):
    return Result(data, _csv(os.path.join(out, "replicas.csv")),
                  incidents=_csv(os.path.join(out, "incidents.csv"), incidents,
                                 ("slots", "machines", "evicted")),
                  timeline=_csv(os.path.join(out, "timeline.csv"), timeline),
                  decisions=_text(os.path.join(out, "decisions.log"), decisions))


def _concat(results, attr):
    frames = {label: getattr(r, attr) for label, r in results.items()}
    if not frames or any(f is None for f in frames.values()):
        return None
    import pandas as pd
    # The label column is `stack_name`, not `stack`: a column named like a DataFrame method
    # (DataFrame.stack) cannot be read as an attribute (c.replicas.stack is the method).
    return pd.concat([f.assign(stack_name=label)[["stack_name"] + list(f.columns)]
                      for label, f in frames.items()], ignore_index=True)


def _get(d, *path):
    for key in path:
        if not isinstance(d, dict) or key not in d:
            return math.nan
        d = d[key]
    return d


def _ci(d, *path):
    ci = _get(d, *path)
    return tuple(ci[:2]) if isinstance(ci, list) and len(ci) >= 2 else (math.nan, math.nan)


def _stack_row(s):
    row = {"label": s.get("label"), "policy": s.get("policy"),
           "ettr_mean": _get(s, "ettr", "mean")}
    row["ettr_lo"], row["ettr_hi"] = _ci(s, "ettr", "ci95")
    row["ettr_stddev"] = _get(s, "ettr", "stddev")
    row["diff_mean"] = _get(s, "vs_baseline", "mean")
    row["diff_lo"], row["diff_hi"] = _ci(s, "vs_baseline", "ci95")
    row["diff_unpaired_lo"], row["diff_unpaired_hi"] = _ci(s, "vs_baseline", "unpaired_ci95")
    for k in ("wins", "ties", "losses"):
        row[k] = _get(s, "vs_baseline", k)
    for bucket, v in (s.get("breakdown_s") or {}).items():
        row[bucket + "_s_mean"] = v
        row[bucket + "_s_lo"], row[bucket + "_s_hi"] = _ci(s, "breakdown_ci95_s", bucket)
    for col, path in _PER_REPLICA:
        row[col] = _get(s, *path)
    return row


_PER_REPLICA = [
    ("incidents_mean", ("incidents", "per_replica")),
    ("faults_injected_mean", ("incidents", "faults_injected_per_replica")),
    ("evictions_true_mean", ("evictions", "true_per_replica")),
    ("evictions_false_mean", ("evictions", "false_per_replica")),
    ("checkpoints_mean", ("checkpoints_per_replica",)),
    ("gpu_hours_lost_mean", ("gpu_hours_lost_per_replica",)),
    ("standby_exhaustions_mean", ("standby_exhaustions_per_replica",)),
]


def _compare_table(data):
    import pandas as pd
    return pd.DataFrame([_stack_row(s) for s in data.get("stacks", [])]).set_index("label")


def _paired(replicas, data):
    base = data.get("baseline")
    wide = replicas.pivot(index="replica", columns="stack_name", values="ettr")
    others = [s["label"] for s in data.get("stacks", []) if s["label"] != base]
    paired = wide[others].sub(wide[base], axis=0)
    paired.columns.name = None
    return paired


_TIME_TO_TRAIN = [("time_to_train_days_mean", ("mean",)), ("time_to_train_days_lo", ("ci95", 0)),
                  ("time_to_train_days_hi", ("ci95", 1))] + [
    (col, path) for q in ("p50", "p90", "p99") for col, path in (
        ("time_to_train_days_" + q, (q,)), ("time_to_train_days_%s_lo" % q, (q + "_ci95", 0)),
        ("time_to_train_days_%s_hi" % q, (q + "_ci95", 1)))] + [
    ("time_to_train_censored", ("censored",))]


def _number(d, path):
    for key in path:
        try:
            d = d[key]
        except (KeyError, IndexError, TypeError):
            return math.nan
    return math.nan if d is None else d


def _sweep_table(data):
    import pandas as pd
    keys = [k for axis in data.get("axes", []) for k in axis["keys"]]
    metrics = data.get("metrics", [])
    base = (data.get("baseline") or {}).get("index")
    timed = any("time_to_train" in p for p in data.get("points", []))
    rows = []
    for i, p in enumerate(data.get("points", [])):
        row = {k: p["params"].get(k) for k in keys}
        row["replicas"] = p.get("replicas")
        for m in metrics:
            for stat in ("mean", "lo", "hi"):
                row["%s_%s" % (m, stat)] = _get(p, "metrics", m, stat)
        if timed:
            for col, path in _TIME_TO_TRAIN:
                row[col] = _number(p.get("time_to_train"), path)
        if base is not None:  # the baseline's own row: no difference, every replica tied
            v = p.get("vs_baseline") or {}
            for m in metrics:
                for stat in ("mean", "lo", "hi"):
                    row["%s_diff_%s" % (m, stat)] = (0.0 if i == base else
                                                     _get(v, "metrics", m, stat))
            lo, hi = (math.nan, math.nan) if i == base else _ci(v, "unpaired_ci95")
            row["ettr_diff_unpaired_lo"], row["ettr_diff_unpaired_hi"] = lo, hi
            for k, own in (("wins", 0.0), ("ties", 1.0), ("losses", 0.0)):
                row[k] = own if i == base else _get(v, k)
            if timed:
                t = v.get("time_to_train_days")
                row["time_to_train_days_diff_mean"] = _number(t, ("mean",))
                row["time_to_train_days_diff_lo"] = _number(t, ("ci95", 0))
                row["time_to_train_days_diff_hi"] = _number(t, ("ci95", 1))
        rows.append(row)
    return pd.DataFrame(rows)


# ---- progress -----------------------------------------------------------------------------

Progress = namedtuple("Progress", "replicas_done replicas_total points_done points_total "
                                  "elapsed_s")
Progress.__doc__ = """What a `progress` callable of :func:`sweep` receives as the sweep goes:
replicas computed and to compute in this call (points stored by an earlier sweep with the
same `out` count as done and are not recomputed), points whose replicas are all computed and
points in all, seconds since the call began."""


def _in_notebook():
    shell = sys.modules.get("IPython")
    try:
        ip = shell.get_ipython() if shell else None
    except Exception:  # pragma: no cover - an IPython without a shell
        return False
    return ip is not None and type(ip).__name__ == "ZMQInteractiveShell"


class _Bar:
    """A progress bar: tqdm's (its notebook widget in Jupyter) when tqdm is installed, else a
    line redrawn in place on stderr."""

    def __init__(self):
        self.last = -1.0
        try:
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # tqdm.auto without ipywidgets: text instead
                from tqdm.auto import tqdm
            # Made now, so that its clock (the rate, the time left) starts with the sweep.
            self.tqdm = tqdm(total=None, unit="replica", desc="faultline sweep", leave=True)
        except ImportError:
            self.tqdm = None

    def __call__(self, p):
        if self.tqdm is not None:
            if self.tqdm.total != p.replicas_total:
                self.tqdm.total = p.replicas_total
            if p.points_total:
                self.tqdm.set_postfix_str("%d/%d points" % (p.points_done, p.points_total),
                                          refresh=False)
            self.tqdm.update(p.replicas_done - self.tqdm.n)
            return
        end = p.replicas_done == p.replicas_total and p.points_done == p.points_total
        if not end and p.elapsed_s - self.last < 0.2:
            return
        self.last = p.elapsed_s
        width = 30
        fill = int(width * p.replicas_done / max(1, p.replicas_total))
        line = "\r[%s%s] %d/%d points, %d/%d replicas %.1f s" % (
            "#" * fill, " " * (width - fill), p.points_done, p.points_total, p.replicas_done,
            p.replicas_total, p.elapsed_s)
        if 0 < p.replicas_done < p.replicas_total:
            line += ", about %.0f s left" % (
                p.elapsed_s / p.replicas_done * (p.replicas_total - p.replicas_done))
        sys.stderr.write(line + "\x1b[K" + ("\n" if end else ""))
        sys.stderr.flush()

    def close(self):
        if self.tqdm is not None:
            self.tqdm.close()


def _progress(progress):
    """(the callable _core.command gets, a bar to close or None) for sweep's `progress`."""
    if progress is False:
        return None, None
    if progress is None or progress is True:
        try:
            interactive = sys.stderr.isatty()
        except (AttributeError, ValueError):
            interactive = False
        if progress is None and not (interactive or _in_notebook()):
            return None, None
        bar = _Bar()
        user = bar
    elif callable(progress):
        bar, user = None, progress
    else:
        raise TypeError("progress: expected None, True, False or a callable, got %r"
                        % (progress,))
    t0 = time.monotonic()

    def call(done, total, points_done, points_total):
        user(Progress(done, total, points_done, points_total, time.monotonic() - t0))
    return call, bar


# ---- the API ------------------------------------------------------------------------------

def simulate(scenario, *, replicas=None, jobs=None, seed=None, set=None, stack=None,
             timeline=False, timeline_step_s=None, incidents=False, decisions=False,
             allow_unused=False, out=None):
    """Simulates `scenario` (``faultline sim run``) and returns a :class:`Result`.

    scenario: a scenario file (str or path-like) or a scenario as a dict (the JSON object;
        named "<dict>" in error messages, "scenario" in the result).
    replicas: number of replicas (default: the scenario's); jobs: replicas run in parallel as
        forked processes (default 1; the result does not depend on it); seed: the scenario seed
        (default: the scenario's).
    set: {path: value} overrides of scenario fields, e.g. {"job.pp": 4,
        "policy.params.checkpoint": "remote"} (``--set PATH=VALUE``; values as JSON).
    stack: run another policy stack, "NAME" or "NAME+PARAM=VALUE+...", as one entry of
        :func:`compare`'s `stacks` (another stack than the scenario's starts from its default
        parameters; `set` applies on top).
    timeline, incidents, decisions: also record r.timeline (every `timeline_step_s`
        seconds, whole and >= 1, default 600; giving it implies timeline), r.incidents,
        r.decisions.
    allow_unused: run even if a policy parameter is set that the stack does not read.
    out: keep the CLI's files (result.json, replicas.csv, ...) in this directory (default:
        a temporary directory, removed).
    """
    with _Run(scenario, out) as run:
        timeline = timeline or timeline_step_s is not None
        args = (["sim", "run", run.path, "--format", "json", "--quiet", "--out", run.out]
                + _stack_flags(stack, _own_stack(scenario, run.path), set)
                + _common(replicas, jobs, seed, set, allow_unused)
                + _timeline_flags(timeline, timeline_step_s)
                + _flag("incidents", incidents) + _flag("decisions", decisions))
        data = json.loads(run.run(args))
        return _read_result(data, run.out, incidents, timeline, decisions)


def _timeline_flags(timeline, step_s):
    if step_s is None:
        return _flag("timeline", timeline)
    if isinstance(step_s, bool) or not isinstance(step_s, numbers.Real):
        raise TypeError("timeline_step_s: expected seconds, got %r" % (step_s,))
    if not (step_s >= 1 and float(step_s).is_integer()):
        raise ValueError("timeline_step_s: expected whole seconds >= 1, got %r" % (step_s,))
    return ["--timeline", "--timeline-step-s", str(int(step_s))]


def _stacks_flags(stacks, variants, baseline):
    out = []
    if stacks is not None:
        if isinstance(stacks, str) or not all(isinstance(s, str) and s for s in stacks):
            raise TypeError("stacks: expected a list of stack names, got %r" % (stacks,))
        if not stacks or any("," in s for s in stacks):
            raise ValueError("stacks: expected stack names ('NAME' or 'NAME+PARAM=VALUE'), "
                             "got %r" % (stacks,))
        out += ["--stacks", ",".join(stacks)]
    for label, sets in _mapping("variants", variants).items():
        out += ["--variant", _variant(label, sets)]
    if baseline is not None:
        out += ["--baseline", str(baseline)]
    return out


def _variant(label, sets):
    if not isinstance(label, str) or not label or ":" in label or "," in label:
        raise ValueError("variants: %r is not a label" % (label,))
    parts = []
    for key, value in _mapping("variants[%r]" % label, sets).items():
        text = _value("variants[%r][%r]" % (label, key), value)
        if "+" in text:
            raise ValueError("variants[%r][%r]: a value with '+' cannot be passed" % (label, key))
        parts.append("%s=%s" % (_path_key("variants[%r]" % label, key), text))
    if not parts:
        raise ValueError("variants[%r]: expected at least one {path: value}" % label)
    return label + ":" + "+".join(parts)


def compare(scenario, stacks=None, *, variants=None, baseline=None, replicas=None, jobs=None,
            seed=None, set=None, incidents=False, decisions=False, allow_unused=False,
            out=None):
    """Runs several policy stacks on the same fault histories (``faultline sim compare``):
    replica i of every stack sees the same faults, so differences are paired. Returns a
    :class:`CompareResult` (``c.table``: one row per stack; ``c.paired``: per-replica
    differences to the baseline).

    stacks: list of registered stacks, each "NAME" or "NAME+PARAM=VALUE+..." (default:
        byterobust, requeue, reschedule, oracle), e.g. ["byterobust",
        "byterobust+localization=bisection"].
    variants: {label: {path: value}}: the scenario's own stack with these overrides, as
        another row (e.g. {"wall": {"faults.clock": "wall"}}).
    baseline: the stack or variant label the others are compared with (default: the first).
    replicas, jobs, seed, set, allow_unused, out: as in :func:`simulate`.
    incidents, decisions: also record each stack's incidents.csv / decisions.log
        (``c.incidents``, ``c.results[label].decisions``).
    """
    with _Run(scenario, out) as run:
        args = (["sim", "compare", run.path, "--format", "json", "--quiet", "--out", run.out]
                + _stacks_flags(stacks, variants, baseline)
                + _common(replicas, jobs, seed, set, allow_unused)
                + _flag("incidents", incidents) + _flag("decisions", decisions))
        data = json.loads(run.run(args))
        results = {s["label"]: _read_result(s, os.path.join(run.out, s["label"]), incidents,
                                            False, decisions)
                   for s in data.get("stacks", [])}
        return CompareResult(data, results)


def _axes_flags(grid, zip_):
    out = []
    for flag, axes in (("--grid", grid), ("--zip", zip_)):
        for key, values in _mapping(flag[2:], axes).items():
            path = _path_key(flag[2:], key)
            out += [flag, "%s=%s" % (path, _values("%s[%r]" % (flag[2:], path), values))]
    if not out:
        raise ValueError("sweep: expected grid={path: [values]} or zip={path: [values]}")
    return out


def sweep(scenario, grid=None, *, zip=None, baseline=None, replicas=None, jobs=None, seed=None,
          set=None, allow_unused=False, out=None, progress=None):
    """Simulates every point of a parameter grid (``faultline sim sweep``), each point on the
    same replicas and seeds (common random numbers: differences between points are not
    noise). Returns a :class:`SweepResult` (``s.table``: one row per point).

    grid: {path: [values]}: one axis per path, the cartesian product is swept (first axis
        slowest), e.g. {"policy.params.checkpoint_interval_s": [600, 1800, 3600]}.
    zip: {path: [values]}: paths whose lists have the same length move together (one axis).
    baseline: {path: value}: a point of the grid (``--baseline``; a path may be the swept
        path's last part, e.g. {"checkpoint_interval_s": 1800}); every point gets its paired
        difference to it (``s.table``'s ``<metric>_diff_mean|lo|hi``, ``wins``, ``ties``,
        ``losses``; ``vs_baseline`` in each point's JSON).
    replicas, jobs, seed, set, allow_unused: as in :func:`simulate`.
    out: store the points, sweep.csv and sweep.json there; a later sweep with the same `out`
        (and the same inputs) reuses the points already computed (default: a temporary
        directory, removed).
    progress: None (default): a progress bar while the sweep runs when stderr is a terminal
        or in a Jupyter notebook (tqdm's when installed); True: always; False: never; a
        callable: called with a :class:`Progress` as the sweep goes, instead of the bar.
    """
    call, bar = _progress(progress)
    with _Run(scenario, out) as run:
        args = (["sim", "sweep", run.path, "--format", "json", "--quiet", "--out", run.out]
                + _axes_flags(grid, zip) + _baseline_flags(baseline)
                + _common(replicas, jobs, seed, set, allow_unused))
        try:
            data = json.loads(run.run(args, call))
        finally:
            if bar is not None:
                bar.close()
        if run.dict_path and data.get("scenario") == run.dict_path:
            data["scenario"] = DICT_NAME
        import pandas as pd
        table = pd.read_csv(os.path.join(run.out, "sweep.csv"), float_precision="round_trip")
        return SweepResult(data, table)


def _baseline_flags(baseline):
    if baseline is None:
        return []
    parts = []
    for key, value in _mapping("baseline", baseline).items():
        text = _value("baseline[%r]" % key, value)
        if "+" in text:
            raise ValueError("baseline[%r]: a value with '+' cannot be passed" % key)
        parts.append("%s=%s" % (_path_key("baseline", key), text))
    if not parts:
        raise ValueError("baseline: expected {path: value} of a point of the grid")
    return ["--baseline", "+".join(parts)]
