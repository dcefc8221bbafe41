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
import base64
import csv
import html
import io
import json
import math
import os
import re
import sys

BUCKETS = ["detection", "diagnosis", "failover", "restore", "recompute", "checkpoint", "degraded", "warmup",
           "waiting_for_machines", "missing_replicas"]
BUCKET_COLORS = {
    "detection": "#d62728", "diagnosis": "#9467bd", "failover": "#ff7f0e", "restore": "#8c564b",
    "recompute": "#e377c2", "checkpoint": "#1f77b4", "degraded": "#bcbd22",
    "warmup": "#17becf", "waiting_for_machines": "#7f7f7f", "missing_replicas": "#2ca02c",
}
BUCKET_HELP = {
    "detection": "job broken, not yet acted on",
    "diagnosis": "stopped, diagnosing",
    "failover": "scheduling, image pull, init",
    "restore": "loading the checkpoint",
    "recompute": "work lost since the last checkpoint",
    "checkpoint": "blocking checkpoint saves",
    "degraded": "running slower than full speed",
    "warmup": "after a restart, before full speed",
    "waiting_for_machines": "no healthy machine free in a finite fleet",
    "missing_replicas": "training without dropped replicas, quorum changes",
}

# Figures are saved at DPI dots per inch and shown 1:1 by the page (whose content column is
# PAGE_PX wide), so a point of font is DPI/72 CSS pixels: 11 pt is about 15 px.
DPI = 100
PAGE_PX = 1240
FIG_W = 10.5  # inches: 1050 px, with room for tight bounding boxes
# text.parse_math off: labels carry text from the run (a crash message, a machine name), and
# matplotlib would read "$...$" in it as TeX and fail on what is not.
STYLE = {"font.size": 12, "axes.titlesize": 13, "axes.labelsize": 12, "xtick.labelsize": 11,
         "ytick.labelsize": 11, "legend.fontsize": 11, "legend.title_fontsize": 11, "figure.titlesize": 14,
         "text.parse_math": False}
SMALL = 11  # the smallest font size any figure uses (annotations, dense tick labels)


class InputError(Exception):
    """A directory or file that is not what the report expects (exit 2 for a wrong kind)."""

    def __init__(self, msg, code=1):
        super().__init__(msg)
        self.code = code


def fail(msg, code=1):
    print("faultline report: " + msg, file=sys.stderr)
    sys.exit(code)


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deep to read
        raise InputError("%s: not valid JSON (%s)" % (path, e))
    except OSError as e:
        raise InputError("%s: %s" % (path, e.strerror or e))


def unit_label(key):
    """Axis label with its unit, from the naming convention of scenario fields."""
    leaf = key.split(".")[-1]
    units = [("_per_machine_day", "per machine-day"), ("_per_job_day", "per job-day"), ("_days", "days"),
             ("_s", "s"), ("_h", "h"), ("_ms", "ms"), ("_us", "µs"), ("_gbps", "Gb/s"), ("_bytes", "bytes"),
             ("machines", "machines"), ("replicas", "replicas")]
    for suffix, unit in units:
        if leaf.endswith(suffix):
            return "%s (%s)" % (key, unit)
    return key


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
# upper bound: policies/recovery/baselines.h; tests/sim/bounds_test.cc checks that no stack or module
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


class Page:
    def __init__(self, title, png_dir=None):
        self.title = title
        self.parts = []
        self.png_dir = png_dir
        self.count = 0

    def h2(self, text, anchor=None):
        self.parts.append('<h2%s>%s</h2>' % (' id="%s"' % anchor if anchor else "", html.escape(text)))

    def h3(self, text):
        self.parts.append("<h3>%s</h3>" % html.escape(text))

    def p(self, text):
        self.parts.append("<p>%s</p>" % text)

    def raw(self, text):
        self.parts.append(text)

    def figure(self, fig, caption):
        import matplotlib.pyplot as plt
        titles = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) else []
        titles += [ax.get_title() for ax in fig.axes if ax.get_title()]
        # Shown 1:1, so never wider than the page: a figure whose labels or legend push it
        # past PAGE_PX gets a narrower plot area (the text keeps its size).
        for _ in range(4):
            buf = io.BytesIO()
            fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
            data = buf.getvalue()
            width = int.from_bytes(data[16:20], "big")  # PNG IHDR
            if width <= PAGE_PX:
                break
            w, h = fig.get_size_inches()
            fig.set_size_inches(max(2.0, w - (width - PAGE_PX + 8) / DPI), h)
        plt.close(fig)
        self.count += 1
        if self.png_dir:
            os.makedirs(self.png_dir, exist_ok=True)
            with open(os.path.join(self.png_dir, "figure-%02d.png" % self.count), "wb") as f:
                f.write(data)
        self.parts.append('<figure id="fig-%d"><img alt="%s" src="data:image/png;base64,%s">'
                          '<figcaption><b>Figure %d.</b> %s</figcaption></figure>'
                          % (self.count, html.escape(" | ".join(titles) or caption, quote=True),
                             base64.b64encode(data).decode("ascii"), self.count, html.escape(caption)))

    def html(self):
        style = ("body{font-family:'DejaVu Sans',Helvetica,Arial,sans-serif;font-size:16px;line-height:1.45;"
                 "max-width:%dpx;margin:1.5em auto;padding:0 12px;color:#222}"
                 "h1{font-size:26px}h2{font-size:21px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:2em}"
                 "h3{font-size:18px}"
                 "figure{margin:1.2em 0 2em 0}img{display:block;max-width:100%%;height:auto}"
                 "figcaption{color:#444;font-size:15px;max-width:1000px;margin-top:6px}"
                 "table{border-collapse:collapse;font-size:15px;margin:0.6em 0}"
                 "td,th{border:1px solid #ccc;padding:4px 10px;text-align:right;white-space:nowrap}th{white-space:normal}"
                 "th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}"
                 ".better{color:#1a7f37}.worse{color:#c62828}.note{color:#555;font-size:15px}"
                 "td.text,th.text{text-align:left;white-space:normal;vertical-align:top}"
                 "td.acts{text-align:left;vertical-align:top;font-size:14px}"
                 "code{font-size:14px}" % (PAGE_PX + 24))
        # Checked by the headless-browser test: every figure decoded, none shown smaller than
        # it was drawn (so text stays legible at 100% zoom), no script error.
        script = ("<script>window.addEventListener('error',function(){var b=document.body;"
                  "b.setAttribute('data-script-errors',String(+(b.getAttribute('data-script-errors')||0)+1));});"
                  "window.addEventListener('load',function(){var b=document.body,imgs=document.querySelectorAll("
                  "'figure img'),ok=0,bad=0,min=1;for(var i=0;i<imgs.length;i++){var m=imgs[i];"
                  "if(m.complete&&m.naturalWidth>0){ok++;min=Math.min(min,m.clientWidth/m.naturalWidth);}"
                  "else bad++;}b.setAttribute('data-figures',String(imgs.length));"
                  "b.setAttribute('data-figures-decoded',String(ok));b.setAttribute('data-figures-broken',"
                  "String(bad));b.setAttribute('data-min-scale',min.toFixed(3));});</script>")
        return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style>"
                "%s</head><body><h1>%s</h1>\n%s\n</body></html>\n"
                % (html.escape(self.title), style, script, html.escape(self.title), "\n".join(self.parts)))


def stack_colors(labels):
    import matplotlib.pyplot as plt
    cmap = plt.get_cmap("tab10")
    return {lab: cmap(i % 10) for i, lab in enumerate(labels)}


def pct(x, digits=2):
    return "%.*f%%" % (digits, 100 * x)


def pp(x, digits=2):
    return "%+.*f" % (digits, 100 * x)


def unproductive_h(run):
    bd = run.result.get("breakdown_s", {})
    return sum(float(bd.get(b, 0)) for b in BUCKETS) / 3600.0


def named(run):
    """A run's label, saying when it is a bound (the upper bound, ...)."""
    return html.escape(run.label) + (" (%s)" % run.bound[0] if run.bound else "")


def headline_table(group, with_diff=True):
    base = group.baseline
    head = ("<table><tr><th>stack</th><th>replicas</th><th>ETTR mean [95%% CI]</th>%s"
            "<th>unproductive h / replica</th><th>incidents / replica</th><th>GPU-hours lost / replica</th></tr>"
            % ("<th>paired difference vs %s, pp [95%% CI]</th><th>replicas won / tied / lost</th>"
               % named(base) if with_diff else ""))
    rows = [head]
    for r in group.runs:
        e = r.result["ettr"]
        cells = ["%s%s" % (named(r), " (baseline)" if with_diff and r is base else ""),
                 "%d" % r.result.get("replicas", 0),
                 "%s [%s, %s]" % (pct(e["mean"]), pct(e["ci95"][0]), pct(e["ci95"][1]))]
        if with_diff:
            d = getattr(r, "diff", None)
            if r is base:
                cells += ["—", "—"]
            elif d:
                lo, hi = d["ci95"]
                cls = "better" if lo > 0 else ("worse" if hi < 0 else "")
                cells += ['<span class="%s">%s [%s, %s]</span>' % (cls, pp(d["mean"]), pp(lo), pp(hi)),
                          "%.0f%% / %.0f%% / %.0f%%" % (100 * d["wins"], 100 * d["ties"], 100 * d["losses"])]
            else:
                cells += ["not paired", "—"]
        cells += ["%.1f" % unproductive_h(r), "%.1f" % r.result.get("incidents", {}).get("per_replica", 0),
                  "%.0f" % r.result.get("gpu_hours_lost_per_replica", 0)]
        rows.append("<tr>%s</tr>" % "".join("<td>%s</td>" % c for c in cells))
    rows.append("</table>")
    return "\n".join(rows)


def time_to_train_table(runs):
    """A job of fixed work: each run's time to train in days, the mean with its Student t and
    bootstrap 95% CIs and p50/p90/p99 with their bootstrap CIs (result.json time_to_train; an
    end a censored replica reaches is beyond the cap). Empty when no run has one."""
    have = [r for r in runs if isinstance(r.result.get("time_to_train"), dict)]
    if not have:
        return ""

    def days(x):
        return "&gt; cap" if x is None else "%.2f" % float(x)

    def ci(t, key):
        v = t.get(key)
        return " [%s, %s]" % (days(v[0]), days(v[1])) if isinstance(v, list) and len(v) == 2 else ""

    rows = ["<table><tr><th>stack</th><th>finished / censored</th><th>mean, days [95% CI; bootstrap]</th>"
            "<th>p50 [95% CI]</th><th>p90 [95% CI]</th><th>p99 [95% CI]</th></tr>"]
    for r in have:
        t = r.result["time_to_train"]
        mean = "none finished" if t.get("mean") is None else "%s%s%s" % (
            days(t["mean"]), ci(t, "ci95"), ci(t, "mean_ci95_bootstrap").replace(" [", "; [", 1))
        cells = [named(r), "%s / %s" % (t.get("finished", "?"), t.get("censored", "?")), mean]
        cells += ["%s%s" % (days(t.get(q)), ci(t, q + "_ci95")) for q in ("p50", "p90", "p99")]
        rows.append("<tr>%s</tr>" % "".join("<td>%s</td>" % c for c in cells))
    rows.append("</table>")
    boot = have[0].result["time_to_train"].get("bootstrap") or {}
    rows.append('<p class="note">Time to train of %s days of work. Quantiles over every replica (a censored '
                'one counts as longer than any); their CIs are percentile bootstrap intervals over replicas '
                '(%s resamples, seeded by the scenario seed); the mean is over the replicas that finished.</p>'
                % (days(have[0].result["time_to_train"].get("work_days")), boot.get("resamples", "?")))
    return "\n".join(rows)


def phase_table(run):
    """Where the unproductive time of one run goes: hours per replica by phase, with CIs."""
    bd, ci = run.result.get("breakdown_s", {}), run.result.get("breakdown_ci95_s", {})
    share = run.result.get("breakdown_share", {})  # of each run's own length (a job of fixed work)
    horizon_h = run.horizon_days * 24.0
    rows = ["<table><tr><th>phase</th><th>hours / replica [95% CI]</th><th>share of the job</th></tr>"]
    for b in sorted(BUCKETS, key=lambda b: -float(bd.get(b, 0))):
        v = float(bd.get(b, 0)) / 3600.0
        if v <= 0:
            continue
        lohi = ci.get(b)
        rows.append("<tr><td>%s (%s)</td><td>%.1f%s</td><td>%.2f%%</td></tr>"
                    % (b, html.escape(BUCKET_HELP[b]), v,
                       " [%.1f, %.1f]" % (lohi[0] / 3600.0, lohi[1] / 3600.0) if isinstance(lohi, list) else "",
                       100 * float(share[b]) if b in share else (100 * v / horizon_h if horizon_h > 0 else 0)))
    rows.append("</table>")
    return "\n".join(rows)


def headline_sentence(group):
    """The highest mean ETTR among the policies (a bound is not one: it is what they are compared
    with), against the baseline, and each bound's own figure with the gap the best policy leaves."""
    base = group.baseline
    policies = [r for r in group.runs if not r.bound]
    text = ""
    best = max(policies, key=lambda r: r.result["ettr"]["mean"]) if policies else None
    if best:
        e = best.result["ettr"]
        text = "Highest mean ETTR of a policy: <b>%s</b>, %s (95%% CI %s .. %s)" % (
            html.escape(best.label), pct(e["mean"]), pct(e["ci95"][0]), pct(e["ci95"][1]))
        d = getattr(best, "diff", None)
        if best is not base and d:
            sig = d["ci95"][0] > 0 or d["ci95"][1] < 0
            text += ", %s pp against %s (paired 95%% CI %s .. %s: %s)" % (
                pp(d["mean"]), named(base), pp(d["ci95"][0]), pp(d["ci95"][1]),
                "significant" if sig else "not significant")
        elif best is base and len(policies) > 1:
            text += "; it is the baseline"
        text += "."
    for b in (r for r in group.runs if r.bound):
        e = b.result["ettr"]
        text += " <b>%s</b>, %s (%s; a reference, not a policy): %s (95%% CI %s .. %s)" % (
            html.escape(b.label), b.bound[0], html.escape(b.bound[1]), pct(e["mean"]), pct(e["ci95"][0]),
            pct(e["ci95"][1]))
        if best:
            text += ", %s pp above the best policy" % pp(e["mean"] - best.result["ettr"]["mean"]).lstrip("+")
        text += "."
    return text.strip()


def ettr_cdf_figure(page, group, colors):
    import matplotlib.pyplot as plt
    import numpy as np
    have = [r for r in group.runs if r.replica_ettr()]
    if not have:
        page.p('<span class="note">No ETTR distribution: no replicas.csv under %s.</span>'
               % html.escape(group.name))
        return
    fig, ax = plt.subplots(figsize=(FIG_W, 5))
    for r in have:
        x = np.sort(np.array(list(r.replica_ettr().values()))) * 100
        y = np.arange(1, len(x) + 1) / len(x)
        ax.step(np.concatenate([[x[0]], x]), np.concatenate([[0], y]), where="post", lw=2, color=colors[r.label],
                label="%s (%d replicas, mean %.2f%%)" % (r.label, len(x), x.mean()))
    ax.set_xlabel("ETTR of a replica (%)")
    ax.set_ylabel("fraction of replicas with ETTR ≤ x")
    ax.set_ylim(0, 1.02)
    ax.set_title("ETTR distribution over replicas, per stack (empirical CDF)")
    ax.grid(alpha=0.3)
    ax.legend(loc="best")
    page.figure(fig, "Empirical CDF of the ETTR of each replica, one curve per stack, from %s. A curve further right "
                     "is better; the spread of a curve is the replica-to-replica variation of the same job under "
                     "different fault histories." % group.files)


def paired_diff_figure(page, group, colors):
    import matplotlib.pyplot as plt
    rows = [r for r in group.runs if r is not group.baseline and getattr(r, "diff", None)]
    unpaired = [r for r in group.runs if r is not group.baseline and not getattr(r, "diff", None)]
    if not rows:
        if unpaired:
            page.p('<span class="note">No paired differences: %s did not run the same scenario and seed as %s.'
                   '</span>' % (", ".join(html.escape(r.label) for r in unpaired), html.escape(group.baseline.label)))
        return
    n = len(rows)
    fig, ax = plt.subplots(figsize=(FIG_W, 1.6 + 0.75 * n))
    ys = list(range(n))
    for y, r in zip(ys, rows):
        d = r.diff
        m, lo, hi = 100 * d["mean"], 100 * d["ci95"][0], 100 * d["ci95"][1]
        if isinstance(d.get("unpaired_ci95"), list):
            ulo, uhi = 100 * d["unpaired_ci95"][0], 100 * d["unpaired_ci95"][1]
            ax.plot([ulo, uhi], [y + 0.22, y + 0.22], color="#999999", lw=2,
                    label="unpaired 95% CI (same replicas)" if y == 0 else None)
        ax.errorbar([m], [y], xerr=[[m - lo], [hi - m]], fmt="o", ms=8, capsize=6, lw=2.2, color=colors[r.label],
                    label="paired mean and 95% CI" if y == 0 else None)
        ax.annotate("won %.0f%% · tied %.0f%% · lost %.0f%%" % (100 * d["wins"], 100 * d["ties"], 100 * d["losses"]),
                    xy=(1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=SMALL)
    ax.axvline(0, color="black", lw=1.2)
    ax.set_yticks(ys)
    ax.set_yticklabels([r.label for r in rows])
    ax.set_ylim(n - 0.4, -0.6)
    ax.set_xlabel("ETTR minus %s's ETTR, same replica (percentage points)" % group.baseline.label)
    ax.set_title("Paired ETTR difference vs %s (replicas with the same faults)" % group.baseline.label)
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.12), ncol=2, frameon=False)
    page.figure(fig, "Per-replica ETTR difference of each stack from the baseline %s (replica i of every stack sees "
                     "the same faults), mean with its 95%% CI%s; right of the line is better than the baseline%s. "
                     "Right: the share of replicas each stack won, tied and lost against it. From %s."
                % (group.baseline.label + (" (%s)" % group.baseline.bound[0] if group.baseline.bound else ""),
                   "; the grey bar is the wider CI an unpaired comparison of the same "
                   "replicas would give" if any(isinstance(r.diff.get("unpaired_ci95"), list) for r in rows) else "",
                   " (no policy should be: it is %s)" % group.baseline.bound[0] if group.baseline.bound else "",
                   group.files))


def breakdown_figure(page, runs, title, caption):
    import matplotlib.pyplot as plt
    import numpy as np
    if not runs:
        return
    n = len(runs)
    rotate = n > 4 or max(len(r.label) for r in runs) > 14
    # The legend takes about 4 inches on the right; the whole stays within FIG_W.
    fig, ax = plt.subplots(figsize=(min(FIG_W - 4.2, max(3.5, 0.55 * n + 2)), 6))
    x = np.arange(n)
    bottom = np.zeros(n)
    for b in BUCKETS:
        hours = np.array([r.result["breakdown_s"].get(b, 0.0) / 3600.0 for r in runs])
        ax.bar(x, hours, 0.6, bottom=bottom, color=BUCKET_COLORS[b], label="%s: %s" % (b, BUCKET_HELP[b]))
        bottom += hours
    if n <= 12:
        for i, r in enumerate(runs):
            ax.annotate("%.2f%%" % (100 * r.result["ettr"]["mean"]), (x[i], bottom[i]), ha="center",
                        va="bottom", fontsize=SMALL, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x)
    ax.set_xticklabels([r.label for r in runs], rotation=30 if rotate else 0, ha="right" if rotate else "center")
    ax.set_xlim(-0.6, n - 0.4)
    horizons = sorted({r.horizon_days for r in runs})
    ax.set_ylabel("hours per replica (of a %s-day job)" % "/".join("%g" % h for h in horizons))
    ax.set_title(title)
    ax.set_ylim(0, max(bottom.max() * 1.15, 1e-6))
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              title="phase (top to bottom as stacked)")
    ax.grid(axis="y", alpha=0.3)
    page.figure(fig, caption)


def category_resolution_figure(page, group, colors):
    import matplotlib.pyplot as plt
    import numpy as np
    cats = []
    for r in group.runs:
        for c, v in r.result.get("incidents", {}).get("by_category", {}).items():
            if v.get("incidents_per_replica", 0) > 0 and c not in cats:
                cats.append(c)
    if not cats:
        return
    # Incident-level times when every stack kept incidents.csv (median and quartiles), else
    # the per-category means of result.json.
    per_incident = all(r.file("incidents.csv") for r in group.runs)
    runs = group.runs
    k = len(runs)
    h = 0.8 / k
    fig, ax = plt.subplots(figsize=(FIG_W, 1.8 + len(cats) * max(0.55, 0.28 * k)))
    for j, r in enumerate(runs):
        bc = r.result.get("incidents", {}).get("by_category", {})
        ys, vals, lo, hi = [], [], [], []
        if per_incident:
            times = {}
            with open(r.file("incidents.csv"), newline="") as f:
                for rec in csv.DictReader(f):
                    res, at = float(rec["resolved_s"]), float(rec["at_s"])
                    if res >= 0:
                        times.setdefault(rec["category"], []).append(max(res - at, 1.0) / 60.0)
        for i, c in enumerate(cats):
            if per_incident:
                t = times.get(c)
                if not t:
                    continue
                q1, med, q3 = np.percentile(t, [25, 50, 75])
                ys.append(i - 0.4 + h * (j + 0.5))
                vals.append(med)
                lo.append(med - q1)
                hi.append(q3 - med)
            else:
                v = bc.get(c)
                if not v or v.get("incidents_per_replica", 0) <= 0:
                    continue
                ys.append(i - 0.4 + h * (j + 0.5))
                vals.append(max(v["resolution_mean_s"], 1.0) / 60.0)
        if not ys:
            continue
        ax.barh(ys, vals, h * 0.9, color=colors[r.label], label=r.label,
                xerr=[lo, hi] if per_incident else None, error_kw={"lw": 1.2, "capsize": 2})
    ax.set_yticks(range(len(cats)))
    ax.set_yticklabels(cats)
    ax.set_ylim(len(cats) - 0.5, -0.5)
    ax.set_xscale("log")
    ax.set_xlabel("%s time from fault to resolution (minutes, log scale)" % ("median" if per_incident else "mean"))
    ax.set_ylabel("fault category")
    ax.set_title("Resolution time by fault category, per stack")
    ax.grid(axis="x", alpha=0.3, which="both")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="stack")
    page.figure(fig, "Time from fault to resolution for each fault category, one bar per stack: %s. Categories "
                     "without an incident under a stack have no bar for it." %
                ("median over incidents with the interquartile range, from each stack's incidents.csv"
                 if per_incident else "mean over incidents (incidents.by_category.*.resolution_mean_s in %s)"
                 % group.source))


def group_figures(page, group):
    colors = stack_colors([r.label for r in group.runs])
    ettr_cdf_figure(page, group, colors)
    paired_diff_figure(page, group, colors)
    breakdown_figure(page, group.runs, "Unproductive time per replica by phase, per stack",
                     "Mean unproductive time per replica, split into the simulator's phases (result.json "
                     "breakdown_s), one bar per stack of %s; the label above each bar is the stack's mean ETTR."
                     % group.name)
    category_resolution_figure(page, group, colors)


def load_timeline(path):
    import numpy as np
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    if data.size == 0:
        return None
    replicas = data[:, 0].astype(int)
    out = {}
    for r in np.unique(replicas):
        rows = data[replicas == r]
        out[int(r)] = (rows[:, 1], rows[:, 2], rows[:, 3])
    return out


def timeline_figure(page, run, replica):
    """Cumulative and 1-hour ETTR of one run; returns (label, t, mean cumulative) for an overlay."""
    import matplotlib.pyplot as plt
    import numpy as np
    path = run.file("timeline.csv")
    if not path:
        return None
    tl = load_timeline(path)
    if not tl:
        return None
    r = replica if replica in tl else min(tl)
    lengths = {len(v[0]) for v in tl.values()}
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(FIG_W, 8), sharex=True)
    t_days = tl[r][0] / 24.0
    overlay = (run.label, t_days, tl[r][1] * 100)
    if len(lengths) == 1 and len(tl) > 1:
        cum = np.vstack([v[1] for v in tl.values()]) * 100
        win = np.vstack([v[2] for v in tl.values()]) * 100
        t_all = next(iter(tl.values()))[0] / 24.0
        lo, hi = np.percentile(cum, [2.5, 97.5], axis=0)
        ax1.fill_between(t_all, lo, hi, color="#1f77b4", alpha=0.2, label="middle 95%% of %d replicas" % len(tl))
        ax1.plot(t_all, cum.mean(axis=0), color="#1f77b4", lw=2, label="mean over replicas")
        ax2.plot(t_all, win.mean(axis=0), color="#555555", lw=1.2, label="mean over replicas")
        overlay = (run.label, t_all, cum.mean(axis=0))
    ax1.plot(t_days, tl[r][1] * 100, color="#d62728", lw=1.2, label="replica %d" % r)
    ax2.plot(t_days, tl[r][2] * 100, color="#d62728", lw=0.8, label="replica %d" % r)
    late = np.concatenate([v[1][v[0] / 24.0 >= min(1.0, v[0][-1] / 48.0)] for v in tl.values()]) * 100
    if late.size:
        ax1.set_ylim(max(0.0, float(np.min(late)) - 2.0), 100.5)
    ax1.set_ylabel("cumulative ETTR (%)")
    ax1.set_title("Cumulative ETTR since job start — %s" % run.label)
    ax1.legend(loc="lower right")
    ax1.grid(alpha=0.3)
    ax2.set_ylabel("ETTR over the last hour (%)")
    ax2.set_xlabel("time since job start (days)")
    ax2.set_title("1-hour sliding-window ETTR — %s" % run.label)
    ax2.set_ylim(-2, 102)
    ax2.legend(loc="lower right")
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    page.figure(fig, "ETTR over time for %s: cumulative ETTR from the start of the job (top) and ETTR over the "
                     "preceding hour (bottom), from %s/timeline.csv; dips in the bottom panel are incidents."
                % (run.label, os.path.basename(os.path.normpath(run.path))))
    return overlay


def overlay_figure(page, overlay):
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(FIG_W, 5))
    for label, t, y in overlay:
        ax.plot(t, y, lw=2, label=label)
    ax.set_xlabel("time since job start (days)")
    ax.set_ylabel("cumulative ETTR (%)")
    ax.set_title("Cumulative ETTR over time, per run directory (mean over replicas)")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    page.figure(fig, "Cumulative ETTR over time, one line per run directory (mean over its replicas, from each "
                     "timeline.csv).")


def read_incidents(path, replica):
    rows = []
    with open(path, newline="") as f:
        for rec in csv.DictReader(f):
            if int(rec["replica"]) == replica:
                rows.append(rec)
    return rows


def incident_figure(page, run, replica):
    import matplotlib.pyplot as plt
    path = run.file("incidents.csv")
    if not path:
        return
    rows = read_incidents(path, replica)
    if not rows:
        with open(path, newline="") as f:
            first = next(csv.DictReader(f), None)
        if not first:
            return
        replica = int(first["replica"])
        rows = read_incidents(path, replica)
    cats = list(run.result["incidents"]["by_category"].keys())
    for r in rows:
        if r["category"] not in cats:
            cats.append(r["category"])
    cmap = plt.get_cmap("tab10")
    color = {c: cmap(i % 10) for i, c in enumerate(cats)}
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(FIG_W, 8), sharex=True,
                                   gridspec_kw={"height_ratios": [max(2, len(cats)) * 0.35 + 1, 3]})
    horizon = run.horizon_days
    for r in rows:
        at = float(r["at_s"]) / 86400.0
        res = float(r["resolved_s"])
        end = (res if res >= 0 else horizon * 86400.0) / 86400.0
        y = cats.index(r["category"])
        ax1.plot([at, end], [y, y], color=color[r["category"]], lw=7, solid_capstyle="butt", alpha=0.5)
        ax1.plot([at], [y], marker="|", color=color[r["category"]], ms=12, mew=1.6)
    ax1.set_yticks(range(len(cats)))
    ax1.set_yticklabels(cats, fontsize=SMALL)
    ax1.set_ylim(-0.7, len(cats) - 0.3)
    ax1.invert_yaxis()
    ax1.set_ylabel("fault category")
    ax1.set_title("Incidents of replica %d — %s (%d incidents; tick = fault, bar = until resolved)"
                  % (replica, run.label, len(rows)), fontsize=SMALL)
    ax1.grid(axis="x", alpha=0.3)
    seen = set()
    for r in rows:
        at = float(r["at_s"])
        det, res = float(r["detected_s"]), float(r["resolved_s"])
        c = r["category"]
        if res >= 0:
            ax2.scatter([at / 86400.0], [max((res - at) / 60.0, 1e-2)], color=color[c], s=30,
                        label=c if c not in seen else None, zorder=3)
            seen.add(c)
        if det >= 0 and det > at:
            ax2.scatter([at / 86400.0], [(det - at) / 60.0], facecolors="none", edgecolors=color[c], s=30, zorder=2)
    ax2.set_yscale("log")
    ax2.set_xlabel("time since job start (days)")
    ax2.set_ylabel("minutes after the fault")
    ax2.set_title("Time from each fault of replica %d to its detection (hollow) and resolution (filled)" % replica,
                  fontsize=SMALL)
    ax2.set_xlim(0, horizon if horizon > 0 else None)
    ax2.grid(alpha=0.3, which="both")
    if seen:
        ax2.legend(fontsize=SMALL, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    page.figure(fig, "Incident timeline of replica %d of %s, from incidents.csv: when each fault struck, by category, "
                     "and how long it took to detect and to resolve." % (replica, run.label))


MECHANISM_RE = re.compile(r"^replica (\d+) t=([0-9.]+) act (acquire machines: (\w+)|hot update|roll back|evict )")
MECHANISM_NAMES = {"requeue": "requeue (whole job)", "reschedule": "reschedule (cold replacement)",
                   "standby": "warm standby", "oracle": "oracle spare"}


def mechanism_counts(run):
    """Recovery actions by mechanism: from the result when the simulator reports them,
    else from the incidents.csv resolution column, else from decisions.log."""
    rb = run.result.get("resolved_by_per_replica")
    if isinstance(rb, dict) and rb:
        return ({k.replace("_", " "): float(v) for k, v in rb.items() if float(v) > 0},
                "incidents per replica, from result.json")
    inc = run.result.get("incidents", {})
    if isinstance(inc.get("by_mechanism"), dict) and inc["by_mechanism"]:
        out = {}
        for k, v in inc["by_mechanism"].items():
            out[k] = float(v["incidents_per_replica"] if isinstance(v, dict) else v)
        return out, "incidents per replica, from result.json"
    path = run.file("incidents.csv")
    if path:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            col = next((c for c in ("resolution", "mechanism") if c in (reader.fieldnames or [])), None)
            if col:
                out = {}
                for rec in reader:
                    out[rec[col]] = out.get(rec[col], 0) + 1
                return out, "incidents, from incidents.csv"
    path = run.file("decisions.log")
    if path:
        # One recovery per (replica, time): an eviction followed by an acquisition at the
        # same instant is one replacement, named by how the machines were acquired.
        events = {}
        with open(path, errors="replace") as f:
            for line in f:
                m = MECHANISM_RE.match(line)
                if not m:
                    continue
                if m.group(4):
                    name, rank = MECHANISM_NAMES.get(m.group(4), m.group(4)), 0
                elif m.group(3).startswith("hot"):
                    name, rank = "hot update", 1
                elif m.group(3).startswith("roll"):
                    name, rank = "rollback", 1
                else:
                    name, rank = "eviction only", 2
                key = (m.group(1), m.group(2))
                if key not in events or rank < events[key][1]:
                    events[key] = (name, rank)
        out = {}
        for name, _ in events.values():
            out[name] = out.get(name, 0) + 1
        return out, "recoveries, from decisions.log"
    return {}, ""


def shares_figure(page, run):
    import matplotlib.pyplot as plt
    cats = run.result["incidents"]["by_category"]
    names = [c for c in cats if cats[c]["incidents_per_replica"] > 0]
    mech, source = mechanism_counts(run)
    if not names and not mech:
        return
    top = max(3.8, 0.42 * len(names) + 1.8)
    if mech:
        bottom = max(2.6, 0.42 * len(mech) + 1.5)
        fig = plt.figure(figsize=(FIG_W, top + bottom))
        gs = fig.add_gridspec(2, 2, height_ratios=[top, bottom])
        axes = [fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[0, 1]), fig.add_subplot(gs[1, :])]
    else:
        fig, axes = plt.subplots(1, 2, figsize=(FIG_W, top))
    inc = [cats[c]["incidents_per_replica"] for c in names]
    lost = [cats[c]["incidents_per_replica"] * cats[c]["resolution_mean_s"] for c in names]
    for ax, vals, what in ((axes[0], inc, "incidents"), (axes[1], lost, "time from fault to resolution")):
        total = sum(vals) or 1.0
        order = sorted(range(len(names)), key=lambda i: vals[i])
        ax.barh([names[i] for i in order], [100 * vals[i] / total for i in order], color="#1f77b4")
        for j, i in enumerate(order):
            ax.annotate("%.1f%%" % (100 * vals[i] / total), (100 * vals[i] / total, j), xytext=(2, 0),
                        textcoords="offset points", va="center", fontsize=SMALL)
        ax.set_xlabel("share of %s (%%)" % what)
        ax.set_ylabel("fault category" if ax is axes[0] else "")
        ax.set_title("Share of %s" % what)
        ax.tick_params(axis="y", labelsize=SMALL)
        ax.set_xlim(0, 110)
    if mech:
        ax = axes[2]
        total = sum(mech.values()) or 1.0
        keys = sorted(mech, key=lambda k: mech[k])
        ax.barh(keys, [100 * mech[k] / total for k in keys], color="#ff7f0e")
        for j, k in enumerate(keys):
            ax.annotate("%.1f%%" % (100 * mech[k] / total), (100 * mech[k] / total, j), xytext=(2, 0),
                        textcoords="offset points", va="center", fontsize=SMALL)
        ax.set_xlabel("share of %s (%%)" % source.split(",")[0])
        ax.set_ylabel("resolution mechanism")
        ax.set_title("Share by resolution mechanism")
        ax.set_xlim(0, 110)
    fig.suptitle("Incident and resolution shares — %s" % run.label)
    fig.tight_layout()
    page.figure(fig, "Shares for %s: incidents by fault category, time from fault to resolution by category "
                     "(incidents × mean resolution time, result.json)%s."
                % (run.label, ", and resolution mechanisms (%s)" % source if mech else ""))


def numeric(values):
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


def sweep_headline(sweep):
    pts = [p for p in sweep.points if "ettr" in p.get("metrics", {})]
    if not pts:
        return ""
    best = max(pts, key=lambda p: p["metrics"]["ettr"]["mean"])
    worst = min(pts, key=lambda p: p["metrics"]["ettr"]["mean"])
    rows = ["<table><tr><th></th><th>point</th><th>replicas</th><th>ETTR mean [95% CI]</th></tr>"]
    for what, p in (("highest ETTR", best), ("lowest ETTR", worst)):
        m = p["metrics"]["ettr"]
        rows.append("<tr><td>%s</td><td>%s</td><td>%d</td><td>%s [%s, %s]</td></tr>"
                    % (what, html.escape(", ".join("%s=%s" % (k, fmt_value(v)) for k, v in p["params"].items())
                                         or "base"), p.get("replicas", 0), pct(m["mean"]), pct(m["lo"]), pct(m["hi"])))
    rows.append("</table>")
    return "\n".join(rows)


def sweep_figures(page, sweep):
    import matplotlib.pyplot as plt
    import numpy as np
    pts = sweep.points
    axes = [a for a in sweep.axes if a["values"]]
    if not pts:
        return
    reps = sorted({p["replicas"] for p in pts})
    rep_text = "/".join(str(r) for r in reps)

    def key_of(a):
        return a["keys"][0]

    def val(p, k):
        return p["params"].get(k)

    def m(p, name, f="mean"):
        return p["metrics"][name][f] * (100 if name == "ettr" else 1)

    for a in axes:
        k = key_of(a)
        xs = [v[0] for v in a["values"]]
        others = [key_of(b) for b in axes if b is not a]
        groups = {}
        for p in pts:
            g = tuple((o, json.dumps(val(p, o))) for o in others)
            groups.setdefault(g, []).append(p)
        is_num = numeric(xs)
        fig, ax = plt.subplots(figsize=(FIG_W if is_num else min(FIG_W, 3 + 1.3 * len(xs)), 5.5))
        shown = list(groups.items())[:12]
        for gi, (g, members) in enumerate(shown):
            members = sorted(members, key=lambda p: xs.index(val(p, k)) if val(p, k) in xs else 0)
            mean = np.array([m(p, "ettr") for p in members])
            lo = np.array([m(p, "ettr", "lo") for p in members])
            hi = np.array([m(p, "ettr", "hi") for p in members])
            label = ", ".join("%s=%s" % (o.split(".")[-1], fmt_value(json.loads(v))) for o, v in g) or "ETTR"
            if is_num:
                xv = [val(p, k) for p in members]
                line, = ax.plot(xv, mean, marker="o", ms=5, lw=2, label=label)
                ax.fill_between(xv, lo, hi, color=line.get_color(), alpha=0.2)
            else:
                # A categorical axis (stacks, module names): points with CI bars, never a line
                # between categories; groups side by side within a category.
                off = (gi - (len(shown) - 1) / 2) * min(0.6 / max(len(shown), 1), 0.2)
                xv = [xs.index(val(p, k)) + off if val(p, k) in xs else 0 for p in members]
                ax.errorbar(xv, mean, yerr=[mean - lo, hi - mean], fmt="o", ms=7, capsize=5, lw=2, label=label)
        if is_num:
            pos = [x for x in xs if x > 0]
            if len(pos) == len(xs) and max(xs) / min(xs) > 50:
                ax.set_xscale("log")
        else:
            ax.set_xticks(range(len(xs)))
            ax.set_xticklabels([fmt_value(x) for x in xs], rotation=20 if len(xs) > 5 else 0)
            ax.set_xlim(-0.6, len(xs) - 0.4)
            ax.grid(axis="y", alpha=0.3)
        ax.set_xlabel(unit_label(k))
        ax.set_ylabel("ETTR (%%), mean with 95%% CI %s" % ("band" if is_num else "bar"))
        ax.set_title("ETTR vs %s (%s replicas per point, same seeds)" % (k.split(".")[-1], rep_text))
        if is_num:
            ax.grid(alpha=0.3, which="both")
        if len(groups) > 1:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, title="other parameters")
        what = "confidence band" if is_num else "confidence interval"
        if others:
            caption = ("Sweep of %s: mean ETTR against %s with its 95%% %s, one %s per setting of the "
                       "other swept parameters%s. %s that coincide are points where %s makes no "
                       "difference (the same fault histories drive every point). From sweep.json."
                       % (sweep.name, k, what, "line" if is_num else "colour",
                          " (first 12 shown)" if len(groups) > 12 else "",
                          "Lines" if is_num else "Points", ", ".join(others)))
        else:
            caption = ("Sweep of %s: mean ETTR against %s with its 95%% %s (the same fault histories "
                       "drive every point). From sweep.json." % (sweep.name, k, what))
        page.figure(fig, caption)

    if len(axes) == 2:
        ka, kb = key_of(axes[0]), key_of(axes[1])
        va = [v[0] for v in axes[0]["values"]]
        vb = [v[0] for v in axes[1]["values"]]
        grid = np.full((len(va), len(vb)), np.nan)
        half = np.full((len(va), len(vb)), np.nan)
        for p in pts:
            try:
                i, j = va.index(val(p, ka)), vb.index(val(p, kb))
            except ValueError:
                continue
            grid[i, j] = m(p, "ettr")
            half[i, j] = (m(p, "ettr", "hi") - m(p, "ettr", "lo")) / 2
        fig, ax = plt.subplots(figsize=(min(FIG_W, 1.5 * len(vb) + 4), 0.8 * len(va) + 3))
        im = ax.imshow(grid, cmap="viridis", aspect="auto", origin="lower")
        cb = fig.colorbar(im, ax=ax)
        cb.set_label("mean ETTR (%)")
        finite = grid[np.isfinite(grid)]
        mid = (finite.min() + finite.max()) / 2 if finite.size else 0
        for i in range(len(va)):
            for j in range(len(vb)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, "%.2f\n±%.2f" % (grid[i, j], half[i, j]), ha="center", va="center",
                            fontsize=SMALL, color="white" if grid[i, j] < mid else "black")
        ax.set_xticks(range(len(vb)))
        ax.set_xticklabels([fmt_value(v) for v in vb])
        ax.set_yticks(range(len(va)))
        ax.set_yticklabels([fmt_value(v) for v in va])
        ax.set_xlabel(unit_label(kb))
        ax.set_ylabel(unit_label(ka))
        ax.set_title("Mean ETTR (%%) over %s × %s" % (ka.split(".")[-1], kb.split(".")[-1]))
        page.figure(fig, "Sweep of %s: mean ETTR (%%) at every grid point, with the half-width of its 95%% CI, "
                         "from sweep.json." % sweep.name)


def tune_headline(tune):
    d = tune.doc
    k = 100 if d.get("objective") == "ettr" else 1
    unit = "%" if k == 100 else ""
    b = d["best"]
    text = ("<p>Best <code>%s</code> = <b>%s</b>: %s %.4g%s (95%% CI %.4g .. %.4g%s, %s replicas per value); "
            "values not distinguishable from it (paired): %s .. %s"
            % (html.escape(d.get("param", "?")), fmt_value(b["value"]),
               "ETTR" if d.get("objective") == "ettr" else html.escape(d.get("objective", "?")), k * b["mean"], unit, k * b["ci95"][0], k * b["ci95"][1], unit,
               d.get("replicas", "?"), fmt_value(d.get("indistinguishable_range", ["?", "?"])[0]),
               fmt_value(d.get("indistinguishable_range", ["?", "?"])[1])))
    if isinstance(d.get("within"), dict):
        w = d["within"]
        text += "; smallest value within %.3g%% of the best: %s" % (100 * w["fraction"], fmt_value(w["value"]))
    return text + ".</p>"


def tune_figure(page, tune):
    import matplotlib.pyplot as plt
    d = tune.doc
    k = 100 if d.get("objective") == "ettr" else 1
    unit = " (%)" if k == 100 else ""
    obj = d.get("objective", "objective")
    obj = "ETTR" if obj == "ettr" else obj
    cands = d["candidates"]
    rounds = sorted({c.get("round", 0) for c in cands})
    trace = d.get("rounds") or []
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(FIG_W, 9), gridspec_kw={"height_ratios": [3, 2]})
    cmap = plt.get_cmap("viridis")
    lo_r, hi_r = d.get("indistinguishable_range", [None, None])
    if lo_r is not None and hi_r is not None and hi_r > lo_r:
        ax1.axvspan(lo_r, hi_r, color="#2ca02c", alpha=0.12, label="not distinguishable from the best (paired)")
    for ri in rounds:
        cs = [c for c in cands if c.get("round", 0) == ri]
        x = [c["value"] for c in cs]
        m = [k * c["mean"] for c in cs]
        err = [[k * (c["mean"] - c["ci95"][0]) for c in cs], [k * (c["ci95"][1] - c["mean"]) for c in cs]]
        ax1.errorbar(x, m, yerr=err, fmt="o", ms=6, capsize=4, lw=1.5,
                     color=cmap(0.85 * ri / max(len(rounds) - 1, 1)),
                     label="round %d (%s)" % (ri, "coarse grid" if ri == 0 else "refinement"))
    b = d["best"]
    ax1.plot([b["value"]], [k * b["mean"]], marker="*", ms=20, color="#d62728", ls="none", zorder=5,
             label="best: %s" % fmt_value(b["value"]))
    if isinstance(d.get("within"), dict):
        w = d["within"]
        ax1.plot([w["value"]], [k * w["mean"]], marker="D", ms=10, mfc="none", mec="#ff7f0e", mew=2, ls="none",
                 zorder=5, label="smallest within %.3g%%: %s" % (100 * w["fraction"], fmt_value(w["value"])))
    ax1.set_xlabel(unit_label(d.get("param", "value")))
    ax1.set_ylabel("%s%s, mean with 95%% CI" % (obj, unit))
    ax1.set_title("Every evaluated candidate, by round")
    ax1.grid(alpha=0.3)
    ax1.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    if trace:
        xr = [t["round"] for t in trace]
        bm = [k * t["best"]["mean"] for t in trace]
        be = [[k * (t["best"]["mean"] - t["best"]["ci95"][0]) for t in trace],
              [k * (t["best"]["ci95"][1] - t["best"]["mean"]) for t in trace]]
        ax2.errorbar(xr, bm, yerr=be, fmt="o", ms=7, capsize=5, lw=1.8, color="#d62728")
        for t, y in zip(trace, bm):
            ax2.annotate(fmt_value(t["best"]["value"]), (t["round"], y), xytext=(8, 6), textcoords="offset points",
                         fontsize=SMALL)
        ax2.set_xticks(xr)
        ax2.set_xticklabels(["round %d\n(%d values)" % (t["round"], len(t["values"])) for t in trace])
        ax2.set_xlim(min(xr) - 0.5, max(xr) + 0.7)
        ax2.set_ylabel("best %s%s" % (obj, unit))
        ax2.set_title("Best value after each round (label: the value)")
        ax2.grid(alpha=0.3)
    else:
        ax2.set_visible(False)
    fig.suptitle("Tuning %s for %s %s" % (d.get("param", "?"), d.get("goal", "max"), obj))
    fig.tight_layout()
    page.figure(fig, "Tuning trace of %s, from tune.json: top, every candidate value with its mean %s and 95%% CI, "
                     "coloured by the round that evaluated it (round 0 is the coarse grid, later rounds refine "
                     "around the best), the best marked with a star and the values whose paired difference from "
                     "the best is not significant shaded; bottom, the best value and its CI after each round. "
                     "Every candidate ran the same %s replicas with the same seeds."
                % (tune.name, obj, d.get("replicas", "?")))


# ---------------------------------------------------------------- live state directories
#
# A live run's state directory (`faultline live run`, STATE_DIR): events.jsonl, the event
# log of traces/event_log.h, and journal.json. The headline comes from the log's summary
# record; ETTR over time and lost time by phase from its "account" records (cumulative,
# written at each incident's close and with the summary), or, in a log that predates them,
# ETTR from the progress records alone.

# Actions a policy takes once at start (its set-up), or notes: not steps of an incident.
LIVE_SETUP_ACTIONS = {"SetCheckpointPlan", "WatchSteps", "EnableInspection", "SetStandbyPool", "Note",
                      "EnableOracle", "EnableReplicaGroups"}
# Events that only report what an action found, or healthy progress: not a symptom.
LIVE_QUIET_EVENTS = {"StepSample", "JobStarted", "JobStopped", "ProbeResult", "ReplayResult", "MachinesReady",
                     "StacksCaptured", "ActionFailed"}


def fmt_dur(s):
    """A duration as a reader wants it: seconds, minutes, hours or days."""
    s = float(s)
    if abs(s) < 10:
        return "%.2f s" % s
    if abs(s) < 120:
        return "%.1f s" % s
    if abs(s) < 7200:
        return "%.1f min" % (s / 60.0)
    if abs(s) < 172800:
        return "%.2f h" % (s / 3600.0)
    return "%.2f days" % (s / 86400.0)


def time_axis(elapsed_s):
    """(divisor, unit) for a time axis spanning elapsed_s: the run's own scale."""
    if elapsed_s < 7200:
        return 60.0, "minutes"
    if elapsed_s < 172800:
        return 3600.0, "hours"
    return 86400.0, "days"


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
    the time since the run started (the summary's definition, traces/event_log.h)."""
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


def window_ettr(live, window_s, n=400):
    """ETTR over the preceding window_s at n times: the steps gained in the window × the
    fault-free step time over the window (a step counted twice after a restart is not gained)."""
    import numpy as np
    st = float((live.summary or {}).get("step_time_s") or live.header.get("nominal_step_time_s", 1.0))
    prog = [(float(r["t_s"]), int(r["step"])) for r in live.by_kind.get("progress", [])]
    if len(prog) < 2:
        return None, None
    pt = np.array([p[0] for p in prog])
    ps = np.array([p[1] for p in prog], dtype=float)
    el = live.elapsed_s
    ts = np.linspace(min(window_s, el), el, n)
    # Progress may be thinned: between two samples as close as usual the job ran steadily
    # (interpolate); across a longer gap it was stopped (hold the last step).
    usual = 3 * float(np.median(np.diff(pt))) if len(pt) > 2 else float("inf")

    def step_at(x):
        i = np.clip(np.searchsorted(pt, x, side="right") - 1, 0, len(pt) - 2)
        frac = np.clip((x - pt[i]) / np.maximum(pt[i + 1] - pt[i], 1e-9), 0, 1)
        steady = (pt[i + 1] - pt[i] <= usual) & (ps[i + 1] >= ps[i])
        held = np.where(x >= pt[i + 1], ps[i + 1], ps[i])
        return np.where(x < pt[0], ps[0], np.where(steady, ps[i] + frac * (ps[i + 1] - ps[i]), held))

    gained = step_at(ts) - step_at(ts - window_s)
    return ts, np.clip(gained * st / window_s, 0.0, 1.0)


def live_lost(live):
    """Lost seconds by phase from the last account record, or None for an older log."""
    if not live.accounts:
        return None
    lost = live.accounts[-1].get("lost_s") or {}
    return {b: float(lost.get(b, 0) or 0) for b in BUCKETS}


def live_headline(page, live):
    """The headline table: the live figures (and the replay's, given together), each cell
    carrying its exact value in seconds or as a fraction for scripts and tests."""
    ettr, el, prod, source = live.figures()
    lost = el - prod
    rows = ["<table><tr><th>run</th><th>ETTR</th><th>elapsed</th><th>productive</th><th>incidents</th>"
            "<th>lost time (elapsed − productive)</th><th>lost hours</th></tr>"]
    cell = '<td data-value="%r">%s</td>'
    rows.append("<tr><td>%s</td>%s%s%s%s%s%s</tr>" % (
        html.escape(live.label), cell % (ettr, pct(ettr)), cell % (el, fmt_dur(el)), cell % (prod, fmt_dur(prod)),
        cell % (len(live.incidents), len(live.incidents)), cell % (lost, fmt_dur(lost)),
        cell % (lost / 3600.0, "%.3f" % (lost / 3600.0))))
    rp = live.replay
    if rp:
        e = rp.result["ettr"]
        rel = rp.horizon_days * 86400.0
        rlost = sum(float(rp.result.get("breakdown_s", {}).get(b, 0)) for b in BUCKETS)
        rows.append("<tr><td>replayed in the simulator (%s, mean of %d replicas)</td><td>%s [%s, %s]</td>"
                    "<td>%s</td><td>%s</td><td>%.1f</td><td>%s</td><td>%.3f</td></tr>" % (
                        html.escape(rp.label), rp.result.get("replicas", 0), pct(e["mean"]), pct(e["ci95"][0]),
                        pct(e["ci95"][1]), fmt_dur(rel), fmt_dur(rel - rlost),
                        rp.result.get("incidents", {}).get("per_replica", 0), fmt_dur(rlost), rlost / 3600.0))
    rows.append("</table>")
    page.raw("\n".join(rows))
    note = ("ETTR (effective training time ratio) = productive / elapsed: productive is the steps the job kept "
            "× its fault-free step time (%s); everything else is lost. Figures from %s of <code>%s</code>."
            % (fmt_dur(float((live.summary or {}).get("step_time_s", 0))) + " a step"
               if live.summary else "the healthy step time", source, html.escape(live.log)))
    if rp:
        note += (" The replay's ETTR is the simulator's own (the whole simulated clock); "
                 "<code>faultline sim replay</code> prints it also in the live definition.")
    if live.torn:
        note += " The log's last line was cut off mid-write and is left out."
    page.p('<span class="note">%s</span>' % note)


def live_phase_table(page, live):
    lost = live_lost(live)
    if lost is None:
        return
    el = float(live.accounts[-1].get("elapsed_s") or live.elapsed_s or 1.0)
    rows = ["<table><tr><th>phase</th><th>lost time</th><th>share of elapsed</th></tr>"]
    for b in sorted(BUCKETS, key=lambda b: -lost[b]):
        if lost[b] > 0:
            rows.append('<tr><td>%s (%s)</td><td data-value="%r">%s</td><td>%.2f%%</td></tr>'
                        % (b, html.escape(BUCKET_HELP[b]), lost[b], fmt_dur(lost[b]), 100 * lost[b] / el))
    rows.append("</table>")
    page.raw("\n".join(rows))


def no_account_note(live):
    ettr, el, prod, _ = live.figures()
    return ('<span class="note" id="no-account">Lost time by phase: not available — this event log predates the '
            'lost-time account (it has no "account" records); %s of %s was lost in all.</span>'
            % (fmt_dur(el - prod), fmt_dur(el)))


def live_ettr_figure(page, live):
    """Cumulative ETTR (account records, else progress) and ETTR over a sliding window."""
    import matplotlib.pyplot as plt
    el = live.elapsed_s
    if el <= 0 or not (live.accounts or live.by_kind.get("progress")):
        page.p('<span class="note">No ETTR over time: the log has no progress or account record yet.</span>')
        return
    div, unit = time_axis(el)
    # A 1-hour window as for simulated runs; a run of a few hours or less gets a tenth of
    # its length, or the window would cover the whole run and repeat the top panel.
    window = 3600.0 if el >= 4 * 3600 else max(el / 10.0, 1.0)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(FIG_W, 8), sharex=True)
    if live.accounts:
        t = [float(a["elapsed_s"]) for a in live.accounts]
        y = [100 * float(a["productive_s"]) / max(float(a["elapsed_s"]), 1e-9) for a in live.accounts]
        ax1.plot([x / div for x in t], y, "o-", color="#1f77b4", lw=2, ms=6,
                 label="account records (at each incident's close and at the end)")
        source = "the account records"
    else:
        t, cum = progress_ettr(live)
        ax1.plot([x / div for x in t], [100 * c for c in cum], color="#1f77b4", lw=2,
                 label="from step progress (this log has no account records)")
        source = "the progress records"
    if live.summary:
        ax1.axhline(100 * float(live.summary["ettr"]), color="#555555", ls="--", lw=1,
                    label="final ETTR %s (summary)" % pct(float(live.summary["ettr"])))
    shade_incidents(ax1, live, div)
    ax1.set_ylabel("cumulative ETTR (%)")
    ax1.set_ylim(-2, 102)
    ax1.set_title("Cumulative ETTR since the run started — %s" % live.label)
    ax1.legend(loc="lower right")
    ax1.grid(alpha=0.3)
    ts, win = window_ettr(live, window)
    if ts is not None:
        ax2.plot(ts / div, 100 * win, color="#d62728", lw=1.2)
    shade_incidents(ax2, live, div)
    wtext = "1-hour" if window == 3600.0 else "%s" % fmt_dur(window)
    ax2.set_ylabel("ETTR over the last %s (%%)" % wtext.replace("1-hour", "hour"))
    ax2.set_xlabel("time since the run started (%s)" % unit)
    ax2.set_title("%s sliding-window ETTR — %s" % (wtext, live.label))
    ax2.set_ylim(-2, 102)
    ax2.set_xlim(0, el / div)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    page.figure(fig, "ETTR over time of %s: top, cumulative ETTR (productive / elapsed) from %s; "
                     "bottom, ETTR over the preceding %s (steps gained in the window × the fault-free step time, "
                     "from the progress records)%s. Shaded: incidents, from the first sign to the job running "
                     "again." % (live.name, source, fmt_dur(window),
                                 "" if window == 3600.0 else ", a tenth of the run, since the run is shorter "
                                 "than four hours"))


def shade_incidents(ax, live, div):
    for i, inc in enumerate(live.incidents):
        end = inc.closed if inc.closed is not None else live.elapsed_s
        ax.axvspan(inc.t / div, max(end, inc.t + live.elapsed_s / 400.0) / div, color="#ff7f0e", alpha=0.18,
                   lw=0, label="incident" if i == 0 else None)


def live_lost_figure(page, live):
    """Lost time by phase: the live account's, beside the replay's when one is given."""
    import matplotlib.pyplot as plt
    import numpy as np
    lost = live_lost(live)
    if lost is None:
        page.p(no_account_note(live))
        return
    rp = live.replay
    shown = [b for b in BUCKETS if lost[b] > 0 or (rp and float(rp.result.get("breakdown_s", {}).get(b, 0)) > 0)]
    if not shown:
        page.p('<span class="note">No time lost in any phase.</span>')
        return
    div, unit = (1.0, "seconds") if live.elapsed_s < 7200 else time_axis(live.elapsed_s)
    fig, ax = plt.subplots(figsize=(FIG_W, 1.6 + (0.75 if rp else 0.5) * len(shown)))
    y = np.arange(len(shown))
    h = 0.38 if rp else 0.6
    vals = [lost[b] / div for b in shown]
    ax.barh(y - (h / 2 if rp else 0), vals, h, color=[BUCKET_COLORS[b] for b in shown], label="live (account)")
    for yi, v in zip(y, vals):
        ax.annotate(fmt_dur(v * div), (v, yi - (h / 2 if rp else 0)), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=SMALL)
    if rp:
        rv = [float(rp.result.get("breakdown_s", {}).get(b, 0)) / div for b in shown]
        ax.barh(y + h / 2, rv, h, color=[BUCKET_COLORS[b] for b in shown], alpha=0.45, hatch="//",
                label="replayed (mean per replica)")
        for yi, v in zip(y, rv):
            ax.annotate(fmt_dur(v * div), (v, yi + h / 2), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=SMALL)
        ax.legend(loc="lower right")
    ax.set_yticks(y)
    ax.set_yticklabels(["%s\n(%s)" % (b, BUCKET_HELP[b]) for b in shown], fontsize=SMALL)
    ax.set_ylim(len(shown) - 0.5, -0.5)
    ax.set_xlim(0, max(vals + ([max(rv)] if rp else [])) * 1.25 or 1)
    ax.set_xlabel("time lost (%s)" % unit)
    ax.set_title("Lost time by phase — %s (%s lost of %s)" % (live.label, fmt_dur(sum(lost.values())),
                                                             fmt_dur(live.accounts[-1].get("elapsed_s", 0))))
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    page.figure(fig, "Where the live run's lost time went, in the simulator's phases, from the last account record "
                     "of events.jsonl%s." % (" beside the replay's mean per replica (result.json breakdown_s)"
                                             if rp else ""))


def live_incident_figure(page, live):
    """The incidents on the run's timeline: one row each, fault to job running again, the
    actions as ticks; the table below it says what each was."""
    import matplotlib.pyplot as plt
    incs = live.incidents
    if not incs:
        page.p('<span class="note">No incidents: no fault was injected on a job machine and the policy took no '
               'action after the start.</span>')
        return
    el = live.elapsed_s
    div, unit = time_axis(el)
    fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(FIG_W, 3.2 + 0.45 * len(incs)), sharex=True,
                                   gridspec_kw={"height_ratios": [2.2, 0.9 + 0.45 * len(incs)]})
    prog = [(float(r["t_s"]) / div, int(r["step"])) for r in live.by_kind.get("progress", [])]
    if prog:
        ax0.plot([p[0] for p in prog], [p[1] for p in prog], color="#1f77b4", lw=1.5)
    shade_incidents(ax0, live, div)
    from matplotlib.lines import Line2D
    ax0.legend(handles=[Line2D([], [], color="#1f77b4", lw=1.5, label="rank 0's step"),
                        Line2D([], [], marker="v", color="black", ls="none", ms=8, label="fault (or first sign)"),
                        Line2D([], [], marker="|", color="#333333", ls="none", ms=14, mew=1.5,
                               label="policy action"),
                        Line2D([], [], color="#2ca02c", lw=8, alpha=0.6, label="incident, resolved"),
                        Line2D([], [], color="#d62728", lw=8, alpha=0.6, label="incident, not resolved")],
               loc="upper left", fontsize=SMALL, ncol=2)
    ax0.set_ylabel("training step")
    ax0.set_title("Training progress (flat or falling: the job is stopped or redoing steps)")
    ax0.grid(alpha=0.3)
    for i, inc in enumerate(incs):
        end = inc.closed if inc.closed is not None else el
        color = "#2ca02c" if inc.closed is not None else "#d62728"
        ax1.plot([inc.t / div, max(end, inc.t + el / 300.0) / div], [i, i], color=color, lw=9,
                 solid_capstyle="butt", alpha=0.6)
        ax1.plot([inc.t / div], [i], marker="v", color="black", ms=8, ls="none",
                 label="fault or first sign" if i == 0 else None)
        ts = [t / div for t, _ in inc.actions]
        if ts:
            ax1.plot(ts, [i] * len(ts), marker="|", color="#333333", ms=14, mew=1.5, ls="none",
                     label="policy action" if i == 0 else None)
        ax1.annotate("%s, %s" % (inc.resolution or "unresolved", fmt_dur(end - inc.t)) if inc.closed is not None
                     else "not resolved by the end", (end / div, i), xytext=(6, 0), textcoords="offset points",
                     va="center", fontsize=SMALL)
    ax1.set_yticks(range(len(incs)))
    ax1.set_yticklabels(["#%d %s" % (i + 1, short_cause(inc)) for i, inc in enumerate(incs)], fontsize=SMALL)
    ax1.set_ylim(len(incs) - 0.5, -0.6)
    ax1.set_xlim(0, el / div * 1.18)
    ax0.set_xlim(0, el / div * 1.18)
    ax1.set_xlabel("time since the run started (%s)" % unit)
    ax1.set_title("Incidents: bar from the fault to the job running again (green: resolved), label: how, how long")
    ax1.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    page.figure(fig, "Incidents of %s on its timeline, derived from events.jsonl: an incident opens at "
                     "an injected fault on a job machine (the log's ground truth, never shown to the policy) or at "
                     "the policy's first reaction to something no fault explains, and closes when the job it "
                     "stopped has started again. Top: rank 0's training step. The table below lists each "
                     "incident's actions." % live.name)
    live_incident_table(page, live)


def short_cause(inc):
    if inc.faults:
        return inc.faults[0].split(" (")[0]
    return (inc.symptom or "no injected fault")[:28]


def live_incident_table(page, live):
    rows = ["<table class=\"incidents\"><tr><th>#</th><th>at</th><th class=\"text\">what happened (injected)</th>"
            "<th class=\"text\">what the policy saw</th><th class=\"text\">actions taken, time after the fault</th>"
            "<th class=\"text\">resolution</th><th>fault to first action</th><th>fault to running again</th></tr>"]
    for i, inc in enumerate(live.incidents):
        acts = "<br>".join("+%s %s" % (html.escape(fmt_dur(t - inc.t)), html.escape(a)) for t, a in inc.actions[:12])
        if len(inc.actions) > 12:
            acts += "<br>… %d more" % (len(inc.actions) - 12)
        rows.append("<tr><td>%d</td><td>%s</td><td class=\"text\">%s</td><td class=\"text\">%s</td>"
                    "<td class=\"acts\">%s</td><td class=\"text\">%s</td>"
                    "<td>%s</td><td>%s</td></tr>" % (
                        i + 1, fmt_dur(inc.t), html.escape("; ".join(inc.faults) or "no injected fault"),
                        html.escape(inc.symptom or ("nothing by the end of the run" if inc.closed is None else "—")),
                        acts or "none",
                        html.escape(inc.resolution or ("none" if inc.closed is None else "restart")),
                        fmt_dur(inc.detected - inc.t) if inc.detected is not None else "—",
                        fmt_dur(inc.closed - inc.t) if inc.closed is not None else "not by the end"))
    rows.append("</table>")
    page.raw("\n".join(rows))


def live_counts_figure(page, live):
    """Injected faults by kind and the policy's actions by kind (set-up actions apart)."""
    import matplotlib.pyplot as plt
    faults, actions = {}, {}
    for r in live.by_kind.get("fault", []):
        faults[r.get("fault", "?")] = faults.get(r.get("fault", "?"), 0) + 1
    # The set-up: everything up to and including the initial start.
    start = [float(r["t_s"]) for r in live.by_kind.get("action", [])
             if r.get("action", {}).get("reason") == "initial start"]
    for r in live.by_kind.get("action", []):
        k = r.get("action", {}).get("type", "?") + (" (set-up)" if start and float(r["t_s"]) <= start[0] else "")
        actions[k] = actions.get(k, 0) + 1
    if not faults and not actions:
        return
    n = max(len(faults), len(actions), 2)
    fig, axes = plt.subplots(1, 2, figsize=(FIG_W, 1.6 + 0.42 * n))
    for ax, counts, what, color in ((axes[0], faults, "injected faults by kind", "#d62728"),
                                    (axes[1], actions, "policy actions by kind", "#1f77b4")):
        keys = sorted(counts, key=lambda k: (counts[k], k))
        ax.barh(keys, [counts[k] for k in keys], 0.6, color=color)
        for j, k in enumerate(keys):
            ax.annotate("%d" % counts[k], (counts[k], j), xytext=(3, 0), textcoords="offset points", va="center",
                        fontsize=SMALL)
        ax.set_xlim(0, max(list(counts.values()) + [1]) * 1.2)
        ax.set_ylim(len(keys) - n - 0.4, len(keys) - 0.4)  # the same bar height in both panels, from the top
        ax.set_xlabel("count")
        ax.set_title(what.capitalize())
        ax.tick_params(axis="y", labelsize=SMALL)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if not counts:
            ax.text(0.5, 0.5, "none", transform=ax.transAxes, ha="center")
    fig.tight_layout()
    page.figure(fig, "What %s saw and did, from events.jsonl: left, the faults injected (fault records, "
                     "ground truth); right, the actions the policy took, its one-off set-up at the start marked."
                % live.name)


def live_section(page, live):
    page.h2("Live run: " + live.name, "live")
    live_ettr_figure(page, live)
    live_lost_figure(page, live)
    live_incident_figure(page, live)
    live_counts_figure(page, live)


def is_replay(run):
    """A `sim replay --out` run: its scenario is built from an event log."""
    return run.result.get("trace_mapping", {}).get("mode") == "replay" or run.result.get("scenario") == "events"


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
