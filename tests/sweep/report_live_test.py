#!/usr/bin/env python3
"""`faultline report STATE_DIR` on a live run's state directory (ctest: report.live_state_dir).

The fixtures under tests/sweep/data/ come from real `realexec/scripts/live-local.sh` runs
(120 s, byterobust, six scripted faults), trimmed (step samples dropped, progress thinned
to every 5th step, stack dumps cut short; journal.json keeps only the machine names):
  live-state/             a run whose controller writes "account" records (the lost-time
                          account: cumulative, at each incident's close and before the
                          summary; lost_s in the simulator's phases)
  live-state-no-account/  a run from before the account (an older log: no such records)
  live-replay/            `faultline sim replay live-state/events.jsonl --out` (incidents.csv
                          cut to replicas 0 and 1)
Checked through the faultline binary (with FAULTLINE_REPORT_SCRIPT on the checkout's
report.py): the page is written, its headline equals the log's summary, every section is
there, a log without account records renders with a one-line note instead of the phases,
a live run and its replay side by side, and bad input is refused in one line (exit 2).
Usage: report_live_test.py --faultline BIN --report analysis/report.py --data tests/sweep/data
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

ARGS = None


def records(d):
    with open(os.path.join(d, "events.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def cell_values(page, row_label):
    """The exact values (data-value) of one headline table row, by its first cell."""
    m = re.search(r"<tr><td>%s</td>(.*?)</tr>" % re.escape(row_label), page)
    if not m:
        return None
    return [float(v) for v in re.findall(r'data-value="([^"]*)"', m.group(1))]


class LiveReport(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="report-live-")
        self.live = os.path.join(ARGS.data, "live-state")
        self.plain = os.path.join(ARGS.data, "live-state-no-account")
        self.replay = os.path.join(ARGS.data, "live-replay")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def report(self, *dirs):
        out = os.path.join(self.tmp, "report.html")
        env = dict(os.environ, FAULTLINE_REPORT_SCRIPT=ARGS.report)
        p = subprocess.run([ARGS.faultline, "report"] + list(dirs) + ["-o", out], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, env=env, timeout=120)
        page = ""
        if p.returncode == 0 and os.path.exists(out):
            with open(out) as f:
                page = f.read()
        return p, page

    def assertOnPage(self, text, page):
        # Not assertIn: its message would print the whole page, figures included.
        self.assertTrue(text in page, "not on the page: " + text)

    def test_page_written_with_embedded_figures(self):
        p, page = self.report(self.live)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(page.count('src="data:image/png;base64,'), 4, p.stderr)
        self.assertEqual(page.count("<figcaption>"), 4)
        self.assertFalse('src="http' in page)
        self.assertNotIn("Traceback", p.stderr)

    def test_headline_equals_the_summary(self):
        p, page = self.report(self.live)
        self.assertEqual(p.returncode, 0, p.stderr)
        summary = [r for r in records(self.live) if r["kind"] == "summary"][-1]
        ettr, elapsed, productive, incidents, lost, lost_h = cell_values(page, "live byterobust")
        self.assertEqual(ettr, summary["ettr"])
        self.assertEqual(elapsed, summary["elapsed_s"])
        self.assertEqual(productive, summary["productive_s"])
        self.assertAlmostEqual(lost, summary["elapsed_s"] - summary["productive_s"], places=9)
        self.assertAlmostEqual(lost_h, lost / 3600.0, places=12)
        # Six scripted faults on job machines, six incidents (the last, a hang, still open).
        self.assertEqual(incidents, 6)
        self.assertOnPage('">%.2f%%</td>' % (100 * summary["ettr"]), page)
        # The phase table is the last account record's.
        last = [r for r in records(self.live) if r["kind"] == "account"][-1]
        for phase, s in last["lost_s"].items():
            if s > 0:
                self.assertRegex(page, r"<td>%s \([^)]*\)</td><td data-value=\"%r\">" % (phase, s))

    def test_every_section_present(self):
        p, page = self.report(self.live)
        self.assertEqual(p.returncode, 0, p.stderr)
        for s in ('id="headline"', "Live run: live byterobust (live-state)", "Cumulative ETTR since the run started",
                  "sliding-window ETTR", "Lost time by phase — live byterobust", "Incidents: bar from the fault",
                  "actions taken, time after the fault", "Injected faults by kind", "Policy actions by kind",
                  # An incident with its machines and resolution, by name (journal.json).
                  "kill on m1", "EvictMachines on m0", "for slot 0: s1 (standby)", "analyzer_over_eviction",
                  "not by the end"):
            self.assertOnPage(s, page)
        self.assertLess(page.find('id="headline"'), page.find("<figure"))
        self.assertFalse('id="no-account"' in page)

    def test_log_without_account_records_gets_a_note(self):
        p, page = self.report(self.plain)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(page.count('id="no-account"'), 1)
        note = re.search(r'<span class="note" id="no-account">([^<]*)</span>', page).group(1)
        self.assertIn("predates the lost-time account", note)
        self.assertFalse("Lost time by phase —" in page)
        self.assertOnPage("cumulative ETTR (productive / elapsed) from the progress records", page)
        self.assertEqual(page.count("<figcaption>"), 3)
        summary = [r for r in records(self.plain) if r["kind"] == "summary"][-1]
        self.assertEqual(cell_values(page, "live byterobust")[0], summary["ettr"])

    def test_live_and_replay_side_by_side(self):
        p, page = self.report(self.live, self.replay)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(os.path.join(self.replay, "result.json")) as f:
            replay = json.load(f)
        self.assertOnPage("replayed in the simulator (byterobust, mean of %d replicas)" % replay["replicas"], page)
        self.assertOnPage("beside the replay&#x27;s mean per replica", page)
        self.assertOnPage("sim replay, set beside its live run", page)
        self.assertFalse("<h2>Run: " in page)  # drawn beside the live run, not again on its own

    def test_neither_is_refused_in_one_line(self):
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        p, _ = self.report(empty)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn(empty + ": not a result directory", p.stderr)
        self.assertIn("events.jsonl (a live state directory)", p.stderr)

    def test_a_broken_log_is_refused_in_one_line(self):
        bad = os.path.join(self.tmp, "bad")
        os.makedirs(bad)
        with open(os.path.join(bad, "events.jsonl"), "w") as f:
            f.write("not json\n")
        p, _ = self.report(bad)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn(os.path.join(bad, "events.jsonl") + ":1: expected one JSON object", p.stderr)
        self.assertNotIn("Traceback", p.stderr)

    def test_dollar_signs_from_the_run_are_text_not_tex(self):
        # A crash message is drawn as an incident's label: "$...$" in it once went to
        # matplotlib's TeX parser, which failed on it and took the page with it.
        odd = os.path.join(self.tmp, "dollars")
        shutil.copytree(self.live, odd)
        path = os.path.join(odd, "events.jsonl")
        with open(path) as f:
            recs = [json.loads(line) for line in f if line.strip()]
        recs = [r for r in recs if r["kind"] != "fault"]  # labels from what the policy saw
        text = json.dumps(recs).replace("killed by signal 9 (SIGKILL)", "${x$\\\\frac{ killed")
        with open(path, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in json.loads(text)))
        p, page = self.report(odd)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertOnPage("crash: ${x$\\frac{ killed", page)

    def test_a_line_nested_too_deep_is_refused_in_one_line(self):
        deep = os.path.join(self.tmp, "deep")
        shutil.copytree(self.live, deep)
        path = os.path.join(deep, "events.jsonl")
        with open(path) as f:
            lines = f.read().split("\n")
        lines.insert(3, '{"kind":"note","t_s":1,"text":' + "[" * 100000 + "]" * 100000 + "}")
        with open(path, "w") as f:
            f.write("\n".join(lines))
        p, _ = self.report(deep)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn(path + ":4: expected one JSON object", p.stderr)
        self.assertNotIn("Traceback", p.stderr)

    def test_a_torn_last_line_is_left_out(self):
        torn = os.path.join(self.tmp, "torn")
        shutil.copytree(self.live, torn)
        with open(os.path.join(torn, "events.jsonl"), "a") as f:
            f.write('{"kind":"progress","t_s":121.0,"st')
        p, page = self.report(torn)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertOnPage("last line was cut off mid-write", page)

    def test_in_headless_chromium(self):
        # The browser checks of report.headless_browser on the live page: every figure
        # decodes, none is shown smaller than drawn, no script error, no template leftover.
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import report_browser_test as browser
        chromium = browser.find_chromium()
        if not chromium:
            self.skipTest("no chromium")
        p, page = self.report(self.live, self.replay)
        self.assertEqual(p.returncode, 0, p.stderr)
        html_path = os.path.join(self.tmp, "report.html")
        dom, log = browser.load_page(chromium, os.path.join(self.tmp, "profile"), html_path)
        problems = browser.page_problems(dom, log, page.count("<figcaption>"),
                                         ["Lost time by phase", "Incidents: bar from the fault"])
        self.assertEqual(problems, [])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--faultline", required=True)
    ap.add_argument("--report", required=True)
    ap.add_argument("--data", required=True)
    ARGS, rest = ap.parse_known_args()
    ARGS.report = os.path.abspath(ARGS.report)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
