"""Tuning from Python: :func:`tune`, ``faultline sim tune`` or an Optuna study driving
faultline's evaluations (docs/python.md, docs/what-if-studies.md).

Without a study, :func:`tune` runs ``sim tune`` itself (a coarse grid, then refinements around
the Pareto front), in this process through ``faultline._core``. With an Optuna study, the
study's sampler proposes the parameter values (NSGA-II for two objectives, for example) and
faultline evaluates every trial on the same replicas and seeds (common random numbers, one
``sim sweep`` store for all trials), tells the study the objectives' means and keeps each
replica's values as the trial's user attributes; the result is the study's Pareto front with
every point's 95% CIs and the front points it is statistically indistinguishable from, computed
by the same code as ``sim tune`` (analysis/pareto.h, through ``faultline._core``).
"""

import json
import math
import numbers
import os
import tempfile
from collections.abc import Mapping

from faultline.errors import InputError
from faultline import sim as _sim

__all__ = ["tune", "TuneResult"]

# sim tune's default goals: max for these, min for the others (cli/tune_cmd.cc).
_MAXIMIZED = ("ettr", "productive_s", "goodput_per_cost")

# The user attributes a trial evaluated by tune() carries.
ATTR_PREFIX = "faultline."


class TuneResult(_sim.Fields):
    """What :func:`tune` returns: the fields of ``sim tune --format json`` as attributes:
    ``t.params`` and ``t.objectives`` (each with its goal), ``t.replicas``, ``t.search``,
    ``t.candidates`` (every evaluated point: ``params``, ``objectives`` with each one's
    ``mean`` and ``ci95``, ``on_front`` for two objectives), and for two objectives ``t.front``
    (the Pareto front, best first by the first objective: ``params``, ``objectives``,
    ``indistinguishable_from``: indices of the other front points whose paired 95% CIs of
    both differences hold 0), for one ``t.best``. With an Optuna study the fields are the same
    (``search`` names the sampler; each candidate and front point has its ``trial`` number),
    and:

    - ``t.json``: that JSON (a dict);
    - ``t.table``: DataFrame, one row per candidate: the parameters (their ``set`` paths),
      ``<objective>_mean|lo|hi``, ``on_front`` (two objectives), ``round`` or ``trial``;
    - ``t.study``: the Optuna study (None without one).
    """

    def __init__(self, data, study=None):
        super().__init__(data)
        self.__dict__.update(json=data, study=study, table=_table(data))

    def __repr__(self):
        d = self._data
        what = ("%d front points" % len(d["front"]) if "front" in d else "best %s"
                % json.dumps(d.get("best", {}).get("params")))
        return "<TuneResult %s: %d candidates, %s>" % (
            d.get("scenario"), len(d.get("candidates", [])), what)


def _table(data):
    try:
        import pandas as pd
    except ImportError:
        return None
    keys = [p["key"] for p in data.get("params", [])]
    metrics = [o["metric"] for o in data.get("objectives", [])]
    rows = []
    for c in data.get("candidates", []):
        row = {k: c["params"].get(k) for k in keys}
        for m in metrics:
            o = c["objectives"][m]
            row[m + "_mean"], (row[m + "_lo"], row[m + "_hi"]) = o["mean"], o["ci95"]
        for k in ("on_front", "round", "trial"):
            if k in c:
                row[k] = c[k]
        rows.append(row)
    return pd.DataFrame(rows)


# ---- argument checks ----------------------------------------------------------------------

def _bad(message):
    return InputError(message, exit_code=2)


def _ranges(params):
    """{path: (lo, hi[, "log"])} as [(key, lo, hi, log, integer)]: whole numbers when lo and
    hi are both ints, as sim tune's KEY=LO:HI."""
    if not isinstance(params, Mapping) or not params:
        raise _bad("params: expected {path: (lo, hi) or (lo, hi, 'log')}, got %r" % (params,))
    out = []
    for key, spec in params.items():
        _sim._path_key("params", key)
        if (isinstance(spec, (str, bytes)) or not hasattr(spec, "__len__")
                or len(spec) not in (2, 3) or (len(spec) == 3 and spec[2] != "log")
                or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                           and math.isfinite(v) for v in spec[:2])):
            raise _bad("params[%r]: expected (lo, hi) or (lo, hi, 'log') with numbers lo < hi, "
                       "got %r" % (key, spec))
        lo, hi = spec[0], spec[1]
        log = len(spec) == 3
        if not lo < hi:
            raise _bad("params[%r]: expected numbers lo < hi, got %r" % (key, spec))
        if log and lo <= 0:
            raise _bad("params[%r]: a log scale needs lo > 0, got %r" % (key, spec))
        integer = isinstance(lo, numbers.Integral) and isinstance(hi, numbers.Integral)
        out.append((key, lo, hi, log, integer))
    return out


def _goals(objectives, goals):
    if isinstance(objectives, str):
        objectives = [objectives]
    objectives = list(objectives)
    if not 1 <= len(objectives) <= 2 or not all(isinstance(m, str) and m for m in objectives):
        raise _bad("objectives: expected one or two metric names, e.g. ['ettr', 'cost'], got %r"
                   % (objectives,))
    if len(set(objectives)) != len(objectives):
        raise _bad("objectives: the same metric twice: %r" % (objectives,))
    if goals is None:
        return objectives, ["max" if m in _MAXIMIZED else "min" for m in objectives]
    if isinstance(goals, str):
        goals = [goals]
    goals = list(goals)
    if len(goals) != len(objectives) or any(g not in ("max", "min") for g in goals):
        raise _bad("goals: expected %d of 'max' or 'min' (one per objective %s), got %r"
                   % (len(objectives), ",".join(objectives), goals))
    return objectives, goals


def _number_text(v):
    return str(int(v)) if isinstance(v, numbers.Integral) else repr(float(v))


# ---- sim tune -----------------------------------------------------------------------------

def _cli_tune(scenario, ranges, objectives, goals, goals_given, points, rounds, budget,
              replicas, jobs, seed, sets, allow_unused, out):
    with _sim._Run(scenario, out) as run:
        args = ["sim", "tune", run.path, "--format", "json", "--quiet", "--out", run.out]
        for key, lo, hi, log, _ in ranges:
            args += ["--param", "%s=%s:%s%s" % (key, _number_text(lo), _number_text(hi),
                                                ":log" if log else "")]
        args += ["--objective", ",".join(objectives)]
        if goals_given:
            args += ["--goal", ",".join(goals)]
        args += (_sim._count("points", points, 3) + _sim._count("rounds", rounds, 0)
                 + _sim._count("budget", budget)
                 + _sim._common(replicas, jobs, seed, sets, allow_unused))
        data = json.loads(run.run(args))
        if run.dict_path and data.get("scenario") == run.dict_path:
            data["scenario"] = _sim.DICT_NAME
        return TuneResult(data)


# ---- an Optuna study ----------------------------------------------------------------------

def _check_study(study, objectives, goals):
    directions = getattr(study, "directions", None)
    if directions is None or not hasattr(study, "ask") or not hasattr(study, "tell"):
        raise _bad("study: expected an optuna Study (optuna.create_study(directions=[...])), "
                   "got %s" % type(study).__name__)
    names = [getattr(d, "name", str(d)).lower() for d in directions]
    want = ["maximize" if g == "max" else "minimize" for g in goals]
    if names != want:
        raise _bad("study: its directions (%s) do not match the objectives %s (%s): create "
                   "it with directions=%r" % (", ".join(names), ",".join(objectives),
                                              ",".join(goals), want))


def _suggest(trial, ranges):
    x = []
    for key, lo, hi, log, integer in ranges:
        if integer:
            x.append(int(trial.suggest_int(key, int(lo), int(hi), log=log)))
        else:
            x.append(float(trial.suggest_float(key, float(lo), float(hi), log=log)))
    return tuple(x)


def _per_replica(store, point, objectives):
    """Each objective's value on every replica, from the point's result.json (as sim tune
    reads it): a list per objective."""
    path = os.path.join(store, point["result"])
    with open(path, encoding="utf-8") as f:
        result = json.load(f)
    out = []
    for m in objectives:
        xs = (result.get("per_replica") or {}).get(m)
        if not isinstance(xs, list) or not all(isinstance(v, numbers.Real) for v in xs):
            raise InputError("objective %s: the point %s has no per-replica value of it (not a "
                             "metric sim tune reads, or infinite: a replica that trained "
                             "nothing, or costs of 0)" % (m, json.dumps(point["params"])),
                             exit_code=2)
        out.append([float(v) for v in xs])
    return out


def _evaluate(scenario, ranges, xs, objectives, store, replicas, jobs, seed, sets,
              allow_unused, progress):
    """Evaluates the points `xs` (tuples of parameter values) in one sim sweep (a zip axis)
    into `store`; returns {x: per_replica}."""
    keys = [r[0] for r in ranges]
    zip_ = {k: [x[i] for x in xs] for i, k in enumerate(keys)}
    s = _sim.sweep(scenario, zip=zip_, replicas=replicas, jobs=jobs, seed=seed, set=sets,
                   allow_unused=allow_unused, out=store, progress=progress)
    points = s.json["points"]
    if len(points) != len(xs):
        raise RuntimeError("tune: the sweep returned %d points for %d" % (len(points), len(xs)))
    return {x: _per_replica(store, p, objectives) for x, p in zip(xs, points)}


def _batch_size(study, batch):
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, numbers.Integral) or batch < 1:
            raise _bad("batch: expected an integer >= 1, got %r" % (batch,))
        return int(batch)
    # NSGA-II's generation: its population, asked at once, runs as one sweep.
    size = getattr(study.sampler, "_population_size", None)
    return int(size) if isinstance(size, numbers.Integral) and size > 0 else 1


def _objectives_json(per_replica, objectives):
    core = _sim._core()
    out = {}
    for m, xs in zip(objectives, per_replica):
        mean, lo, hi = core.mean_ci95(xs)
        out[m] = {"mean": mean, "ci95": [lo, hi]}
    return out


def _study_tune(scenario, ranges, objectives, goals, study, budget, batch, replicas, jobs,
                seed, sets, allow_unused, out, progress):
    _check_study(study, objectives, goals)
    if budget is None:
        raise _bad("budget: with a study, expected the number of trials to run (e.g. 60)")
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral) or budget < 1:
        raise _bad("budget: expected an integer >= 1 (trials), got %r" % (budget,))
    size = _batch_size(study, batch)
    tmp = tempfile.TemporaryDirectory(prefix="faultline-tune-") if out is None else None
    store = os.fsdecode(out) if out is not None else tmp.name
    try:
        known = {}  # one store for every trial: the same seeds; a point asked twice runs once
        done = 0
        while done < budget:
            trials = [study.ask() for _ in range(min(size, budget - done))]
            try:
                xs = [_suggest(t, ranges) for t in trials]
                new = sorted({x for x in xs if x not in known})
                if new:
                    known.update(_evaluate(scenario, ranges, new, objectives, store, replicas,
                                           jobs, seed, sets, allow_unused, progress))
            except BaseException:
                for t in trials:  # not left running in the study
                    study.tell(t, state=_failed())
                raise
            for t, x in zip(trials, xs):
                per = known[x]
                for m, vs in zip(objectives, per):
                    t.set_user_attr(ATTR_PREFIX + m, vs)
                study.tell(t, [sum(vs) / len(vs) for vs in per])
            done += len(trials)
        data = _study_json(scenario, ranges, objectives, goals, study, known, budget, size)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return TuneResult(data, study)


def _failed():
    from optuna.trial import TrialState
    return TrialState.FAIL


def _trial_values(trial, objectives, replicas_n):
    per = [trial.user_attrs.get(ATTR_PREFIX + m) for m in objectives]
    if any(not isinstance(v, list) or len(v) != replicas_n for v in per):
        raise _bad("study: trial %d was not evaluated by faultline.tune on these replicas (no "
                   "per-replica %s); use a fresh study" % (trial.number, ",".join(objectives)))
    return per


def _study_json(scenario, ranges, objectives, goals, study, known, budget, size):
    core = _sim._core()
    keys = [r[0] for r in ranges]

    def params_of(trial):
        return tuple(trial.params[k] for k in keys)

    def params_json(x):
        return {k: (int(v) if r[4] else float(v)) for k, v, r in zip(keys, x, ranges)}

    replicas_n = len(next(iter(known.values()))[0])
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    # Every distinct point, in the order of its first trial.
    first = {}
    for t in complete:
        first.setdefault(params_of(t), t)
    cands = sorted(first)  # by parameter values, as sim tune's candidates
    per = [_trial_values(first[x], objectives, replicas_n) for x in cands]
    maximize = [g == "max" for g in goals]
    front_x = []
    if len(objectives) == 2:
        # The study's Pareto front; of points with equal means on both objectives only the
        # first by parameter values (as sim tune), best first by the first objective.
        on = {params_of(t) for t in study.best_trials}
        idx = [i for i, x in enumerate(cands) if x in on]
        front = [idx[i] for i in core.pareto_front([per[i] for i in idx], maximize)]
        front_x = [cands[i] for i in front]
    else:
        best = study.best_trial
        front = [cands.index(params_of(best))]
    data = {"scenario": _sim.DICT_NAME if isinstance(scenario, Mapping)
            else os.fsdecode(scenario)}
    data["params"] = [{"key": k, "range": [lo, hi], "integer": integer,
                       "scale": "log" if log else "linear"}
                      for k, lo, hi, log, integer in ranges]
    data["objectives"] = [{"metric": m, "goal": g} for m, g in zip(objectives, goals)]
    data["replicas"] = replicas_n
    data["search"] = {"sampler": type(study.sampler).__name__, "trials": len(complete),
                      "budget": budget, "batch": size, "evaluations": len(cands)}
    if len(objectives) == 2:
        fr = []
        for i, fi in enumerate(front):
            same = [j for j, fj in enumerate(front)
                    if j != i and core.indistinguishable(per[fi], per[fj])]
            fr.append({"params": params_json(cands[fi]),
                       "objectives": _objectives_json(per[fi], objectives),
                       "indistinguishable_from": same, "trial": first[cands[fi]].number})
        data["front"] = fr
    else:
        b = front[0]
        data["best"] = {"params": params_json(cands[b]),
                        "objectives": _objectives_json(per[b], objectives),
                        "trial": first[cands[b]].number}
    rows = []
    for i, x in enumerate(cands):
        r = {"params": params_json(x), "trial": first[x].number,
             "objectives": _objectives_json(per[i], objectives)}
        if len(objectives) == 2:
            r["on_front"] = x in front_x
        else:
            b = front[0]
            d = [a - c for a, c in zip(per[i][0], per[b][0])]
            mean, lo, hi = core.mean_ci95(d)
            r["diff_vs_best"] = {"mean": mean, "ci95": [lo, hi]}
            r["indistinguishable_from_best"] = lo <= 0 <= hi
        rows.append(r)
    data["candidates"] = rows
    return data


# ---- the API ------------------------------------------------------------------------------

def tune(scenario, params, objectives=("ettr",), *, goals=None, study=None, budget=None,
         batch=None, points=None, rounds=None, replicas=None, jobs=None, seed=None, set=None,
         allow_unused=False, out=None, progress=False):
    """Tunes scenario fields for one or two objectives on common random numbers (every
    candidate on the same replicas and seeds, so candidates compare pairwise). Returns a
    :class:`TuneResult` (``t.front`` for two objectives, ``t.best`` for one, ``t.candidates``,
    ``t.table``).

    params: {path: (lo, hi) or (lo, hi, "log")}: the fields and their ranges, whole numbers
        when lo and hi are ints (``--param KEY=LO:HI[:log]``), e.g.
        {"policy.params.standby_pool": (0, 16),
         "policy.params.checkpoint_interval_s": (300, 4800, "log")}.
    objectives: one or two metrics of ``sim tune --objective`` (ettr, cost, ...); goals:
        "max" or "min" for each (default: max for ettr, productive_s, goodput_per_cost, min
        for the others).
    study: None: ``faultline sim tune`` searches (a coarse grid of `points` values per
        parameter, then `rounds` refinements around the front; `budget`: at most this many
        candidates). An Optuna study (``optuna.create_study(directions=["maximize",
        "minimize"], sampler=optuna.samplers.NSGAIISampler(seed=1))``, its directions those of
        the goals): its sampler proposes `budget` trials (required), `batch` at a time
        (default: the sampler's population size when it has one, else 1), each batch
        evaluated in one sweep; a point proposed twice is simulated once. Each trial is told
        the objectives' means; every replica's values are its user attributes
        ``faultline.<metric>``.
    replicas, jobs, seed, set, allow_unused: as in :func:`faultline.simulate`.
    out: keep the evaluated points there (``sim tune --out``, or the sweep store of the
        study's trials); a rerun with the same `out` and inputs reuses them.
    progress: with a study, passed to each batch's :func:`faultline.sweep` (default False).
    """
    ranges = _ranges(params)
    goals_given = goals is not None
    objectives, goals = _goals(objectives, goals)
    if study is None:
        if batch is not None:
            raise _bad("batch: only with a study")
        return _cli_tune(scenario, ranges, objectives, goals, goals_given, points, rounds,
                         budget, replicas, jobs, seed, set, allow_unused, out)
    if points is not None or rounds is not None:
        raise _bad("points, rounds: only without a study (the study's sampler chooses)")
    return _study_tune(scenario, ranges, objectives, goals, study, budget, batch, replicas,
                       jobs, seed, set, allow_unused, out, progress)
