"""faultline's Python API (faultline.simulate, compare, sweep; docs/python.md): the numbers are
the CLI's (same seed, same JSON), results come as attributes and DataFrames, errors as
faultline.Error / InputError with the CLI's one-line message, and `import faultline` needs
neither torch nor pandas nor the extension. Needs the real faultline._core in the package
(PYTHONPATH=<build>/python) and the CLI binary (FAULTLINE_BIN, else <build>/bin/faultline)."""

import io
import json
import os
import subprocess
import sys
import tempfile
import unittest
from unittest import mock

import pandas as pd
from pandas.testing import assert_frame_equal

import faultline
import faultline.sim

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCENARIO = os.path.join(ROOT, "scenarios", "byterobust-dense-9600.json")
PKG = os.path.dirname(os.path.abspath(faultline.__file__))
BIN = os.environ.get("FAULTLINE_BIN") or os.path.join(PKG, "..", "..", "bin", "faultline")
STACKS = ["byterobust", "byterobust+localization=bisection", "requeue"]
GRID = {"policy.params.checkpoint": ["memory", "remote"],
        "policy.params.checkpoint_interval_s": [600, 1800]}


def cli(*args):
    """The CLI's stdout for `faultline ARGS...` (which must succeed)."""
    p = subprocess.run([BIN] + [str(a) for a in args], capture_output=True, text=True,
                       check=False)
    if p.returncode != 0:
        raise AssertionError("faultline %s: exit %d: %s" % (args, p.returncode, p.stderr))
    return p.stdout


def cli_json(*args):
    data = json.loads(cli(*args, "--format", "json", "--quiet"))
    data.pop("wall_s", None)
    return data


def without_wall(data):
    return {k: v for k, v in data.items() if k != "wall_s"}


def scenario_dict():
    with open(SCENARIO, encoding="utf-8") as f:
        return json.load(f)


class ImportTest(unittest.TestCase):
    def test_import_needs_neither_torch_nor_pandas_nor_the_extension(self):
        code = ("import sys\n"
                "for m in ('torch', 'pandas', 'faultline._core'): sys.modules[m] = None\n"
                "import faultline\n"
                "assert callable(faultline.simulate) and callable(faultline.sweep)\n"
                "assert issubclass(faultline.InputError, (faultline.Error, ValueError))\n"
                "assert 'faultline.job' not in sys.modules\n"
                "try:\n"
                "    faultline.Job\n"
                "except ImportError:\n"
                "    print('lazy')\n")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=False)
        self.assertEqual((p.returncode, p.stdout.strip()), (0, "lazy"), p.stderr)

    def test_lazy_names_are_the_modules_own(self):
        import faultline.replicas
        self.assertIs(faultline.ReplicaGroup, faultline.replicas.ReplicaGroup)
        import faultline.policy
        for name in faultline.policy.__all__:
            self.assertIs(getattr(faultline, name), getattr(faultline.policy, name), name)
        with self.assertRaises(AttributeError):
            faultline.no_such_name  # pylint: disable=pointless-statement


class SimulateTest(unittest.TestCase):
    def test_same_seed_same_json_and_replicas_csv_as_the_cli(self):
        r = faultline.simulate(SCENARIO, replicas=5, seed=7)
        self.assertEqual(without_wall(r.json), cli_json("sim", "run", SCENARIO, "--replicas",
                                                        5, "--seed", 7))
        with tempfile.TemporaryDirectory() as tmp:
            cli("sim", "run", SCENARIO, "--replicas", 5, "--seed", 7, "--quiet", "--out", tmp)
            assert_frame_equal(r.replicas, pd.read_csv(os.path.join(tmp, "replicas.csv")))
        self.assertEqual((r.ettr.mean, r.ettr.ci95), (r.json["ettr"]["mean"],
                                                      r.json["ettr"]["ci95"]))
        self.assertEqual((r["replicas"], len(r.replicas)), (5, 5))
        self.assertAlmostEqual(r.replicas.ettr.mean(), r.ettr.mean, places=12)
        self.assertEqual(r.breakdown_s.productive, r.json["breakdown_s"]["productive"])
        self.assertIsNone(r.incidents)
        self.assertIsNone(r.timeline)
        self.assertIsNone(r.decisions)

    def test_forked_replicas_give_the_same_result(self):
        one = faultline.simulate(SCENARIO, replicas=4)
        two = faultline.simulate(SCENARIO, replicas=4, jobs=2)
        self.assertEqual(without_wall(one.json), without_wall(two.json))
        assert_frame_equal(one.replicas, two.replicas)

    def test_a_dict_scenario_is_the_file(self):
        d = scenario_dict()
        r = faultline.simulate(d, replicas=3)
        want = cli_json("sim", "run", SCENARIO, "--replicas", 3)
        self.assertEqual(r.scenario, "scenario")  # the name of the file the dict was put in
        want.pop("scenario")
        self.assertEqual({k: v for k, v in without_wall(r.json).items() if k != "scenario"},
                         want)
        self.assertEqual(d, scenario_dict())

    def test_records_incidents_timeline_and_decisions_when_asked(self):
        r = faultline.simulate(SCENARIO, replicas=2, incidents=True, timeline_step_s=3600,
                               decisions=True)
        self.assertEqual(list(r.incidents.columns[:4]),
                         ["replica", "category", "at_s", "detected_s"])
        self.assertEqual(sorted(r.incidents.replica.unique()), [0, 1])
        self.assertEqual(len(r.incidents), round(r["incidents"].per_replica * 2))
        evicted = r.incidents.evicted.explode().dropna()
        self.assertTrue(len(evicted) > 0 and all(isinstance(m, int) for m in evicted))
        self.assertIn([], list(r.incidents.machines))  # a job-wide fault names no machine
        self.assertEqual(list(r.timeline.columns[:3]), ["replica", "t_h", "ettr_cumulative"])
        self.assertAlmostEqual(r.timeline.t_h.iloc[0], 1.0)
        self.assertTrue(r.decisions.startswith("replica 0 "), r.decisions[:80])

    def test_stack_runs_as_compare_runs_it(self):
        c = faultline.compare(SCENARIO, STACKS, replicas=3)
        for label in STACKS[1:]:
            r = faultline.simulate(SCENARIO, replicas=3, stack=label)
            self.assertEqual(r.ettr.mean, c.table.loc[label, "ettr_mean"], label)
            assert_frame_equal(r.replicas, c.results[label].replicas)


class ErrorTest(unittest.TestCase):
    def test_a_bad_set_raises_input_error_with_the_cli_line(self):
        with self.assertRaises(faultline.InputError) as cm:
            faultline.simulate(scenario_dict(), replicas=2, set={"job.pp": "x"})
        self.assertEqual(str(cm.exception), '<dict>: $.job.pp: expected an integer, got a '
                                            'string "x"')
        self.assertEqual(cm.exception.exit_code, 2)
        self.assertIsInstance(cm.exception, ValueError)
        with self.assertRaises(faultline.InputError) as cm:
            faultline.simulate(SCENARIO, replicas=2, set={"job.nope": 1})
        self.assertTrue(str(cm.exception).startswith(SCENARIO + ": $.job.nope: unknown key"),
                        str(cm.exception))

    def test_exit_code_1_is_error_and_set_values_are_json(self):
        core = mock.Mock()
        core.command.return_value = (1, "", "progress\nfaultline: a.json: disk full\n")
        sets = {"policy.params.checkpoint": "remote", "job.pp": 8, "x.y": "true",
                "x.z": [1, "a b"]}
        with mock.patch.object(faultline.sim, "_core", return_value=core):
            with self.assertRaises(faultline.Error) as cm:
                faultline.simulate(SCENARIO, replicas=1, set=sets)
        self.assertNotIsInstance(cm.exception, faultline.InputError)
        self.assertEqual((str(cm.exception), cm.exception.exit_code), ("a.json: disk full", 1))
        args = core.command.call_args[0][0]
        self.assertEqual(args[:3], ["sim", "run", SCENARIO])
        got = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
        self.assertEqual(got, ["policy.params.checkpoint=remote", "job.pp=8", 'x.y="true"',
                               'x.z=[1, "a b"]'])

    def test_an_unknown_stack_is_input_error(self):
        with self.assertRaises(faultline.InputError) as cm:
            faultline.compare(SCENARIO, ["byterobust", "nope"], replicas=2)
        self.assertIn('$.policy.stack: expected a registered stack', str(cm.exception))

    def test_bad_python_arguments_raise_before_the_simulator_runs(self):
        bad = [(TypeError, dict(replicas="3")), (TypeError, dict(replicas=True)),
               (ValueError, dict(replicas=0)), (TypeError, dict(jobs=1.5)),
               (ValueError, dict(seed=-1)), (TypeError, dict(set=["job.pp=4"])),
               (TypeError, dict(set={4: 4})), (ValueError, dict(set={"job.pp=4": 4})),
               (ValueError, dict(set={"job.pp": float("nan")})),
               (TypeError, dict(set={"job.pp": object()})), (TypeError, dict(nope=1)),
               (ValueError, dict(stack="a,b")), (ValueError, dict(timeline_step_s=0)),
               (ValueError, dict(timeline_step_s=0.5))]
        with mock.patch.object(faultline.sim, "_core", side_effect=AssertionError("ran")):
            for error, kwargs in bad:
                with self.assertRaises(error, msg=str(kwargs)) as cm:
                    faultline.simulate(SCENARIO, **kwargs)
                self.assertNotIsInstance(cm.exception, faultline.Error, kwargs)
            with self.assertRaises(TypeError):
                faultline.simulate(42)
            with self.assertRaises(FileNotFoundError):
                faultline.simulate(os.path.join(ROOT, "scenarios", "no-such.json"))
            with self.assertRaises(TypeError):
                faultline.compare(SCENARIO, "byterobust,requeue")
            with self.assertRaises(ValueError):
                faultline.sweep(SCENARIO, {"job.pp": []})
            with self.assertRaises(ValueError):
                faultline.sweep(SCENARIO)


class CompareTest(unittest.TestCase):
    def test_table_replicas_and_paired_differences(self):
        c = faultline.compare(SCENARIO, STACKS, replicas=4)
        self.assertEqual(without_wall(c.json), cli_json("sim", "compare", SCENARIO, "--stacks",
                                                        ",".join(STACKS), "--replicas", 4))
        self.assertEqual(list(c.table.index), STACKS)
        self.assertEqual(c.baseline, "byterobust")
        self.assertTrue(pd.isna(c.table.loc["byterobust", "diff_mean"]))
        for s in c.stacks[1:]:
            row = c.table.loc[s.label]
            self.assertEqual((row.diff_mean, row.diff_lo, row.diff_hi),
                             (s.vs_baseline.mean, *s.vs_baseline.ci95))
            self.assertAlmostEqual(c.paired[s.label].mean(), s.vs_baseline.mean, places=12)
            self.assertEqual(row.ettr_mean, s.ettr.mean)
        self.assertEqual(list(c.replicas.columns[:3]), ["stack_name", "replica", "ettr"])
        self.assertEqual(list(c.replicas.stack_name.unique()), STACKS)
        self.assertEqual(len(c.replicas), 12)
        self.assertEqual(list(c.paired.columns), STACKS[1:])
        self.assertEqual(list(c.paired.index), [0, 1, 2, 3])
        self.assertIsNone(c.incidents)


class SweepTest(unittest.TestCase):
    def test_table_is_the_clis_csv(self):
        s = faultline.sweep(SCENARIO, GRID, replicas=3)
        args = [a for k, v in GRID.items() for a in ("--grid", "%s=%s" % (k, ",".join(
            str(x) for x in v)))]
        want = pd.read_csv(io.StringIO(cli(
            "sim", "sweep", SCENARIO, *args, "--replicas", 3, "--format", "csv", "--quiet")),
            float_precision="round_trip")
        assert_frame_equal(s.table, want, check_dtype=False)
        self.assertEqual(len(s.table), 4)
        self.assertEqual(list(s.table.columns[:4]), list(GRID) + ["replicas", "ettr_mean"])

    def test_a_point_is_sim_run_with_its_sets_and_zip_moves_together(self):
        s = faultline.sweep(scenario_dict(), zip=GRID, replicas=3)
        self.assertEqual(s.scenario, "<dict>")
        self.assertEqual(len(s.table), 2)
        row = s.table.iloc[1]
        r = faultline.simulate(SCENARIO, replicas=3, set={k: row[k] for k in GRID})
        self.assertEqual(r.ettr.mean, row.ettr_mean)
        self.assertEqual(r.policy_modules.checkpoint.name, "remote")

    def test_baseline_table_is_the_clis_csv_and_pairs_as_compare_does(self):
        base = {"checkpoint_interval_s": 1800, "policy.params.checkpoint": "remote"}
        s = faultline.sweep(SCENARIO, GRID, replicas=3, baseline=base)
        args = [a for k, v in GRID.items() for a in ("--grid", "%s=%s" % (k, ",".join(
            str(x) for x in v)))]
        want = pd.read_csv(io.StringIO(cli(
            "sim", "sweep", SCENARIO, *args, "--replicas", 3, "--format", "csv", "--quiet",
            "--baseline", "checkpoint_interval_s=1800+policy.params.checkpoint=remote")),
            float_precision="round_trip")
        assert_frame_equal(s.table, want, check_dtype=False)
        self.assertEqual(s.baseline.index, 3)
        self.assertEqual(s.table.ties[3], 1.0)
        self.assertEqual(s.points[0].vs_baseline.mean, s.table.ettr_diff_mean[0])
        with self.assertRaises(faultline.InputError):
            faultline.sweep(SCENARIO, GRID, replicas=1, baseline={"checkpoint_interval_s": 7})

    def test_progress_reaches_every_point_and_replica_and_never_stdout(self):
        seen = []
        s = faultline.sweep(SCENARIO, GRID, replicas=3, progress=seen.append)
        self.assertTrue(seen)
        last = seen[-1]
        self.assertIsInstance(last, faultline.sim.Progress)
        self.assertEqual((last.replicas_done, last.replicas_total), (12, 12))
        self.assertEqual((last.points_done, last.points_total), (4, 4))
        self.assertEqual([p.replicas_done for p in seen], sorted(p.replicas_done for p in seen))
        self.assertEqual(len(s.table), 4)
        # The bar without tqdm: a line redrawn on stderr, ending at every point.
        err = io.StringIO()
        with mock.patch.dict(sys.modules, {"tqdm": None, "tqdm.auto": None}), \
                mock.patch.object(sys, "stderr", err):
            faultline.sweep(SCENARIO, GRID, replicas=2, progress=True)
        self.assertIn("4/4 points, 8/8 replicas", err.getvalue())
        # Not a terminal, no notebook: no bar unless asked.
        err = io.StringIO()
        with mock.patch.object(sys, "stderr", err):
            faultline.sweep(SCENARIO, GRID, replicas=2)
        self.assertEqual(err.getvalue(), "")
        with self.assertRaises(TypeError):
            faultline.sweep(SCENARIO, GRID, replicas=2, progress="yes")


if __name__ == "__main__":
    unittest.main()
