#!/usr/bin/env python3
"""A tuning study from Python: how many warm standbys, and which checkpoint interval, for the
dense job when a GPU-hour and an idle standby machine have a price? (docs/python.md,
docs/what-if-studies.md)

1. faultline.tune searches standbys (0..16) x the in-memory checkpoint interval (30..4800 s,
   log scale) for two objectives, ETTR (max) and cost (min), every candidate on the same
   replicas and seeds (common random numbers): `sim tune`'s search by default, or with
   --optuna an Optuna study whose NSGA-II sampler proposes the points (python3-optuna).
2. it prints the Pareto front: each point's parameters, both objectives' means and 95% CIs,
   and the front points it is statistically indistinguishable from.
3. a figure, saved to the PNG given on the command line (matplotlib, Agg backend: no display
   needed): every candidate, cost against ETTR, the front with its CIs and parameters.

Usage (build tree; installed, see docs/python.md for the path):

    PYTHONPATH=build/python python3 examples/study/tune_standbys.py tune.png \\
        [--scenario scenarios/byterobust-dense-9600.json] [--replicas 12] [--days 30] \\
        [--jobs 2] [--optuna --trials 100]

Everything comes from `import faultline` (and optuna with --optuna); without --optuna the
numbers are `faultline sim tune`'s with the same seed (print the CLI line with --show-cli).
"""

import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

import faultline  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SCENARIO = os.path.normpath(os.path.join(HERE, "..", "..", "scenarios",
                                                 "byterobust-dense-9600.json"))
STANDBY = "policy.params.standby_pool"
INTERVAL = "policy.params.checkpoint_interval_s"
PARAMS = {STANDBY: (0, 16), INTERVAL: (30, 4800, "log")}
# The dense job's own checkpoint is every step to memory: the interval is the memory module's.
# Prices in one currency unit: a GPU-hour, and an hour of an idle standby machine.
SETS = {"policy.params.checkpoint": "memory", "costs.gpu_hour": 2,
        "costs.spare_machine_hour": 16}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("png", help="where to save the figure")
    p.add_argument("--scenario", default=DEFAULT_SCENARIO, help="scenario file (%(default)s)")
    p.add_argument("--replicas", type=int, default=12, help="replicas per candidate (default "
                   "%(default)s; more gives tighter intervals)")
    p.add_argument("--days", type=int, default=30, help="job.horizon_days (default %(default)s; "
                   "the scenario's own is 90)")
    p.add_argument("--jobs", type=int, default=2, help="replicas in parallel (forked)")
    p.add_argument("--points", type=int, default=5, help="sim tune: values per parameter in "
                   "the coarse grid (default %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="sim tune: refinement rounds "
                   "(default %(default)s)")
    p.add_argument("--optuna", action="store_true", help="an Optuna study (NSGA-II, seed 1) "
                   "proposes the points instead of sim tune's search")
    p.add_argument("--trials", type=int, default=100, help="--optuna: trials (default "
                   "%(default)s)")
    p.add_argument("--show-cli", action="store_true", help="print the equivalent CLI line")
    return p.parse_args(argv)


def run_tune(args):
    sets = dict(SETS, **{"job.horizon_days": args.days})
    common = dict(set=sets, replicas=args.replicas, jobs=args.jobs)
    if not args.optuna:
        return faultline.tune(args.scenario, PARAMS, ["ettr", "cost"], points=args.points,
                              rounds=args.rounds, **common)
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(directions=["maximize", "minimize"],
                                sampler=optuna.samplers.NSGAIISampler(population_size=10,
                                                                      seed=1))
    # A sampler seldom proposes the ends of a range, where the cheapest point (no standby)
    # and this job's best interval lie: the four corners go first.
    for k in PARAMS[STANDBY][:2]:
        for s in PARAMS[INTERVAL][:2]:
            study.enqueue_trial({STANDBY: k, INTERVAL: s})
    return faultline.tune(args.scenario, PARAMS, ["ettr", "cost"], study=study,
                          budget=args.trials, **common)


def print_front(t):
    print("%d candidates, %d replicas each; Pareto front (best ETTR first):"
          % (len(t.candidates), t.replicas))
    print("  #  standbys  interval_s   ETTR %  [95% CI]            cost (M)  [95% CI]       ~")
    for i, f in enumerate(t.front):
        e, c = f.objectives.ettr, f.objectives.cost
        print("%3d  %8d  %10.0f  %7.3f  [%7.3f, %7.3f]  %8.4f  [%.4f, %.4f]  %s" % (
            i + 1, f.params[STANDBY], f.params[INTERVAL], 100 * e.mean, 100 * e.ci95[0],
            100 * e.ci95[1], c.mean / 1e6, c.ci95[0] / 1e6, c.ci95[1] / 1e6,
            " ".join(str(j + 1) for j in f.indistinguishable_from)))
    print()


def plot(ax, t):
    tab = t.table
    ax.scatter(tab.cost_mean / 1e6, 100 * tab.ettr_mean, s=12, color="tab:gray", alpha=0.6,
               label="candidates (%d)" % len(tab))
    front = sorted(t.front, key=lambda f: f.objectives.cost.mean)
    x = [f.objectives.cost.mean / 1e6 for f in front]
    y = [100 * f.objectives.ettr.mean for f in front]
    err = [[100 * (f.objectives.ettr.mean - f.objectives.ettr.ci95[0]) for f in front],
           [100 * (f.objectives.ettr.ci95[1] - f.objectives.ettr.mean) for f in front]]
    ax.errorbar(x, y, yerr=err, fmt="o-", color="tab:red", capsize=4, drawstyle="steps-post",
                label="Pareto front (ETTR 95% CI)")
    for i, (f, xi, yi) in enumerate(zip(front, x, y)):  # labels above and below in turn
        ax.annotate("%d standbys, %.0f s" % (f.params[STANDBY], f.params[INTERVAL]), (xi, yi),
                    textcoords="offset points", xytext=(6, 10 if i % 2 else -16), fontsize=8)
    # Zoomed on the front: candidates far below it (long intervals) are left out of the frame.
    lo = min(100 * f.objectives.ettr.ci95[0] for f in front)
    hi = max(100 * f.objectives.ettr.ci95[1] for f in front)
    span = max(hi - lo, 0.1)
    ax.set_ylim(lo - span, hi + 0.4 * span)
    below = int((100 * tab.ettr_mean < lo - span).sum())
    ax.scatter([], [], s=0, label="%d candidates below the frame" % below)
    ax.set_xlabel("cost per replica (millions of currency units)")
    ax.set_ylabel("ETTR % (mean, 95% CI)")
    ax.legend(fontsize=8, loc="lower right")


def main(argv=None):
    args = parse_args(argv)
    if args.show_cli and not args.optuna:
        print("faultline sim tune %s --jobs %d --replicas %d --set job.horizon_days=%d %s "
              "--param %s=0:16 --param %s=30:4800:log --objective ettr,cost --points %d "
              "--rounds %d\n" % (
                  args.scenario, args.jobs, args.replicas, args.days,
                  " ".join("--set %s=%s" % kv for kv in SETS.items()), STANDBY, INTERVAL,
                  args.points, args.rounds))
    t = run_tune(args)
    print_front(t)
    fig, ax = plt.subplots(figsize=(8, 4.8))
    plot(ax, t)
    how = ("Optuna NSGA-II, %d trials" % args.trials if args.optuna
           else "sim tune, %d points, %d rounds" % (args.points, args.rounds))
    ax.set_title("%s: standbys x checkpoint interval, %d days, %d replicas (%s)" % (
        os.path.basename(str(t.scenario)), args.days, t.replicas, how), fontsize=9)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print("figure: %s" % args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
