"""Report encoding: strict JSON, non-finite numbers as null plus a boolean _nan flag."""

import faulthandler
import json
import math
import os
import signal
import socket
import tempfile
import threading
import time
import unittest

from faultline.report import Reporter, encode_line, register_stack_dump, step_report


def strict_loads(line):
    def refuse(token):
        raise ValueError("non-strict JSON token " + token)
    return json.loads(line, parse_constant=refuse)


class ReportTest(unittest.TestCase):
    def test_finite_numbers_are_plain(self):
        obj = strict_loads(encode_line(step_report(0, 3, 0.25, 1.5, 0.01, -1)))
        self.assertEqual(obj, {"type": "step", "rank": 0, "step": 3, "loss": 0.25, "grad_norm": 1.5,
                               "step_time_s": 0.01, "checkpoint_step": -1})

    def test_nan_and_infinity_become_null_with_a_boolean_flag(self):
        for bad in (math.nan, math.inf, -math.inf):
            line = encode_line(step_report(0, 3, bad, bad, 0.01, 2))
            self.assertNotIn(b"NaN", line)
            self.assertNotIn(b"Infinity", line)
            obj = strict_loads(line)
            self.assertIsNone(obj["loss"])
            self.assertIs(obj["loss_nan"], True)
            self.assertIsNone(obj["grad_norm"])
            self.assertIs(obj["grad_norm_nan"], True)

    def test_unknown_loss_is_left_out_not_nan(self):
        obj = strict_loads(encode_line(step_report(1, 3, None, None, 0.01, 2)))
        self.assertNotIn("loss", obj)
        self.assertNotIn("loss_nan", obj)

    def test_tensors_and_numpy_like_numbers_are_plain_floats(self):
        import torch
        report = step_report(0, 1, torch.tensor(0.5), torch.tensor(math.nan), 0, -1)
        obj = strict_loads(encode_line(report))
        self.assertEqual(obj["loss"], 0.5)
        self.assertIs(obj["grad_norm_nan"], True)

    def test_reporter_writes_one_line_per_report(self):
        r, w = os.pipe()
        rep = Reporter(w)
        rep.started(0, 10, "peer")
        rep.step(0, 11, math.nan, 2.0, 0.1, 10)
        rep.fatal(0, "boom")
        os.close(w)
        lines = os.read(r, 65536).decode().splitlines()
        os.close(r)
        self.assertEqual([strict_loads(l)["type"] for l in lines], ["started", "step", "fatal"])
        self.assertEqual(strict_loads(lines[0])["restored_from"], "peer")
        self.assertIs(strict_loads(lines[1])["loss_nan"], True)

    def test_a_gone_agent_stops_reporting_without_failing_the_job(self):
        r, w = os.pipe()
        os.close(r)
        rep = Reporter(w)
        rep.fatal(0, "x")  # EPIPE (Python ignores SIGPIPE)
        self.assertFalse(rep.active)
        os.close(w)

    def test_step_reports_never_block_while_the_agent_reads_nothing(self):
        # A stopped agent (the CI run's replica group dropped the replica whose agent was
        # SIGSTOPped for 15 s: its step reports filled the socket and its steps blocked).
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        rep = Reporter(b.fileno())
        done = threading.Event()

        def steps():
            for step in range(1, 100001):
                rep.step(0, step, 0.5, 1.0, 0.01, -1)
                if step % 10 == 0:  # a checkpoint report (the CI run's replica blocked on one)
                    rep.checkpoint(0, step)
            done.set()

        t = threading.Thread(target=steps, daemon=True)
        t.start()
        self.assertTrue(done.wait(60), "a step report blocked on a full socket")
        rep.fatal(0, "boom")  # waits for the reader; the newest step goes first
        a.setblocking(False)
        data = b""
        while not data.endswith(b'"boom"}\n'):
            try:
                data += a.recv(1 << 20)
            except BlockingIOError:
                time.sleep(0.01)
        lines = [strict_loads(l) for l in data.decode().splitlines()]  # every line whole
        steps_seen = [o["step"] for o in lines if o["type"] == "step"]
        self.assertLess(len(steps_seen), 100000, "nothing was coalesced")
        self.assertEqual(steps_seen, sorted(steps_seen))
        self.assertEqual(lines[-3], strict_loads(encode_line(step_report(0, 100000, 0.5, 1.0,
                                                                         0.01, -1))))
        self.assertEqual(lines[-2], {"type": "checkpoint", "rank": 0, "step": 100000})
        self.assertEqual(lines[-1]["type"], "fatal")
        ckpts = [o["step"] for o in lines if o["type"] == "checkpoint"]
        self.assertEqual(ckpts, sorted(ckpts))
        a.close()
        b.close()

    def test_no_descriptor_writes_nothing(self):
        rep = Reporter(None)
        rep.step(0, 1, 1.0, 1.0, 0.1, -1)
        self.assertFalse(rep.active)


def parked_in_a_known_function(ready, release):
    ready.set()
    release.wait()


class StackDumpTest(unittest.TestCase):
    """register_stack_dump: the Python stacks the agent's capture reads (realexec/agent/stack_capture.h)."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "stacks")
        # As the agent's memfd: append mode, so a dump after the agent emptied it starts at 0.
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)

    def tearDown(self):
        for signo in (signal.SIGUSR1, signal.SIGUSR2):
            faulthandler.unregister(signo)
            signal.signal(signo, signal.SIG_DFL)
        os.close(self.fd)
        self.dir.cleanup()

    def dump(self, signo):
        os.ftruncate(self.fd, 0)
        # To this thread: faulthandler's handler has written the dump when this returns.
        signal.pthread_kill(threading.get_ident(), signo)
        with open(self.path) as f:
            return f.read()

    def test_without_the_agents_descriptor_nothing_is_registered(self):
        for env in ({}, {"FAULTLINE_STACK_FD": ""}, {"FAULTLINE_STACK_FD": "x"},
                    {"FAULTLINE_STACK_FD": "987654"}):
            self.assertIsNone(register_stack_dump(env), env)
        self.assertEqual(signal.getsignal(signal.SIGUSR2), signal.SIG_DFL)

    def test_the_signal_writes_every_threads_python_stack(self):
        self.assertEqual(register_stack_dump({"FAULTLINE_STACK_FD": str(self.fd)}), "SIGUSR2")
        ready, release = threading.Event(), threading.Event()
        t = threading.Thread(target=parked_in_a_known_function, args=(ready, release))
        t.start()
        self.assertTrue(ready.wait(30))
        try:
            for _ in range(2):  # emptied between dumps: each starts at offset 0
                text = self.dump(signal.SIGUSR2)
                self.assertNotIn("\0", text)
                blocks = text.split("\n\n")
                self.assertEqual(len(blocks), 2, text)
                self.assertTrue(blocks[0].startswith("Thread 0x"), text)
                self.assertIn(" in parked_in_a_known_function\n", blocks[0])
                self.assertTrue(blocks[1].startswith("Current thread 0x"), text)
                self.assertIn(" in dump\n", blocks[1])
                self.assertIn(" in test_the_signal_writes_every_threads_python_stack\n",
                              blocks[1])
        finally:
            release.set()
            t.join()

    def test_a_signal_the_program_handles_itself_is_left_to_it(self):
        seen = []
        signal.signal(signal.SIGUSR2, lambda *a: seen.append("usr2"))
        self.assertEqual(register_stack_dump({"FAULTLINE_STACK_FD": str(self.fd)}), "SIGUSR1")
        self.assertIn(" in dump\n", self.dump(signal.SIGUSR1))
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        self.assertIsNone(register_stack_dump({"FAULTLINE_STACK_FD": str(self.fd)}))


if __name__ == "__main__":
    unittest.main()