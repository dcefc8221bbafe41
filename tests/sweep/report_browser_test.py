#!/usr/bin/env python3
"""The report page in a real headless browser (ctest: report.headless_browser).

Builds a run, a compare, a sweep and a tune directory with the faultline binary, writes
one report of all four, and opens it in headless Chromium:
  - the DOM after load has every section, every figure decoded (none broken), no figure
    shown smaller than it was drawn (text legible at 100% zoom), and no script error
    (neither in the page's own error counter nor as an "Uncaught" console line);
  - a screenshot of the top of the page is a real picture: not tiny, not one colour.
The page text must hold no template leftover (%s, %%, {name}). The same checks are first
run on a deliberately broken copy of the page (a script error, a figure that does not
decode, a stray %s) and must flag it, so the test can fail.

Without Chromium the test is skipped (exit 77) on a developer machine and FAILS under CI
(the CI environment variable set): .ci/install-deps installs the `chromium` package.
Needs matplotlib (python3-matplotlib) for the report and to read the screenshot.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

SKIP = 77


def run(argv, what, timeout=300):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if p.returncode != 0:
        sys.exit("FAIL: %s: exit %d\n%s" % (what, p.returncode, p.stderr[-3000:]))
    return p


def find_chromium():
    env = os.environ.get("FAULTLINE_CHROMIUM")
    if env:
        return env if shutil.which(env) else None
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_argv(chromium, profile):
    return [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
            "--no-first-run", "--user-data-dir=" + profile, "--window-size=1400,2000"]


def load_page(chromium, profile, page):
    """The DOM after the load event, and Chromium's log (console messages included)."""
    p = subprocess.run(chromium_argv(chromium, profile) + ["--enable-logging=stderr", "--v=0", "--dump-dom",
                                                           "file://" + os.path.abspath(page)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 0:
        sys.exit("FAIL: chromium --dump-dom %s: exit %d\n%s" % (page, p.returncode, p.stderr[-3000:]))
    return p.stdout, p.stderr


def page_problems(dom, log, expect_figures, sections):
    problems = []
    m = re.search(r"<body([^>]*)>", dom)
    attrs = dict(re.findall(r'(data-[a-z-]+)="([^"]*)"', m.group(1))) if m else {}
    if "data-figures" not in attrs:
        problems.append("the page's load check did not run (no data-figures on <body>)")
    else:
        if int(attrs["data-figures"]) != expect_figures:
            problems.append("%s figures in the DOM, %d in the HTML" % (attrs["data-figures"], expect_figures))
        if int(attrs.get("data-figures-broken", "0")):
            problems.append("%s figures did not decode" % attrs["data-figures-broken"])
        if int(attrs.get("data-figures-decoded", "0")) != expect_figures:
            problems.append("%s of %d figures decoded" % (attrs.get("data-figures-decoded"), expect_figures))
        if float(attrs.get("data-min-scale", "0")) < 0.99:
            problems.append("a figure is shown at %s of its drawn size (text below 11 pt at 100%% zoom)"
                            % attrs.get("data-min-scale"))
    if int(attrs.get("data-script-errors", "0")):
        problems.append("%s script errors" % attrs["data-script-errors"])
    for line in log.splitlines():
        if "Uncaught" in line or ("CONSOLE" in line and ":ERROR:" in line):
            problems.append("console: " + line.strip()[:300])
    if dom.count("<figcaption") != expect_figures:
        problems.append("%d captions for %d figures" % (dom.count("<figcaption"), expect_figures))
    for s in sections:
        if s not in dom:
            problems.append("section missing: " + s)
    # Template leftovers in what a reader sees (captions, tables, headings), e.g. an
    # unsubstituted %s or a doubled %%.
    visible = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", dom, flags=re.S)
    visible = re.sub(r"<[^>]*>", " ", visible)
    for leftover in re.findall(r"%%|%[sdrfg]|%\.\d+[fg]|\{[a-z_0-9]*\}", visible):
        problems.append("template leftover %r in the page text" % leftover)
    imgs = re.findall(r'<img[^>]*src="([^"]*)"', dom)
    empty = [i for i, src in enumerate(imgs) if not re.match(r"data:image/png;base64,[A-Za-z0-9+/]{200}", src)]
    if empty:
        problems.append("figures %s have no embedded PNG" % empty)
    return problems


def screenshot_problems(chromium, profile, page, png):
    if os.path.exists(png):
        os.remove(png)
    p = subprocess.run(chromium_argv(chromium, profile) + ["--screenshot=" + png, "file://" + os.path.abspath(page)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if p.returncode != 0 or not os.path.exists(png):
        return ["no screenshot (exit %d): %s" % (p.returncode, p.stderr[-2000:])]
    problems = []
    size = os.path.getsize(png)
    if size < 30000:
        problems.append("screenshot is only %d bytes" % size)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image as mpimg
    import numpy as np
    img = mpimg.imread(png)
    if img.shape[0] < 1000 or img.shape[1] < 1000:
        problems.append("screenshot is %dx%d" % (img.shape[1], img.shape[0]))
    rgb = (img[..., :3] * 255).astype(np.uint8).reshape(-1, 3)
    colours, counts = np.unique(rgb, axis=0, return_counts=True)
    background = counts.max() / float(len(rgb))
    if len(colours) < 64 or background > 0.97:
        problems.append("screenshot is blank: %d colours, %.1f%% one colour" % (len(colours), 100 * background))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--faultline", required=True)
    ap.add_argument("--scenarios", required=True)
    ap.add_argument("--workdir", required=True)
    args = ap.parse_args()
    t0 = time.time()
    chromium = find_chromium()
    if not chromium:
        msg = "no headless browser (chromium) on PATH; install Debian's chromium (.ci/install-deps does)"
        if os.environ.get("CI"):
            sys.exit("FAIL: " + msg + " (CI is set: the report must be checked in a browser)")
        print("SKIP: " + msg)
        return SKIP
    w = args.workdir
    shutil.rmtree(w, ignore_errors=True)
    os.makedirs(w)
    fl = args.faultline
    dense = os.path.join(args.scenarios, "byterobust-dense-9600.json")
    daly = os.path.join(args.scenarios, "daly-check.json")
    d = {k: os.path.join(w, k) for k in ("run", "compare", "sweep", "tune")}
    run([fl, "sim", "run", dense, "--replicas", "4", "--jobs", "2", "--quiet", "--out", d["run"], "--timeline",
         "--incidents", "--decisions"], "sim run")
    # A long stack name (NAME+PARAM=VALUE) must not push a figure wider than the page.
    run([fl, "sim", "compare", dense, "--stacks", "byterobust,requeue,reschedule,byterobust+localization=bisection",
         "--baseline", "byterobust",
         "--replicas", "4", "--jobs", "2", "--quiet", "--out", d["compare"]], "sim compare")
    run([fl, "sim", "sweep", daly, "--replicas", "4", "--jobs", "2", "--quiet", "--out", d["sweep"], "--set",
         "job.horizon_days=10", "--grid", "policy.params.checkpoint_interval_s=1200,2400", "--grid",
         "cluster.scheduler.requeue_base_s=300,600"], "sim sweep")
    run([fl, "sim", "tune", daly, "--param", "policy.params.checkpoint_interval_s=600:6000", "--replicas", "4",
         "--jobs", "2", "--points", "4", "--rounds", "1", "--set", "job.horizon_days=10", "--quiet", "--out",
         d["tune"]], "sim tune")
    page = os.path.join(w, "report.html")
    run([fl, "report", d["compare"], d["run"], d["sweep"], d["tune"], "-o", page], "faultline report")
    with open(page) as f:
        text = f.read()
    n_fig = text.count("<figure")
    if n_fig < 12:
        sys.exit("FAIL: only %d figures in %s" % (n_fig, page))
    sections = ['id="headline"', 'id="compare"', 'id="sweep"', 'id="tune"', "Run: byterobust",
                "ETTR distribution over replicas", "Paired ETTR difference vs byterobust"]
    profile = os.path.join(w, "chromium-profile")

    # The checks must catch a broken page: a script error and a figure that does not decode.
    broken = os.path.join(w, "broken.html")
    with open(broken, "w") as f:
        f.write(text.replace("</body>", '<p>caption %s</p><script>undefinedFunction();</script></body>')
                .replace('src="data:image/png;base64,', 'src="data:image/png;base64,AAAA', 1))
    caught = page_problems(*load_page(chromium, profile, broken), n_fig, sections)
    if not any("script error" in p for p in caught) or not any("did not decode" in p for p in caught) \
            or not any("Uncaught" in p for p in caught) or not any("template leftover" in p for p in caught):
        sys.exit("FAIL: the checks did not catch the broken page: %s" % caught)

    problems = page_problems(*load_page(chromium, profile, page), n_fig, sections)
    problems += screenshot_problems(chromium, profile, page, os.path.join(w, "report-top.png"))
    if problems:
        sys.exit("FAIL: %s\n  %s" % (page, "\n  ".join(problems)))
    print("ok: %s: %d figures loaded in %s without script errors, none scaled down; screenshot %s "
          "(%.1f s)" % (page, n_fig, os.path.basename(chromium), os.path.join(w, "report-top.png"), time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
