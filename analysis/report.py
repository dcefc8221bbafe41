#!/usr/bin/env python3
"""faultline report: one self-contained HTML page of figures from result directories.

Run by `faultline report DIR... -o report.html` (cli/report_cmd.cc). Each DIR is
recognised by its files:
  run      `sim run --out`: result.json (timeline.csv, incidents.csv, decisions.log when
           asked for; replicas.csv)
  compare  `sim compare --out`: compare.json and one sub-directory per stack (result.json,
           replicas.csv)
  sweep    `sim sweep --out`: sweep.json and points/*/result.json
  tune     `sim tune --out`: tune.json (and the points it evaluated)
  live     a live run's state directory (`faultline live run`): events.jsonl, the event log
           (its "account" records give lost time by phase), and journal.json (machine names)
Figures are drawn with matplotlib (Debian: python3-matplotlib) and embedded as base64 PNG,
at a size the page shows without scaling them down (text stays at least 11 pt).

FAULTLINE_REPORT_DEBUG=1 shows the Python traceback behind a "cannot draw" error.

Exit codes: 0 written, 1 failure (missing matplotlib, unreadable input), 2 bad arguments
(a directory of none of the kinds above, an events.jsonl that is not an event log).
"""

import argparse
import html
import os
import sys

# The concerns live in reporting/ next to this file (in the checkout, the build's bin/ and
# the install), found through this file's own folder whatever the working directory; no
# __pycache__ is left beside them.
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))

from reporting.inputs import (Compare, Group, InputError, Live, Run, Sweep, Tune,  # noqa: E402,F401
                              detect, pair_replays)
from reporting.live_figures import live_headline, live_phase_table, live_section  # noqa: E402
from reporting.page import STYLE, Page  # noqa: E402
from reporting.sim_figures import (breakdown_figure, group_figures, headline_sentence,  # noqa: E402,F401
                                   headline_table, incident_figure, overlay_figure, phase_table,
                                   shares_figure, time_to_train_table, timeline_figure)
from reporting.study_figures import sweep_figures, sweep_headline, tune_figure, tune_headline  # noqa: E402,F401


def fail(msg, code=1):
    print("faultline report: " + msg, file=sys.stderr)
    sys.exit(code)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="HTML file to write")
    ap.add_argument("--replica", type=int, default=0, help="replica for timelines and incidents")
    ap.add_argument("--title", default="", help="page title")
    ap.add_argument("--png-dir", default="", help="also write every figure as a PNG into this directory")
    ap.add_argument("dirs", nargs="+")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import numpy  # noqa: F401
    except ImportError as e:
        fail("needs matplotlib and numpy (Debian: apt-get install python3-matplotlib): %s" % e)
    plt.rcParams.update(STYLE)

    runs, compares, sweeps, tunes, lives = [], [], [], [], []
    try:
        for d in args.dirs:
            if not os.path.isdir(d):
                raise InputError("%s: not a directory" % d, 2)
            kind = detect(d)
            if kind is None:
                raise InputError("%s: not a result directory: expected result.json (sim run --out), compare.json "
                                 "(sim compare --out), sweep.json (sim sweep --out), tune.json (sim tune --out) or "
                                 "events.jsonl (a live state directory)" % d, 2)
            try:
                if kind == "run":
                    runs.append(Run.load(d))
                elif kind == "compare":
                    compares.append(Compare(d))
                elif kind == "sweep":
                    sweeps.append(Sweep(d))
                elif kind == "live":
                    lives.append(Live(d))
                else:
                    tunes.append(Tune(d))
            except (KeyError, TypeError, AttributeError) as e:
                raise InputError("%s: %s directory with an unexpected layout (%s: %s)"
                                 % (d, kind, type(e).__name__, e))
        if len({r.result.get("scenario") for r in runs}) > 1:
            for r in runs:
                r.label = "%s · %s" % (r.label, r.result.get("scenario", "?"))
        labels = [r.label for r in runs]
        for r in runs:
            if labels.count(r.label) > 1:
                r.label += " [%s]" % os.path.basename(os.path.normpath(r.path))
        # A replay set beside its live run is drawn there, not again as a run of its own.
        paired = pair_replays(lives, runs)
        runs = [r for r in runs if r not in paired]
        page = build_page(args, runs, compares, sweeps, tunes, lives)
    except InputError as e:
        fail(str(e), e.code)
    except (KeyError, TypeError, ValueError, IndexError, OSError) as e:
        if os.environ.get("FAULTLINE_REPORT_DEBUG"):
            raise
        fail("cannot draw the report from %s: %s: %s" % (", ".join(args.dirs), type(e).__name__, e))
    try:
        with open(args.out, "w") as f:
            f.write(page.html())
    except OSError as e:
        fail("%s: %s" % (args.out, e.strerror or e))
    print("wrote %s (%d figures)" % (args.out, page.count), file=sys.stderr)
    return 0


def build_page(args, runs, compares, sweeps, tunes, lives=()):
    names = ([lv.name for lv in lives] + [c.name for c in compares]
             + ["%s (%s)" % (r.label, os.path.basename(os.path.normpath(r.path))) for r in runs]
             + [s.name for s in sweeps] + [t.name for t in tunes])
    title = args.title or "faultline report: " + ", ".join(names)
    page = Page(title, args.png_dir or None)
    kinds = []
    replays = {os.path.normpath(lv.replay.path) for lv in lives if lv.replay}
    for d in args.dirs:
        kind = "sim replay, set beside its live run" if os.path.normpath(d) in replays else detect(d)
        kinds.append("<code>%s</code> (%s)" % (html.escape(d), kind))
    page.p("Generated by <code>faultline report</code> from %s." % ", ".join(kinds))
    run_group = None
    if len(runs) > 1:
        run_group = Group("the run directories", runs, runs[0], "each run directory's result.json",
                          "each run directory's result.json and replicas.csv")

    # What a reader sees first: the headline numbers of everything given.
    page.h2("Headline numbers", "headline")
    for lv in lives:
        page.h3("Live run: %s%s" % (lv.name, ", with its replay in the simulator" if lv.replay else ""))
        live_headline(page, lv)
        live_phase_table(page, lv)
    for c in compares:
        page.h3("Stacks compared: %s (%s replicas each, paired)" % (c.name, c.doc.get("replicas", "?")))
        page.p(headline_sentence(c.group))
        page.raw(headline_table(c.group))
        page.raw(time_to_train_table(c.group.runs))
    if runs:
        if run_group:
            page.h3("Run directories")
            page.p(headline_sentence(run_group))
            page.raw(headline_table(run_group))
            page.raw(time_to_train_table(runs))
            if any(r is not runs[0] and r.diff is None for r in runs):
                page.p('<span class="note">Paired differences need the same scenario, seed and replicas as the '
                       'first directory (%s); the others are compared unpaired only.</span>'
                       % html.escape(runs[0].label))
        else:
            r0 = runs[0]
            page.h3("Run: %s on %s (%s)" % (r0.label, r0.result.get("scenario", "?"),
                                            os.path.basename(os.path.normpath(r0.path))))
            page.raw(headline_table(Group(r0.label, runs, r0, "", ""), with_diff=False))
            page.raw(time_to_train_table(runs))
            page.raw(phase_table(r0))
    for s in sweeps:
        page.h3("Sweep: %s (%d points)" % (s.name, len(s.points)))
        page.raw(sweep_headline(s))
    for t in tunes:
        page.h3("Tuning: " + t.name)
        page.raw(tune_headline(t))

    for lv in lives:
        live_section(page, lv)
    for c in compares:
        page.h2("Stacks compared: " + c.name, "compare")
        group_figures(page, c.group)
    if run_group:
        page.h2("Run directories side by side", "runs")
        group_figures(page, run_group)
    overlay = []
    for r in runs:
        page.h2("Run: %s (%s)" % (r.label, os.path.basename(os.path.normpath(r.path))))
        ov = timeline_figure(page, r, args.replica)
        if ov:
            overlay.append(ov)
        if not run_group:
            breakdown_figure(page, [r], "Unproductive time per replica by phase — %s" % r.label,
                             "Mean unproductive time per replica of %s, split into the simulator's phases "
                             "(result.json breakdown_s); the label above the bar is the mean ETTR." % r.label)
        incident_figure(page, r, args.replica)
        shares_figure(page, r)
    if len(overlay) > 1:
        page.h2("ETTR over time, run directories together")
        overlay_figure(page, overlay)
    for s in sweeps:
        page.h2("Sweep: " + s.name, "sweep")
        sweep_figures(page, s)
        pr = s.point_runs()
        if 0 < len(pr) <= 40:
            breakdown_figure(page, pr, "Unproductive time per replica by phase, per sweep point",
                             "Mean unproductive time per replica at each point of sweep %s, split by phase "
                             "(points/*/result.json)." % s.name)
    for t in tunes:
        page.h2("Tuning: " + t.name, "tune")
        tune_figure(page, t)
    return page


if __name__ == "__main__":
    sys.exit(main())
