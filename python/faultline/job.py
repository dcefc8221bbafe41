"""faultline.Job: the rank side of faultline live mode for a PyTorch training loop."""

import math
import os
import sys
import threading
import time

import torch

from faultline.checkpoint import Checkpointer, CheckpointStore, agree, load_into
from faultline.faults import KINDS, ONE_SHOT, FaultFile
from faultline.report import Reporter

DEFAULT_CKPT_EVERY = 10       # the reference job's default when the launch sets none


def _env_int(env, name, default):
    value = env.get(name, "")
    return int(value) if value.strip() else default


class Job:
    """Connects a data-parallel training loop to the faultline agent that launched it::

        job = faultline.Job(model, optimizer)   # after init_process_group and DDP(...)
        start = job.restore()                   # the step to continue after (0: fresh)
        for step in range(start + 1, steps + 1):
            job.begin_step(step)                # injected faults fire here
            ...                                 # forward, backward, optimizer.step()
            job.end_step(step, loss)            # report; checkpoint every FAULTLINE_CKPT_EVERY

    Under faultline (FAULTLINE_REPORT_FD set) it reports to the agent, checkpoints to
    FAULTLINE_CKPT_DIR, restores the newest checkpoint any rank holds, and obeys the fault
    file. Otherwise every method does nothing (restore() returns 0), so the same script runs
    standalone or under torchrun.

    model may be a DistributedDataParallel wrapper: checkpoints hold the inner module's state,
    loadable without DDP. Steps must be deterministic functions of the restored state and the
    step number (data indexed by step) for a resumed run to reproduce a fault-free one.
    """

    def __init__(self, model, optimizer=None, version=None, env=None):
        env = os.environ if env is None else env
        self.active = bool(env.get("FAULTLINE_REPORT_FD", "").strip())
        self.rank = _env_int(env, "RANK", 0)
        self.world_size = _env_int(env, "WORLD_SIZE", 1)
        self._model = getattr(model, "module", model)
        self._optimizer = optimizer
        self._version = version
        self._reporter = Reporter(int(env["FAULTLINE_REPORT_FD"]) if self.active else None)
        local_rank = _env_int(env, "LOCAL_RANK", self.rank)
        fault_path = env.get("FAULTLINE_FAULT_FILE") if self.active else None
        self._faults = FaultFile(fault_path or None, local_rank,
                                 _env_int(env, "LOCAL_WORLD_SIZE", 0))
        ckpt_dir = env.get("FAULTLINE_CKPT_DIR") if self.active else None
        self._store = CheckpointStore(ckpt_dir, self.rank) if ckpt_dir else None
        self._ckpt = Checkpointer(self._store,
                                  _env_int(env, "FAULTLINE_CKPT_EVERY", DEFAULT_CKPT_EVERY))
        self._computed_steps = 0    # by this process, for "sdc after=N"
        self._corrupt = None        # "nan" or "sdc": what the next local gradient gets
        self._step = 0
        self._t0 = time.monotonic()
        if self.active:
            self._hook_first_parameter()

    @property
    def checkpoint_step(self):
        """The newest step checkpointed or restored, -1 before any."""
        return self._ckpt.step

    # ----- restore -----

    def restore(self):
        """Agrees with every rank on the newest checkpoint anyone holds, loads it into the
        model and optimizer, and reports "started". Returns the restored step (0 when
        training starts from scratch). A collective when WORLD_SIZE > 1: every rank calls it."""
        if not self.active:
            return 0
        try:
            step, restored_from = self._restore()
        except Exception as e:  # any failure here leaves the rank useless: say why and go
            self._fatal("restore: %s" % e)
        # The kinds it takes: none without a fault file (the agent then refuses every
        # directive at once instead of waiting for an acknowledgement that cannot come).
        self._reporter.started(self.rank, step, restored_from, self._version,
                               KINDS if self._faults.enabled else None)
        return step

    def _restore(self):
        if self._store is None:
            return 0, "init"
        step, data, own = agree(self._store, self.rank, self.world_size)
        if step < 0:
            return 0, "init"
        if load_into(data, self._model, self._optimizer) != step:
            raise RuntimeError("checkpoint of step %d holds another step" % step)
        self._ckpt.step = step
        if not own:
            # Make the restore point local, so the next restart of this rank needs nobody.
            self._store.write(step, data)
        return step, "local" if own else "peer"

    # ----- steps -----

    def begin_step(self, step):
        """Call before the step's forward pass: fires the fault file's one-shot directives
        (crash exits, hang blocks forever, nan poisons this step's local gradient) and arms
        the persistent ones (sdc; slow acts in end_step). Each directive taken is acknowledged
        to the agent before it acts."""
        if not self.active:
            return
        self._step = step
        self._faults.poll()
        for d in list(self._faults.active):  # a copy: consume() re-reads the file
            if d.kind in ONE_SHOT and self._faults.consume(d):
                self._faults.acknowledge(d, self._reporter, self.rank)
                self._fire(d)
        self._faults.take_persistent(self._reporter, self.rank)
        sdc = self._faults.persistent("sdc")
        if sdc is not None and self._computed_steps >= sdc.after:
            self._corrupt = self._corrupt or "sdc"
        self._t0 = time.monotonic()

    def end_step(self, step, loss, grad_norm=None):
        """Call after optimizer.step(): stretches the step when the machine is "slow",
        checkpoints when step is a multiple of FAULTLINE_CKPT_EVERY (never a state that is
        not finite or whose gradient exploded, so recovery goes back to before the damage)
        and reports the step. loss: a number or 0-dim tensor (this rank's; rank 0's is the
        job's). grad_norm: default the norm of the parameters' current gradients."""
        if not self.active:
            return
        self._computed_steps += 1
        self._corrupt = None
        if grad_norm is None:
            grad_norm = self._gradient_norm()
        slow = self._faults.persistent("slow")
        if slow is not None and slow.factor > 1:
            time.sleep((slow.factor - 1) * (time.monotonic() - self._t0))
        self._checkpoint_if_due(step, None if grad_norm is None else float(grad_norm))
        self._reporter.step(self.rank, step, None if loss is None else float(loss),
                            grad_norm, time.monotonic() - self._t0, self.checkpoint_step)

    def _checkpoint_if_due(self, step, grad_norm):
        try:
            wrote = self._ckpt.after_step(step, grad_norm, self._model, self._optimizer)
        except OSError as e:
            self._fatal("checkpoint write failed: %s" % e)
        if wrote:
            self._reporter.checkpoint(self.rank, step)

    def _gradient_norm(self):
        grads = [p.grad.detach() for p in self._model.parameters() if p.grad is not None]
        if not grads:
            return None
        return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))

    # ----- faults -----

    def _fire(self, d):
        if d.kind == "crash":
            self._fatal(d.signature)
        elif d.kind == "hang":
            threading.Event().wait()  # forever, as a rank stuck in a collective
        elif d.kind == "nan":
            self._corrupt = "nan"

    def _fatal(self, signature):
        """Reports signature as the rank's fatal error, prints it on stderr and exits 1."""
        self._reporter.fatal(self.rank, signature)
        sys.stdout.flush()
        print(signature, file=sys.stderr, flush=True)
        # os._exit: a group member must not wait in interpreter teardown for peers.
        os._exit(1)

    def _hook_first_parameter(self):
        # The hook changes the local gradient before DDP all-reduces it, as a faulty GPU's
        # kernel would: the damage reaches every rank through the collective.
        for p in self._model.parameters():
            if p.requires_grad:
                p.register_hook(self._corrupt_gradient)
                return

    def _corrupt_gradient(self, grad):
        kind, self._corrupt = self._corrupt, None
        if kind is None:
            return None
        grad = grad.clone()
        if kind == "nan":
            grad.fill_(math.nan)
        else:
            flip_exponent_bit(grad, self._step)
        return grad


def flip_exponent_bit(t, step):
    """Flips the top exponent bit of one nonzero element of a float tensor (chosen by step):
    |x| < 2 becomes astronomically large, the corruption that makes a training run diverge."""
    flat = t.view(-1)
    n = flat.numel()
    idx = (step * 0x9E3779B97F4A7C15 >> 17) % n
    for _ in range(n):
        if flat[idx] != 0:
            break
        idx = (idx + 1) % n
    int_type, bit = {torch.float32: (torch.int32, 30), torch.float64: (torch.int64, 62),
                     torch.float16: (torch.int16, 14), torch.bfloat16: (torch.int16, 14)}[t.dtype]
    flat[idx:idx + 1].view(int_type).bitwise_xor_(1 << bit)
