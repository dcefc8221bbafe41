#!/usr/bin/env python3
"""faultline report: one self-contained HTML page of figures from result directories.

Run by `faultline report DIR... -o report.html` (sim/cli/report_cmd.cc). A DIR is either
a `sim run --out` directory (result.json, and timeline.csv, incidents.csv, decisions.log
when they were asked for) or a `sim sweep --out` directory (sweep.json, points/*/result.json).
Figures are drawn with matplotlib (Debian: python3-matplotlib) and embedded as base64 PNG.

Exit codes: 0 written, 1 failure (missing matplotlib, unreadable input), 2 bad arguments.
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

BUCKETS = ["detection", "diagnosis", "failover", "restore", "recompute", "checkpoint", "degraded", "warmup"]
BUCKET_COLORS = {
    "detection": "#d62728", "diagnosis": "#9467bd", "failover": "#ff7f0e", "restore": "#8c564b",
    "recompute": "#e377c2", "checkpoint": "#1f77b4", "degraded": "#bcbd22",
    "warmup": "#17becf",
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
}


def fail(msg, code=1):
    print("faultline report: " + msg, file=sys.stderr)
    sys.exit(code)


def unit_label(key):
    """Axis label with its unit, from the naming convention of scenario fields."""
    leaf = key.split(".")[-1]
    units = [("_per_machine_day", "per machine-day"), ("_per_job_day", "per job-day"), ("_days", "days"),
             ("_s", "s"), ("_h", "h"), ("_ms", "ms"), ("_us", "µs"), ("_gbps", "Gb/s"), ("_bytes", "bytes"),
             ("machines", "machines"), ("replicas", "replicas")]
    for suffix, unit in units:
        if leaf.endswith(suffix):
            return "%s (%s)" % (key, unit)
    return key + " (value)"


class Run:
    """A `sim run --out` directory, or one point of a sweep."""

    def __init__(self, path, result, label=None):
        self.path = path
        self.result = result
        self.label = label or "%s · %s" % (result.get("policy", "?"), result.get("scenario", "?"))

    @staticmethod
    def load(path):
        with open(os.path.join(path, "result.json")) as f:
            return Run(path, json.load(f))

    def file(self, name):
        p = os.path.join(self.path, name)
        return p if os.path.exists(p) else None

    @property
    def horizon_days(self):
        return float(self.result.get("horizon_days", 0))


class Sweep:
    def __init__(self, path):
        self.path = path
        with open(os.path.join(path, "sweep.json")) as f:
            self.doc = json.load(f)
        self.points = self.doc["points"]
        self.axes = self.doc.get("axes", [])
        self.name = "%s sweep (%s)" % (self.doc.get("scenario_name", "?"), os.path.basename(os.path.normpath(path)))

    def point_runs(self):
        runs = []
        for p in self.points:
            rp = os.path.join(self.path, p["result"])
            if not os.path.exists(rp):
                continue
            with open(rp) as f:
                res = json.load(f)
            label = ", ".join("%s=%s" % (k.split(".")[-1], fmt_value(v)) for k, v in p["params"].items())
            runs.append(Run(os.path.dirname(rp), res, label or "base"))
        return runs


def fmt_value(v):
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"))
    return str(v)


class Page:
    def __init__(self, title, png_dir=None):
        self.title = title
        self.parts = []
        self.png_dir = png_dir
        self.count = 0

    def h2(self, text):
        self.parts.append("<h2>%s</h2>" % html.escape(text))

    def p(self, text):
        self.parts.append("<p>%s</p>" % text)

    def raw(self, text):
        self.parts.append(text)

    def figure(self, fig, caption):
        import matplotlib.pyplot as plt
        titles = [fig._suptitle.get_text()] if getattr(fig, "_suptitle", None) else []
        titles += [ax.get_title() for ax in fig.axes if ax.get_title()]
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        plt.close(fig)
        data = buf.getvalue()
        self.count += 1
        if self.png_dir:
            os.makedirs(self.png_dir, exist_ok=True)
            with open(os.path.join(self.png_dir, "figure-%02d.png" % self.count), "wb") as f:
                f.write(data)
        self.parts.append('<figure><img alt="%s" src="data:image/png;base64,%s"><figcaption>%s</figcaption></figure>'
                          % (html.escape(" | ".join(titles) or caption, quote=True),
                             base64.b64encode(data).decode("ascii"), html.escape(caption)))

    def html(self):
        style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
                 "figure{margin:1.5em 0}img{max-width:100%}figcaption{color:#555;font-size:90%}"
                 "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
                 "th{background:#f4f4f4}td:first-child{text-align:left}")
        return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head>"
                "<body><h1>%s</h1>\n%s\n</body></html>\n"
                % (html.escape(self.title), style, html.escape(self.title), "\n".join(self.parts)))


def summary_table(runs):
    rows = ["<table><tr><th>run</th><th>replicas</th><th>ETTR mean</th><th>95% CI</th>"
            "<th>incidents / replica</th><th>GPU-hours lost / replica</th><th>directory</th></tr>"]
    for r in runs:
        e = r.result["ettr"]
        rows.append("<tr><td>%s</td><td>%d</td><td>%.3f%%</td><td>%.3f%% .. %.3f%%</td><td>%.1f</td><td>%.0f</td>"
                    "<td>%s</td></tr>" % (html.escape(r.label), r.result.get("replicas", 0), 100 * e["mean"],
                                          100 * e["ci95"][0], 100 * e["ci95"][1],
                                          r.result["incidents"]["per_replica"],
                                          r.result.get("gpu_hours_lost_per_replica", 0), html.escape(r.path)))
    rows.append("</table>")
    return "\n".join(rows)


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


def timeline_figures(page, runs, replica):
    import matplotlib.pyplot as plt
    import numpy as np
    overlay = []
    for run in runs:
        path = run.file("timeline.csv")
        if not path:
            continue
        tl = load_timeline(path)
        if not tl:
            continue
        r = replica if replica in tl else min(tl)
        lengths = {len(v[0]) for v in tl.values()}
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 7), sharex=True)
        t_days = tl[r][0] / 24.0
        if len(lengths) == 1 and len(tl) > 1:
            cum = np.vstack([v[1] for v in tl.values()]) * 100
            win = np.vstack([v[2] for v in tl.values()]) * 100
            t_all = next(iter(tl.values()))[0] / 24.0
            lo, hi = np.percentile(cum, [2.5, 97.5], axis=0)
            ax1.fill_between(t_all, lo, hi, color="#1f77b4", alpha=0.2,
                             label="middle 95%% of %d replicas" % len(tl))
            ax1.plot(t_all, cum.mean(axis=0), color="#1f77b4", lw=1.8, label="mean over replicas")
            ax2.plot(t_all, win.mean(axis=0), color="#555555", lw=1.0, label="mean over replicas")
            overlay.append((run.label, t_all, cum.mean(axis=0)))
        else:
            overlay.append((run.label, t_days, tl[r][1] * 100))
        ax1.plot(t_days, tl[r][1] * 100, color="#d62728", lw=1.0, label="replica %d" % r)
        ax2.plot(t_days, tl[r][2] * 100, color="#d62728", lw=0.6, label="replica %d" % r)
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
                         "preceding hour (bottom), sampled from timeline.csv; dips in the bottom panel are "
                         "incidents." % run.label)
    if len(overlay) > 1:
        fig, ax = plt.subplots(figsize=(10, 4.5))
        for label, t, y in overlay:
            ax.plot(t, y, lw=1.5, label=label)
        ax.set_xlabel("time since job start (days)")
        ax.set_ylabel("cumulative ETTR (%)")
        ax.set_title("Cumulative ETTR by policy stack (mean over replicas)")
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
        page.figure(fig, "Cumulative ETTR over time, one line per result directory.")


def breakdown_figure(page, runs, title, caption):
    import matplotlib.pyplot as plt
    import numpy as np
    if not runs:
        return
    n = len(runs)
    fig, ax = plt.subplots(figsize=(max(6, min(18, 1.1 * n + 3)), 5.5))
    x = np.arange(n)
    bottom = np.zeros(n)
    for b in BUCKETS:
        hours = np.array([r.result["breakdown_s"].get(b, 0.0) / 3600.0 for r in runs])
        ax.bar(x, hours, 0.65, bottom=bottom, color=BUCKET_COLORS[b], label="%s (%s)" % (b, BUCKET_HELP[b]))
        bottom += hours
    for i, r in enumerate(runs):
        ax.annotate("ETTR %.2f%%" % (100 * r.result["ettr"]["mean"]), (x[i], bottom[i]), ha="center",
                    va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x)
    ax.set_xticklabels([r.label for r in runs], rotation=30 if n > 3 else 0, ha="right" if n > 3 else "center",
                       fontsize=8)
    horizons = sorted({r.horizon_days for r in runs})
    ax.set_ylabel("unproductive time per replica (hours of a %s-day job)" % "/".join("%g" % h for h in horizons))
    ax.set_title(title)
    ax.set_ylim(0, max(bottom.max() * 1.15, 1e-6))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(axis="y", alpha=0.3)
    page.figure(fig, caption)


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
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True,
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
    ax1.set_yticklabels(cats, fontsize=8)
    ax1.set_ylim(-0.7, len(cats) - 0.3)
    ax1.invert_yaxis()
    ax1.set_ylabel("fault category")
    ax1.set_title("Incidents of replica %d — %s (%d incidents; tick = fault, bar = until resolved)"
                  % (replica, run.label, len(rows)), fontsize=10)
    ax1.grid(axis="x", alpha=0.3)
    seen = set()
    for r in rows:
        at = float(r["at_s"])
        det, res = float(r["detected_s"]), float(r["resolved_s"])
        c = r["category"]
        if res >= 0:
            ax2.scatter([at / 86400.0], [max((res - at) / 60.0, 1e-2)], color=color[c], s=22,
                        label=c if c not in seen else None, zorder=3)
            seen.add(c)
        if det >= 0 and det > at:
            ax2.scatter([at / 86400.0], [(det - at) / 60.0], facecolors="none", edgecolors=color[c], s=22, zorder=2)
    ax2.set_yscale("log")
    ax2.set_xlabel("time since job start (days)")
    ax2.set_ylabel("minutes after the fault")
    ax2.set_title("Time from each fault of replica %d to its detection (hollow) and resolution (filled)" % replica,
                  fontsize=10)
    ax2.set_xlim(0, horizon if horizon > 0 else None)
    ax2.grid(alpha=0.3, which="both")
    if seen:
        ax2.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
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
    panels = 2 + (1 if mech else 0)
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, max(3.2, 0.35 * len(names) + 1.5)))
    inc = [cats[c]["incidents_per_replica"] for c in names]
    lost = [cats[c]["incidents_per_replica"] * cats[c]["resolution_mean_s"] for c in names]
    for ax, vals, what in ((axes[0], inc, "incidents"), (axes[1], lost, "time from fault to resolution")):
        total = sum(vals) or 1.0
        order = sorted(range(len(names)), key=lambda i: vals[i])
        ax.barh([names[i] for i in order], [100 * vals[i] / total for i in order], color="#1f77b4")
        for j, i in enumerate(order):
            ax.annotate("%.1f%%" % (100 * vals[i] / total), (100 * vals[i] / total, j), xytext=(2, 0),
                        textcoords="offset points", va="center", fontsize=7)
        ax.set_xlabel("share of %s (%%)" % what)
        ax.set_ylabel("fault category")
        ax.set_title("Share of %s by category" % what, fontsize=10)
        ax.tick_params(axis="y", labelsize=8)
        ax.set_xlim(0, 110)
    if mech:
        ax = axes[2]
        total = sum(mech.values()) or 1.0
        keys = sorted(mech, key=lambda k: mech[k])
        ax.barh(keys, [100 * mech[k] / total for k in keys], color="#ff7f0e")
        for j, k in enumerate(keys):
            ax.annotate("%.1f%%" % (100 * mech[k] / total), (100 * mech[k] / total, j), xytext=(2, 0),
                        textcoords="offset points", va="center", fontsize=7)
        ax.set_xlabel("share of %s (%%)" % source.split(",")[0])
        ax.set_ylabel("resolution mechanism")
        ax.set_title("Share by resolution mechanism", fontsize=10)
        ax.set_xlim(0, 110)
    fig.suptitle("Incident and resolution shares — %s" % run.label)
    fig.tight_layout()
    page.figure(fig, "Shares for %s: incidents by fault category, time from fault to resolution by category "
                     "(incidents × mean resolution time, result.json)%s."
                % (run.label, ", and resolution mechanisms (%s)" % source if mech else ""))


def numeric(values):
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


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
        fig, ax = plt.subplots(figsize=(9, 5))
        is_num = numeric(xs)
        for gi, (g, members) in enumerate(list(groups.items())[:12]):
            members = sorted(members, key=lambda p: xs.index(val(p, k)) if val(p, k) in xs else 0)
            xv = [val(p, k) for p in members] if is_num else list(range(len(members)))
            mean = [m(p, "ettr") for p in members]
            lo = [m(p, "ettr", "lo") for p in members]
            hi = [m(p, "ettr", "hi") for p in members]
            label = ", ".join("%s=%s" % (o.split(".")[-1], fmt_value(json.loads(v))) for o, v in g) or "ETTR"
            line, = ax.plot(xv, mean, marker="o", ms=4, lw=1.5, label=label)
            ax.fill_between(xv, lo, hi, color=line.get_color(), alpha=0.2)
        if is_num:
            pos = [x for x in xs if x > 0]
            if len(pos) == len(xs) and max(xs) / min(xs) > 50:
                ax.set_xscale("log")
        else:
            ax.set_xticks(range(len(xs)))
            ax.set_xticklabels([fmt_value(x) for x in xs], rotation=20, fontsize=8)
        ax.set_xlabel(unit_label(k))
        ax.set_ylabel("ETTR (%), mean with 95% CI band")
        ax.set_title("ETTR vs %s — %s (%s replicas per point, same seeds)" % (k.split(".")[-1], sweep.name, rep_text),
                     fontsize=10)
        ax.grid(alpha=0.3, which="both")
        if len(groups) > 1:
            ax.legend(fontsize=8, loc="best", title="other parameters" if len(groups) > 1 else None)
        if others:
            caption = ("Sweep %s: mean ETTR against %s with its 95%% confidence band, one line per setting of the "
                       "other swept parameters%s. Lines that coincide are points where %s makes no "
                       "difference (the same fault histories drive every point)."
                       % (sweep.name, k, " (first 12 shown)" if len(groups) > 12 else "", ", ".join(others)))
        else:
            caption = ("Sweep %s: mean ETTR against %s with its 95%% confidence band (the same fault histories "
                       "drive every point)." % (sweep.name, k))
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
        fig, ax = plt.subplots(figsize=(1.3 * len(vb) + 3.5, 0.7 * len(va) + 2.5))
        im = ax.imshow(grid, cmap="viridis", aspect="auto", origin="lower")
        cb = fig.colorbar(im, ax=ax)
        cb.set_label("mean ETTR (%)")
        finite = grid[np.isfinite(grid)]
        mid = (finite.min() + finite.max()) / 2 if finite.size else 0
        for i in range(len(va)):
            for j in range(len(vb)):
                if np.isfinite(grid[i, j]):
                    ax.text(j, i, "%.2f\n±%.2f" % (grid[i, j], half[i, j]), ha="center", va="center", fontsize=7,
                            color="white" if grid[i, j] < mid else "black")
        ax.set_xticks(range(len(vb)))
        ax.set_xticklabels([fmt_value(v) for v in vb], fontsize=8)
        ax.set_yticks(range(len(va)))
        ax.set_yticklabels([fmt_value(v) for v in va], fontsize=8)
        ax.set_xlabel(unit_label(kb))
        ax.set_ylabel(unit_label(ka))
        ax.set_title("Mean ETTR (%%) over %s × %s — %s" % (ka.split(".")[-1], kb.split(".")[-1], sweep.name),
                     fontsize=10)
        page.figure(fig, "Sweep %s: mean ETTR (%%) at every grid point, with the half-width of its 95%% CI."
                    % sweep.name)


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
        import matplotlib.pyplot  # noqa: F401
        import numpy  # noqa: F401
    except ImportError as e:
        fail("needs matplotlib and numpy (Debian: apt-get install python3-matplotlib): %s" % e)

    runs, sweeps = [], []
    for d in args.dirs:
        try:
            if os.path.exists(os.path.join(d, "sweep.json")):
                sweeps.append(Sweep(d))
            elif os.path.exists(os.path.join(d, "result.json")):
                runs.append(Run.load(d))
            else:
                fail("%s: expected result.json or sweep.json" % d, 2)
        except (OSError, ValueError, KeyError) as e:
            fail("%s: %s" % (d, e))
    labels = [r.label for r in runs]
    for r in runs:
        if labels.count(r.label) > 1:
            r.label += " [%s]" % os.path.basename(os.path.normpath(r.path))

    title = args.title or "faultline report: " + ", ".join([r.label for r in runs] + [s.name for s in sweeps])
    page = Page(title, args.png_dir or None)
    page.p("Generated by <code>faultline report</code> from: %s."
           % ", ".join("<code>%s</code>" % html.escape(d) for d in args.dirs))
    if runs:
        page.h2("Summary")
        page.raw(summary_table(runs))
    if any(r.file("timeline.csv") for r in runs):
        page.h2("ETTR over time")
        timeline_figures(page, runs, args.replica)
    if runs:
        page.h2("Where the time goes")
        breakdown_figure(page, runs, "Unproductive time per replica by cause, per policy stack",
                         "Mean unproductive time per replica, split into the simulator's buckets, one bar per result "
                         "directory; the label above each bar is its mean ETTR.")
    for s in sweeps:
        page.h2("Sweep: " + s.name)
        page.raw(summary_table(s.point_runs()) if len(s.points) <= 60 else "")
        sweep_figures(page, s)
        pr = s.point_runs()
        if 0 < len(pr) <= 40:
            breakdown_figure(page, pr, "Unproductive time per replica by cause, per sweep point — %s" % s.name,
                             "Mean unproductive time per replica at each point of sweep %s, split by cause." % s.name)
    incident_runs = [r for r in runs if r.file("incidents.csv")]
    if incident_runs:
        page.h2("Incidents")
        for r in incident_runs:
            incident_figure(page, r, args.replica)
    if runs:
        page.h2("Shares by category and mechanism")
        for r in runs:
            shares_figure(page, r)
    try:
        with open(args.out, "w") as f:
            f.write(page.html())
    except OSError as e:
        fail("%s: %s" % (args.out, e))
    print("wrote %s (%d figures)" % (args.out, page.count), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
