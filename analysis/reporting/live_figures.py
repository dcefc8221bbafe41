"""Live figures: a live run's headline, ETTR over time, lost time by phase (beside its
replay's), incidents on its timeline with a table, and faults and actions by kind, from the
event log's summary, account, progress, fault and action records."""

import html

from .inputs import BUCKETS, live_lost, progress_ettr
from .page import BUCKET_COLORS, BUCKET_HELP, FIG_W, SMALL, fmt_dur, pct, time_axis


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
