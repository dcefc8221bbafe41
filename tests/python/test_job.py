"""faultline.Job: the no-op standalone mode, checkpoints, injected faults, and the restore
agreement of a 2-process gloo group on loopback."""

import gc
import json
import math
import multiprocessing
import os
import signal
import socket
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

import faultline
from faultline.checkpoint import CheckpointStore


def make_model(seed=3):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def train_step(model, optimizer, step):
    g = torch.Generator().manual_seed(step)
    x = torch.randn(16, 4, generator=g)
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), x.sum(1, keepdim=True))
    loss.backward()
    optimizer.step()
    return loss


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Harness:
    """A Job under a fake agent: env of a launch, reports through a pipe."""

    def __init__(self, workdir, rank=0, world_size=1, ckpt_every=2, model=None, fault_file=None):
        self.r, self.w = os.pipe()
        os.set_blocking(self.r, False)
        self.env = {"FAULTLINE_REPORT_FD": str(self.w), "RANK": str(rank),
                    "WORLD_SIZE": str(world_size), "LOCAL_RANK": "0",
                    "FAULTLINE_CKPT_DIR": os.path.join(workdir, "ckpt"),
                    "FAULTLINE_CKPT_EVERY": str(ckpt_every),
                    "FAULTLINE_FAULT_FILE": os.path.join(workdir, "faults")
                    if fault_file is None else fault_file}
        self.model = model or make_model()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
        self.job = faultline.Job(self.model, self.optimizer, env=self.env)

    def run(self, first, last):
        for step in range(first, last + 1):
            self.job.begin_step(step)
            loss = train_step(self.model, self.optimizer, step)
            self.job.end_step(step, loss)

    def reports(self):
        try:
            data = os.read(self.r, 1 << 20).decode()
        except BlockingIOError:
            return []
        return [json.loads(l, parse_constant=lambda t: 1 / 0) for l in data.splitlines()]

    def close(self):
        os.close(self.r)
        os.close(self.w)


class StandaloneTest(unittest.TestCase):
    def test_without_a_report_fd_every_call_is_a_no_op(self):
        with tempfile.TemporaryDirectory() as d:
            env = {"RANK": "0", "FAULTLINE_CKPT_DIR": d,
                   "FAULTLINE_FAULT_FILE": os.path.join(d, "faults")}
            with open(env["FAULTLINE_FAULT_FILE"], "w") as f:
                f.write("crash should not fire\n")
            model = make_model()
            opt = torch.optim.SGD(model.parameters(), lr=0.1)
            job = faultline.Job(model, opt, env=env)
            self.assertFalse(job.active)
            self.assertEqual(job.restore(), 0)
            for step in range(1, 11):
                job.begin_step(step)
                job.end_step(step, train_step(model, opt, step))
            self.assertEqual(os.listdir(d), ["faults"])


class JobTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def test_fresh_start_reports_checkpoints_and_resumes_bit_exactly(self):
        h = Harness(self.dir.name, ckpt_every=3)
        self.assertEqual(h.job.restore(), 0)
        h.run(1, 10)
        reps = h.reports()
        self.assertEqual(reps[0], {"type": "started", "rank": 0, "step": 0, "restored_from": "init",
                                   "pid": os.getpid(),
                                   "faults": ["crash", "hang", "nan", "slow", "sdc"]})
        steps = [r for r in reps if r["type"] == "step"]
        self.assertEqual([r["step"] for r in steps], list(range(1, 11)))
        self.assertEqual([r["step"] for r in reps if r["type"] == "checkpoint"], [3, 6, 9])
        self.assertEqual(steps[-1]["checkpoint_step"], 9)
        self.assertTrue(all(r["step_time_s"] >= 0 and math.isfinite(r["grad_norm"]) for r in steps))
        self.assertEqual(CheckpointStore(h.env["FAULTLINE_CKPT_DIR"], 0).steps(), [3, 6, 9])
        h.run(11, 11)
        expected = [p.clone() for p in h.model.parameters()]
        h.close()
        # A restarted rank (different initial weights) continues from step 9.
        again = Harness(self.dir.name, ckpt_every=3, model=make_model(seed=99))
        self.assertEqual(again.job.restore(), 9)
        self.assertEqual(again.reports()[0]["restored_from"], "local")
        again.run(10, 11)
        for a, b in zip(again.model.parameters(), expected):
            self.assertTrue(torch.equal(a, b))
        again.close()

    def test_injected_nan_poisons_the_gradient_and_is_never_checkpointed(self):
        h = Harness(self.dir.name, ckpt_every=1)
        h.job.restore()
        h.run(1, 2)
        with open(h.env["FAULTLINE_FAULT_FILE"], "w") as f:
            f.write("nan\n")
        h.run(3, 4)
        steps = {r["step"]: r for r in h.reports() if r["type"] == "step"}
        self.assertIs(steps[3]["grad_norm_nan"], True)   # the poisoned step's gradient
        self.assertTrue(math.isfinite(steps[3]["loss"]))  # computed before the poison
        self.assertIs(steps[4]["loss_nan"], True)         # the weights are NaN now
        self.assertEqual(steps[4]["checkpoint_step"], 2)
        with open(h.env["FAULTLINE_FAULT_FILE"]) as f:
            self.assertEqual(f.read(), "")  # consumed
        h.close()

    def test_every_kind_is_acknowledged_by_its_id_before_it_acts(self):
        h = Harness(self.dir.name, ckpt_every=0)
        h.job.restore()
        with open(h.env["FAULTLINE_FAULT_FILE"], "w") as f:
            f.write("id=a1 nan\nid=a2 slow 2\nid=a3 sdc after=5\n")
        h.run(1, 3)
        reps = h.reports()
        self.assertEqual(reps[0]["faults"], ["crash", "hang", "nan", "slow", "sdc"])
        acks = [r for r in reps if r["type"] == "fault"]
        self.assertEqual(acks, [{"type": "fault", "rank": 0, "id": i, "fault": k}
                                for i, k in (("a1", "nan"), ("a2", "slow"), ("a3", "sdc"))])
        first_step = next(i for i, r in enumerate(reps) if r["type"] == "step")
        self.assertLess(reps.index(acks[-1]), first_step)
        h.close()

    def test_sdc_flips_a_bit_from_step_n_and_the_exploded_step_is_not_saved(self):
        h = Harness(self.dir.name, ckpt_every=1)
        h.job.restore()
        with open(h.env["FAULTLINE_FAULT_FILE"], "w") as f:
            f.write("sdc after=3\n")
        h.run(1, 4)
        steps = [r for r in h.reports() if r["type"] == "step"]
        norms = [r.get("grad_norm") for r in steps]
        self.assertLess(norms[2], 100)
        self.assertTrue(norms[3] is None or norms[3] > 1e6, norms)  # the 4th computed step
        self.assertEqual(steps[3]["checkpoint_step"], 3)
        h.close()

    def test_slow_stretches_the_step_by_its_factor(self):
        h = Harness(self.dir.name, ckpt_every=0)
        h.job.restore()
        with open(h.env["FAULTLINE_FAULT_FILE"], "w") as f:
            f.write("slow 4\n")
        h.job.begin_step(1)
        time.sleep(0.1)  # the step's work
        h.job.end_step(1, 0.5)
        step = [r for r in h.reports() if r["type"] == "step"][0]
        self.assertGreaterEqual(step["step_time_s"], 0.4)
        self.assertLess(step["step_time_s"], 2.0)
        h.close()

    def test_hang_blocks_the_rank_and_its_stack_dump_says_where(self):
        import subprocess
        import sys
        h = Harness(self.dir.name)
        with open(h.env["FAULTLINE_FAULT_FILE"], "w") as f:
            f.write("hang\n")
        # The agent's stack descriptor (a memfd in append mode there; a file here).
        dump = os.path.join(self.dir.name, "stacks")
        stack_fd = os.open(dump, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        env = dict(os.environ, **h.env, FAULTLINE_STACK_FD=str(stack_fd))
        code = ("import faultline, torch; j = faultline.Job(torch.nn.Linear(2, 1)); "
                "j.restore(); j.begin_step(1); print('not reached')")
        p = subprocess.Popen([sys.executable, "-c", code], env=env, pass_fds=(h.w, stack_fd),
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        # Consumed before it acts (a restart runs on): awaited, since importing torch takes
        # seconds on a loaded machine; then the rank stays blocked.
        deadline = time.monotonic() + 120
        while True:
            with open(h.env["FAULTLINE_FAULT_FILE"]) as f:
                if f.read() == "":
                    break
            self.assertIsNone(p.poll(), "the rank exited before it took the hang")
            self.assertLess(time.monotonic(), deadline, "the rank never took the hang")
            time.sleep(0.05)
        with self.assertRaises(subprocess.TimeoutExpired):
            p.wait(timeout=2)
        # The started report names the signal; on it the hung rank writes its Python stacks,
        # its main thread's blocked in the hang (the agent's capture reads this, realexec/
        # stack_capture.h), and it keeps hanging.
        started = h.reports()[0]
        self.assertEqual((started["type"], started.get("stack_signal")), ("started", "SIGUSR2"))
        os.kill(p.pid, signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while True:
            with open(dump) as f:
                text = f.read()
            if "<module>" in text:
                break
            self.assertLess(time.monotonic(), deadline, "no stack dump: %r" % text)
            time.sleep(0.05)
        main = [b for b in text.split("\n\n") if "<module>" in b][0].splitlines()
        functions = [line.rsplit(" in ", 1)[1] for line in main[1:]]
        self.assertEqual(functions[-3:], ["_fire", "begin_step", "<module>"], text)
        self.assertIn("wait", functions[0], text)
        self.assertIsNone(p.poll(), "the dump ended the hung rank")
        p.kill()
        self.assertEqual(p.communicate()[0], b"")
        os.close(stack_fd)
        h.close()

    def test_without_the_agents_stack_descriptor_no_stack_signal_is_announced(self):
        h = Harness(self.dir.name)
        h.job.restore()
        self.assertNotIn("stack_signal", h.reports()[0])
        h.close()

    def test_crash_reports_fatal_prints_the_signature_and_exits_1(self):
        import subprocess
        import sys
        h = Harness(self.dir.name)
        with open(h.env["FAULTLINE_FAULT_FILE"], "w") as f:
            f.write("crash CUDA error: an illegal memory access was encountered\n")
        code = ("import faultline, torch; m = torch.nn.Linear(2, 1); "
                "j = faultline.Job(m); j.restore(); j.begin_step(1); print('not reached')")
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **h.env),
                             pass_fds=(h.w,), stdin=subprocess.DEVNULL, capture_output=True,
                             text=True)
        self.assertEqual(out.returncode, 1, out.stderr)
        self.assertEqual(out.stderr.strip().splitlines()[-1],
                         "CUDA error: an illegal memory access was encountered")
        self.assertNotIn("not reached", out.stdout)
        self.assertEqual([r["type"] for r in h.reports()], ["started", "fatal"])

    def test_without_a_fault_file_the_started_report_lists_no_fault_kind(self):
        # The agent refuses at once, in one line, a kind the job's started report does not
        # list; a job that reads no fault file (FAULTLINE_FAULT_FILE blank, e.g. cleared by
        # job.env) takes none, as faultline.replicas and faultline-trainjob say.
        h = Harness(self.dir.name, fault_file="")
        h.job.restore()
        started = h.reports()[0]
        self.assertEqual(started["type"], "started")
        self.assertNotIn("faults", started)
        h.close()

    def test_a_crash_is_acknowledged_before_the_rank_dies(self):
        import subprocess
        import sys
        h = Harness(self.dir.name)
        with open(h.env["FAULTLINE_FAULT_FILE"], "w") as f:
            f.write("id=c9 crash injected crash\n")
        code = ("import faultline, torch; m = torch.nn.Linear(2, 1); "
                "j = faultline.Job(m); j.restore(); j.begin_step(1)")
        out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **h.env),
                             pass_fds=(h.w,), stdin=subprocess.DEVNULL, capture_output=True,
                             text=True)
        self.assertEqual(out.returncode, 1, out.stderr)
        reps = h.reports()
        self.assertEqual([r["type"] for r in reps], ["started", "fault", "fatal"])
        self.assertEqual((reps[1]["id"], reps[1]["fault"]), ("c9", "crash"))
        h.close()


class InPlaceOptInTest(unittest.TestCase):
    """recover() acts only for a job that opts in (rebuild=) under a launch that re-forms in
    place (FAULTLINE_REFORM_FILE, the config's job.in_place): otherwise the error goes on as
    it would without faultline."""

    def test_without_job_in_place_or_rebuild_the_error_is_raised_again(self):
        with tempfile.TemporaryDirectory() as d:
            for rebuild, reform in ((lambda: None, None), (None, os.path.join(d, "reform.0"))):
                h = Harness(d)
                if reform:
                    h.env["FAULTLINE_REFORM_FILE"] = reform
                job = faultline.Job(h.model, h.optimizer, env=h.env, rebuild=rebuild)
                error = RuntimeError("Connection closed by peer")
                with self.assertRaises(RuntimeError) as caught:
                    job.recover(error)
                self.assertIs(caught.exception, error)
                self.assertNotIn(b"holding", _pending(h.r))



def _directive(path, gen, port, rank=0):
    """The agent's re-form directive (realexec/agent: FAULTLINE_REFORM_FILE)."""
    with open(path + ".tmp", "w") as f:
        json.dump({"gen": gen, "master_addr": "127.0.0.1", "master_port": port, "rank": rank,
                   "rendezvous_key": ""}, f)
    os.replace(path + ".tmp", path)


def _broken_group_lifetime(workdir, ports, timeout_s, results):
    """A rank of a one-process gloo group through recover(); puts whether the broken DDP wrapper
    was alive once the failed step's loss was dropped, and after its group's timeout."""
    import datetime
    import weakref
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(ports[0]), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=timeout_s))
    net = make_model()
    wrap = lambda: torch.nn.parallel.DistributedDataParallel(  # noqa: E731
        net, find_unused_parameters=True)
    h = Harness(workdir, model=net)
    h.env["FAULTLINE_REFORM_FILE"] = os.path.join(workdir, "reform.0")
    job = faultline.Job(wrap(), h.optimizer, env=h.env, rebuild=wrap)
    job.restore()
    x = torch.randn(16, 4)
    # DDP's autograd graph holds its reducer, and the reducer the group: the loss of the step
    # that failed holds the broken group until the loop assigns the next step's loss.
    loss = torch.nn.functional.mse_loss(job.model(x), x.sum(1, keepdim=True))
    broken = weakref.ref(job.model)
    _directive(h.env["FAULTLINE_REFORM_FILE"], 1, ports[1])
    step = job.recover(RuntimeError("Connection closed by peer"))
    del loss
    gc.collect()
    kept = broken() is not None
    time.sleep(timeout_s + 2)  # past the broken group's timeout and recover's margin
    job.begin_step(step + 1)
    gc.collect()
    results.put((step, kept, broken() is not None))
    dist.destroy_process_group()


class BrokenGroupTest(unittest.TestCase):
    def test_a_broken_group_outlives_the_failed_step_and_goes_after_its_timeout(self):
        # A broken gloo group's destructor joins its worker threads, and a worker can wait in a
        # collective no peer will complete until the group's timeout (30 min by default):
        # dropped with the failed step's loss, on the training thread, it stalled the rank in
        # its next step while the others waited in the all-reduce (the live e2e test's flash
        # run, once in about six). recover() keeps the broken group until its timeout passed.
        with tempfile.TemporaryDirectory() as d:
            ctx = multiprocessing.get_context("spawn")
            results = ctx.Queue()
            p = ctx.Process(target=_broken_group_lifetime,
                            args=(d, (free_port(), free_port()), 1, results))
            p.start()
            step, kept, after_timeout = results.get(timeout=90)
            p.join(30)
            self.assertEqual(p.exitcode, 0)
            self.assertEqual(step, 0)
            self.assertTrue(kept, "the broken group went with the failed step's loss")
            self.assertFalse(after_timeout, "the broken group outlived its timeout")

def _pending(fd):
    """What the fake agent's end of the report pipe holds now."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return b""


def _agreement_rank(rank, port, workdirs, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    dist.init_process_group("gloo", rank=rank, world_size=2)
    h = Harness(workdirs[rank], rank=rank, world_size=2, model=make_model(seed=100 + rank))
    step = h.job.restore()
    results.put((rank, step, h.reports()[0]["restored_from"],
                 [p.detach().numpy().tobytes() for p in h.model.parameters()],
                 CheckpointStore(h.env["FAULTLINE_CKPT_DIR"], rank).steps()))
    dist.destroy_process_group()


class RestoreAgreementTest(unittest.TestCase):
    def test_a_standby_with_an_empty_disk_gets_the_newest_checkpoint_over_gloo(self):
        with tempfile.TemporaryDirectory() as d0, tempfile.TemporaryDirectory() as d1:
            # Rank 0's machine holds steps 2 and 4 (a single-process run); rank 1's is empty.
            h = Harness(d0, ckpt_every=2)
            h.job.restore()
            h.run(1, 4)
            saved = [p.detach().numpy().tobytes() for p in h.model.parameters()]
            h.close()
            ctx = multiprocessing.get_context("spawn")
            results = ctx.Queue()
            port = free_port()
            procs = [ctx.Process(target=_agreement_rank, args=(r, port, [d0, d1], results))
                     for r in (0, 1)]
            for p in procs:
                p.start()
            got = dict((r[0], r[1:]) for r in (results.get(timeout=60) for _ in procs))
            for p in procs:
                p.join(30)
                self.assertEqual(p.exitcode, 0)
            self.assertEqual(got[0][:2], (4, "local"))
            self.assertEqual(got[1][:2], (4, "peer"))
            self.assertEqual(got[1][3], [4])  # stored as its own: the next restart needs nobody
            self.assertEqual(got[0][2], saved)
            self.assertEqual(got[1][2], saved)


if __name__ == "__main__":
    unittest.main()
