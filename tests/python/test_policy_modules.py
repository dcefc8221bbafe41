"""Policy modules written in Python (faultline.policy, plugins/python_modules.cc): registered
from a script and from a --plugin file, called by the simulator, and their failures (an
exception, a wrong answer, a missed deadline, a refused declaration) reported in one line
naming the module: faultline.InputError from Python, exit 2 from the faultline program.

Needs the extension module faultline._core (the build's python/ on PYTHONPATH) and the
faultline program (FAULTLINE_BIN, which the ctest sets)."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

import faultline

ROOT = Path(__file__).resolve().parents[2]
DENSE = str(ROOT / "scenarios" / "byterobust-dense-9600.json")
# Silent NaNs made frequent and mostly invisible to the bit-wise test: localization runs.
SILENT = {"faults.categories.nan.rate_per_machine_day": 0.0001,
          "faults.categories.nan.recall.bitwise": 0.2}
BIN = os.environ.get("FAULTLINE_BIN", str(ROOT.parent / "build" / "bin" / "faultline"))

MODULE = '''
import faultline

class Probe(faultline.Localizer):
    info = faultline.Info("{name}", summary="test module",
                          params=[faultline.Param("{name}_x", "a knob", "count", 1, 0, 9)])
    deadline_s = {deadline}

    def begin(self, why, view):
        {begin}

    def answer(self, outcome, view):
        return faultline.Located([], False, "replay", "nothing")

faultline.register(Probe)
'''


def module_file(directory, name, begin, deadline=10):
    path = Path(directory) / (name.replace("-", "_") + ".py")
    path.write_text(MODULE.format(name=name, begin=begin, deadline=deadline))
    return str(path)


def run_cli(*args):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=120)


def sets(extra):
    out = []
    for k, v in {**SILENT, **extra}.items():
        out += ["--set", "%s=%s" % (k, json.dumps(v))]
    return out


class FailuresInTheSimulator(unittest.TestCase):
    """Each failure: exit 2 and one line naming the module, the file and the call."""

    def expect_refusal(self, name, begin, want, deadline=10):
        with tempfile.TemporaryDirectory() as d:
            path = module_file(d, name, begin, deadline)
            r = run_cli("sim", "run", DENSE, "--plugin", path, "--replicas", "2", "--quiet",
                        *sets({"policy.params.localization": name}))
        self.assertEqual(r.returncode, 2, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("policy module localization/%s (%s.py): " % (name, name.replace("-", "_")),
                      lines[0])
        self.assertIn(want, lines[0])

    def test_an_exception_names_the_call_and_the_line(self):
        self.expect_refusal("raises", "raise ValueError('no luck')",
                            "begin() raised ValueError: no luck (raises.py:10)")

    def test_a_wrong_answer_type(self):
        self.expect_refusal("wrong-type", "return 42",
                            "begin() answered int, expected RunProbe, RunReplay or Located")

    def test_an_answer_out_of_range(self):
        self.expect_refusal("out-of-range", "return faultline.Located([10**6])",
                            "begin() answered Located with slot 1000000 outside [0, 1200)")

    def test_a_hang_meets_the_deadline(self):
        self.expect_refusal("hangs", "while True: pass",
                            "begin() did not return within its deadline_s (0.3 s)", deadline=0.3)

    def test_a_call_blocked_in_the_system_meets_the_deadline(self):
        self.expect_refusal("sleeps", "import time; time.sleep(60)",
                            "begin() did not return within its deadline_s (0.3 s)", deadline=0.3)

    def test_a_view_kept_past_its_call(self):
        self.expect_refusal("kept-view", "old = getattr(Probe, 'v', None); Probe.v = view; "
                            "return faultline.RunReplay([]) if old is None "
                            "else faultline.Located([old.slots()])",
                            "begin() raised ValueError: a ClusterView is valid only during the "
                            "call that got it")


class Interrupt(unittest.TestCase):
    """Ctrl-C (a notebook's interrupt) during simulate: KeyboardInterrupt in the caller, and
    the simulator's processes gone."""

    def test_ctrl_c_stops_the_run(self):
        import signal
        import time
        with tempfile.TemporaryDirectory() as d:
            script = Path(d) / "long_study.py"
            script.write_text(textwrap.dedent("""
                import faultline
                try:
                    faultline.simulate(%r, replicas=100000)
                    print("finished")
                except KeyboardInterrupt:
                    print("interrupted")
                """ % DENSE))
            p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                                 text=True, env=dict(os.environ),
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            time.sleep(2)
            p.send_signal(signal.SIGINT)
            try:
                out = p.communicate(timeout=60)[0]
            except subprocess.TimeoutExpired:
                subprocess.run(["pkill", "-9", "-f", str(script)])
                raise
            time.sleep(0.2)
            left = subprocess.run(["pgrep", "-f", str(script)], capture_output=True, text=True)
        self.assertEqual(out.strip(), "interrupted")
        self.assertEqual(left.stdout.strip(), "", "processes of the run are left")


class Refusals(unittest.TestCase):
    """A declaration that does not hold is refused at registration, naming the field."""

    def refused(self, source, want):
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "bad.py"
            path.write_text(textwrap.dedent(source))
            r = run_cli("policies", "--plugin", str(path))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        self.assertIn(want, r.stderr)

    def test_a_parameter_default_outside_its_range(self):
        self.refused('''
            import faultline
            class B(faultline.StopVerdict):
                info = faultline.Info("b", params=[faultline.Param("k", "h", "s", 5, 0, 1)])
                def judge(self, identical, runs): return "carry_on"
            faultline.register(B)
            ''', "bad.py: class B.info.params[0]: expected min <= default <= max")

    def test_a_missing_method(self):
        self.refused('''
            import faultline
            class B(faultline.Localizer):
                info = faultline.Info("b")
                def begin(self, why, view): return faultline.Located()
            faultline.register(B)
            ''', "bad.py: class B: a Localizer must define answer()")

    def test_a_name_taken_by_a_built_in_module(self):
        self.refused('''
            import faultline
            class B(faultline.StopVerdict):
                info = faultline.Info("identical")
                def judge(self, identical, runs): return "carry_on"
            faultline.register(B)
            ''', "already registered")

    def test_a_file_that_registers_nothing(self):
        self.refused("x = 1\n", "bad.py: registers no module")

    def test_a_file_that_raises(self):
        self.refused("import no_such_module_here\n",
                     "bad.py: running the file: exec() raised ModuleNotFoundError")


class FromPython(unittest.TestCase):
    """faultline.register from a script: the same module in this process's interpreter."""

    @classmethod
    def setUpClass(cls):
        class AlwaysStop(faultline.StopVerdict):
            info = faultline.Info("py-always-stop", summary="stops at the first interruption")

            def judge(self, identical, runs_without_progress):
                return "stop"

        class BadVerdict(faultline.StopVerdict):
            info = faultline.Info("py-bad-verdict")

            def judge(self, identical, runs_without_progress):
                return "maybe"

        faultline.register(AlwaysStop)
        faultline.register(BadVerdict)

    def test_a_registered_module_decides(self):
        base = faultline.simulate(DENSE, replicas=2, seed=3)
        stop = faultline.simulate(DENSE, replicas=2, seed=3,
                                  set={"policy.params.verdict": "py-always-stop"})
        self.assertEqual(stop.json["policy_modules"]["verdict"],
                         {"name": "py-always-stop", "version": "1"})
        self.assertNotEqual(stop.ettr.mean, base.ettr.mean)

    def test_a_wrong_answer_is_an_input_error(self):
        with self.assertRaises(faultline.InputError) as e:
            faultline.simulate(DENSE, replicas=2, set={"policy.params.verdict": "py-bad-verdict"})
        self.assertIn("policy module verdict/py-bad-verdict (faultline.register): judge() "
                      "answered verdict 'maybe', expected one of carry_on, roll_back, stop",
                      str(e.exception))
        self.assertEqual(e.exception.exit_code, 2)

    def test_forked_replicas_with_other_threads_running(self):
        # As under a notebook kernel: threads of the host's own (heartbeat, I/O) run while the
        # simulator forks its replicas, which call a Python module; the result is the same
        # whatever the parallelism, and the host's threads live on.
        import threading
        ticks, stop = [], threading.Event()

        def beat():
            while not stop.is_set():
                ticks.append(1)
                stop.wait(0.001)

        t = threading.Thread(target=beat, daemon=True)
        t.start()
        try:
            faultline.load_plugin(str(ROOT / "examples" / "py-localizer" / "pp_group_replay.py"))
            kw = dict(replicas=6, seed=5,
                      set={**SILENT, "policy.params.localization": "pp-group-replay"})
            one = faultline.simulate(DENSE, jobs=1, **kw)
            two = faultline.simulate(DENSE, jobs=2, **kw)
        finally:
            before = len(ticks)
            stop.wait(0.05)
            alive = t.is_alive() and len(ticks) > before
            stop.set()
        self.assertTrue(alive, "the host's thread stopped")
        import pandas.testing
        pandas.testing.assert_frame_equal(one.replicas, two.replicas)
        self.assertEqual(one.json["policy_modules"]["localization"]["name"], "pp-group-replay")

    def test_a_deadline_from_python(self):
        class Sleeps(faultline.StopVerdict):
            info = faultline.Info("py-sleeps")
            deadline_s = 0.3

            def judge(self, identical, runs_without_progress):
                import time
                time.sleep(60)

        faultline.register(Sleeps)
        with self.assertRaises(faultline.InputError) as e:
            faultline.simulate(DENSE, replicas=2, set={"policy.params.verdict": "py-sleeps"})
        self.assertIn("policy module verdict/py-sleeps (faultline.register): judge() did not "
                      "return within its deadline_s (0.3 s)", str(e.exception))

    def test_registering_a_taken_name_is_refused(self):
        class Again(faultline.StopVerdict):
            info = faultline.Info("py-always-stop")

            def judge(self, identical, runs_without_progress):
                return "stop"

        with self.assertRaises(faultline.InputError) as e:
            faultline.register(Again)
        self.assertIn("already registered", str(e.exception))


if __name__ == "__main__":
    unittest.main()
