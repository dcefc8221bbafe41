"""Simulated figures: the headline tables of runs and compared stacks, their ETTR, paired
differences, unproductive time by phase, resolution times, timelines, incidents and shares,
drawn from result.json, replicas.csv, timeline.csv and incidents.csv."""

import csv
import html
import os

from .inputs import BUCKETS
from .page import BUCKET_COLORS, BUCKET_HELP, FIG_W, SMALL, pct, pp, stack_colors


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


def mechanism_counts(run):
    """Incidents per replica by the mechanism that resolved them, as the simulator credits
    them (result.json resolved_by_per_replica); none from a result without it."""
    rb = run.result.get("resolved_by_per_replica")
    if not isinstance(rb, dict):
        return {}, ""
    return ({k.replace("_", " "): float(v) for k, v in rb.items() if float(v) > 0},
            "incidents per replica, from result.json")


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
