#!/usr/bin/env python3
"""analysis/report.py draws stacks on a categorical axis (ctest: report.categorical_axes), and
shows a job of fixed work's time to train with its confidence intervals.

A sweep over policy.stack (or any non-numeric value) must show one point with a CI bar per
stack, never a line joining stacks, whose slope would mean nothing; a numeric axis keeps
its line and CI band. Drawn from a hand-written sweep.json, so no simulation runs.
Usage: report_axes_test.py PATH/TO/report.py
"""

import importlib.util
import json
import os
import sys
import tempfile
import unittest

REPORT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..",
                                                                  "analysis", "report.py")


def load_report():
    spec = importlib.util.spec_from_file_location("faultline_report", REPORT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import matplotlib
    matplotlib.use("Agg")
    return mod


class Keep:
    """A page that keeps the figures instead of encoding them."""

    def __init__(self):
        self.figs, self.captions = [], []

    def figure(self, fig, caption):
        self.figs.append(fig)
        self.captions.append(caption)

    def __getattr__(self, name):
        return lambda *a, **k: None


def write_sweep(d, key, values, ettr):
    points = []
    for v, e in zip(values, ettr):
        points.append({"id": str(v), "params": {key: v}, "policy": "x", "seed": 1, "replicas": 8,
                       "metrics": {"ettr": {"mean": e, "lo": e - 0.01, "hi": e + 0.01}},
                       "result": "points/%s/result.json" % v})
    with open(os.path.join(d, "sweep.json"), "w") as f:
        json.dump({"scenario": "s.json", "scenario_name": "s", "axes": [{"keys": [key], "values": [[v] for v in values]}],
                   "points": points}, f)


def joined(ax):
    """Lines on the axes that join two or more points."""
    return [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 1 and ln.get_linestyle() not in ("None", "", " ")]


class CategoricalAxes(unittest.TestCase):
    def setUp(self):
        self.report = load_report()
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        import matplotlib.pyplot as plt
        plt.close("all")
        self.tmp.cleanup()

    def draw(self, key, values, ettr):
        write_sweep(self.tmp.name, key, values, ettr)
        page = Keep()
        self.report.sweep_figures(page, self.report.Sweep(self.tmp.name))
        self.assertEqual(len(page.figs), 1)
        return page.figs[0].axes[0]

    def test_stacks_are_points_with_ci_bars_not_a_line(self):
        ax = self.draw("policy.stack", ["byterobust", "requeue", "reschedule"], [0.97, 0.917, 0.921])
        self.assertEqual(joined(ax), [], "a line joins the stacks")
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["byterobust", "requeue", "reschedule"])
        # One marker per stack (the caps of the CI bars aside), with a vertical CI bar each.
        markers = [ln for ln in ax.get_lines() if ln.get_marker() not in ("None", None, "", " ", "_", "|")]
        self.assertEqual(sum(len(ln.get_xdata()) for ln in markers), 3)
        self.assertTrue(ax.collections, "no CI bars")

    def test_a_numeric_axis_keeps_its_line(self):
        ax = self.draw("policy.params.checkpoint_interval_s", [1200, 2400, 3600], [0.74, 0.79, 0.77])
        self.assertEqual(len(joined(ax)), 1)


class TimeToTrainTable(unittest.TestCase):
    """The run headline's time-to-train table: every figure of result.json's time_to_train with
    its interval, a censored end as beyond the cap; nothing for a fixed window."""

    def test_every_quantile_with_its_interval(self):
        report = load_report()
        t = {"mean": 12.31, "ci95": [12.2, 12.42], "mean_ci95_bootstrap": [12.21, 12.41],
             "p50": 12.25, "p50_ci95": [12.0, 12.5], "p90": 13.25, "p90_ci95": [13.0, 13.5],
             "p99": None, "p99_ci95": [14.0, None], "finished": 190, "censored": 10,
             "work_days": 10, "bootstrap": {"method": "percentile", "resamples": 2000, "seed": 1}}
        run = report.Run(None, {"policy": "requeue", "time_to_train": t, "ettr": {}})
        html = report.time_to_train_table([run])
        for want in ("12.31 [12.20, 12.42]; [12.21, 12.41]", "12.25 [12.00, 12.50]",
                     "13.25 [13.00, 13.50]", "&gt; cap [14.00, &gt; cap]", "190 / 10",
                     "2000 resamples"):
            self.assertIn(want, html)
        self.assertEqual(report.time_to_train_table([report.Run(None, {"policy": "x"})]), "")


if __name__ == "__main__":
    unittest.main(verbosity=2)
