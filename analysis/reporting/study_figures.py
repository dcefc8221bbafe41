"""Study figures: a sweep's ETTR against each swept parameter (a heatmap for two) and a
tuning's trace, from sweep.json and tune.json."""

import html
import json

from .inputs import fmt_value
from .page import FIG_W, SMALL, pct, unit_label


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
    pts = sweep.points
    axes = [a for a in sweep.axes if a["values"]]
    if not pts:
        return
    reps = sorted({p["replicas"] for p in pts})
    rep_text = "/".join(str(r) for r in reps)
    for a in axes:
        sweep_axis_figure(page, sweep, a, axes, rep_text)
    if len(axes) == 2:
        sweep_heatmap(page, sweep, axes)


def sweep_key(a):
    """A swept axis's parameter (the first of the keys it sets together)."""
    return a["keys"][0]


def param_value(p, k):
    return p["params"].get(k)


def metric(p, name, f="mean"):
    """A point's metric (ETTR in %)."""
    return p["metrics"][name][f] * (100 if name == "ettr" else 1)


def sweep_axis_figure(page, sweep, a, axes, rep_text):
    """Mean ETTR against one swept parameter, a line (or, on a categorical axis, points)
    per setting of the others."""
    import matplotlib.pyplot as plt
    import numpy as np
    pts = sweep.points
    k = sweep_key(a)
    xs = [v[0] for v in a["values"]]
    others = [sweep_key(b) for b in axes if b is not a]
    groups = {}
    for p in pts:
        g = tuple((o, json.dumps(param_value(p, o))) for o in others)
        groups.setdefault(g, []).append(p)
    is_num = numeric(xs)
    fig, ax = plt.subplots(figsize=(FIG_W if is_num else min(FIG_W, 3 + 1.3 * len(xs)), 5.5))
    shown = list(groups.items())[:12]
    for gi, (g, members) in enumerate(shown):
        members = sorted(members, key=lambda p: xs.index(param_value(p, k)) if param_value(p, k) in xs else 0)
        mean = np.array([metric(p, "ettr") for p in members])
        lo = np.array([metric(p, "ettr", "lo") for p in members])
        hi = np.array([metric(p, "ettr", "hi") for p in members])
        label = ", ".join("%s=%s" % (o.split(".")[-1], fmt_value(json.loads(v))) for o, v in g) or "ETTR"
        if is_num:
            xv = [param_value(p, k) for p in members]
            line, = ax.plot(xv, mean, marker="o", ms=5, lw=2, label=label)
            ax.fill_between(xv, lo, hi, color=line.get_color(), alpha=0.2)
        else:
            # A categorical axis (stacks, module names): points with CI bars, never a line
            # between categories; groups side by side within a category.
            off = (gi - (len(shown) - 1) / 2) * min(0.6 / max(len(shown), 1), 0.2)
            xv = [xs.index(param_value(p, k)) + off if param_value(p, k) in xs else 0 for p in members]
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


def sweep_heatmap(page, sweep, axes):
    """Mean ETTR at every point of a two-parameter grid."""
    import matplotlib.pyplot as plt
    import numpy as np
    pts = sweep.points
    ka, kb = sweep_key(axes[0]), sweep_key(axes[1])
    va = [v[0] for v in axes[0]["values"]]
    vb = [v[0] for v in axes[1]["values"]]
    grid = np.full((len(va), len(vb)), np.nan)
    half = np.full((len(va), len(vb)), np.nan)
    for p in pts:
        try:
            i, j = va.index(param_value(p, ka)), vb.index(param_value(p, kb))
        except ValueError:
            continue
        grid[i, j] = metric(p, "ettr")
        half[i, j] = (metric(p, "ettr", "hi") - metric(p, "ettr", "lo")) / 2
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
