#!/usr/bin/env python3
"""A small study from Python: what does ByteRobust's every-step in-memory checkpoint buy over
Megatron-style periodic saves to remote storage, and how much does the remote save interval
matter? (docs/python.md)

1. compare: the scenario's stack (byterobust, checkpoint=peer) beside the same stack with
   checkpoint=remote, on the same fault histories (paired: replica i of both sees the same
   faults), so the ETTR difference has a tight confidence interval.
2. sweep: checkpoint=remote at several checkpoint intervals, every point on the same replicas
   and seeds (common random numbers), against the peer checkpoint's ETTR.
3. a figure of both, saved to the PNG given on the command line (matplotlib, Agg backend: no
   display needed).

Usage (build tree; installed, see docs/python.md for the path):

    PYTHONPATH=build/python python3 examples/study/compare_and_sweep.py study.png \\
        [--scenario scenarios/byterobust-dense-9600.json] [--replicas 40] [--jobs 2]

Everything comes from `import faultline`: the same code and numbers as `faultline sim compare`
and `faultline sim sweep` with the same seed (print the CLI line with --show-cli).
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
STACKS = ["byterobust", "byterobust+checkpoint=remote"]
INTERVALS_S = [300, 600, 1200, 1800, 3600, 7200]
REMOTE = {"policy.params.checkpoint": "remote"}


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("png", help="where to save the figure")
    p.add_argument("--scenario", default=DEFAULT_SCENARIO, help="scenario file (%(default)s)")
    p.add_argument("--replicas", type=int, default=40, help="replicas per stack and per sweep "
                   "point (default %(default)s; more gives tighter intervals)")
    p.add_argument("--jobs", type=int, default=2, help="replicas in parallel (forked)")
    p.add_argument("--show-cli", action="store_true", help="print the equivalent CLI lines")
    return p.parse_args(argv)


def run_compare(args):
    """The two stacks side by side: c.table has one row per stack, c.paired the per-replica
    ETTR differences to the baseline (the first stack)."""
    c = faultline.compare(args.scenario, STACKS, replicas=args.replicas, jobs=args.jobs)
    print(c.table[["ettr_mean", "ettr_lo", "ettr_hi", "diff_mean", "diff_lo", "diff_hi",
                   "checkpoint_s_mean", "recompute_s_mean"]].to_string(float_format="%.4g"))
    print()
    return c


def run_sweep(args):
    """checkpoint=remote at every interval: s.table has one row per point."""
    s = faultline.sweep(args.scenario, {"policy.params.checkpoint_interval_s": INTERVALS_S},
                        set=REMOTE, replicas=args.replicas, jobs=args.jobs)
    cols = ["policy.params.checkpoint_interval_s", "ettr_mean", "ettr_lo", "ettr_hi",
            "checkpoint_s_mean", "recompute_s_mean"]
    print(s.table[cols].to_string(index=False, float_format="%.4g"))
    print()
    return s


def plot_compare(ax, c):
    t = c.table
    err = [t.ettr_mean - t.ettr_lo, t.ettr_hi - t.ettr_mean]
    ax.bar(range(len(t)), t.ettr_mean, yerr=err, capsize=6, color=["tab:blue", "tab:orange"])
    ax.set_xticks(range(len(t)), [label.replace("+", "\n+") for label in t.index])
    low = t.ettr_lo.min()
    ax.set_ylim(low - 0.3 * (1 - low), 1.0)
    ax.set_ylabel("ETTR (mean, 95% CI)")
    other = t.index[1]
    ax.set_title("paired difference %+.4f [%+.4f, %+.4f]"
                 % (t.diff_mean[other], t.diff_lo[other], t.diff_hi[other]), fontsize=9)


def plot_sweep(ax, s, c):
    t = s.table
    x = t["policy.params.checkpoint_interval_s"] / 60
    ax.plot(x, t.ettr_mean, "o-", color="tab:orange", label="checkpoint=remote")
    ax.fill_between(x, t.ettr_lo, t.ettr_hi, color="tab:orange", alpha=0.25)
    peer = c.table.loc[STACKS[0]]
    ax.axhline(peer.ettr_mean, color="tab:blue", label="checkpoint=peer (every step)")
    ax.axhspan(peer.ettr_lo, peer.ettr_hi, color="tab:blue", alpha=0.15)
    ax.set_xscale("log")
    ax.set_xticks(x, ["%g" % v for v in x])
    ax.set_xlabel("remote checkpoint interval (min)")
    ax.set_ylabel("ETTR (mean, 95% CI)")
    ax.legend(fontsize=8)


def main(argv=None):
    args = parse_args(argv)
    if args.show_cli:
        print("faultline sim compare %s --stacks %s --replicas %d --jobs %d" % (
            args.scenario, ",".join(STACKS), args.replicas, args.jobs))
        print("faultline sim sweep %s --set policy.params.checkpoint=remote --grid "
              "policy.params.checkpoint_interval_s=%s --replicas %d --jobs %d\n" % (
                  args.scenario, ",".join(map(str, INTERVALS_S)), args.replicas, args.jobs))
    c = run_compare(args)
    s = run_sweep(args)
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2), width_ratios=[1, 1.6])
    plot_compare(left, c)
    plot_sweep(right, s, c)
    fig.suptitle("%s, %d replicas" % (c.scenario, args.replicas))
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print("figure: %s" % args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
