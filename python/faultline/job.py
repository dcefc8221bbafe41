"""faultline.Job: the rank side of faultline live mode for a PyTorch training loop."""

import ctypes
import gc
import json
import math
import os
import socket
import sys
import threading
import time

import torch
import torch.distributed as dist

from faultline.checkpoint import (Checkpointer, CheckpointStore, agree, broadcast_bytes, load_into,
                                  serialize)
from faultline.faults import KINDS, ONE_SHOT, FaultFile
from faultline.report import Reporter, register_stack_dump

DEFAULT_CKPT_EVERY = 10       # the reference job's default when the launch sets none
DEFAULT_HOLD_TIMEOUT_S = 300  # in place: how long a survivor waits for its re-form directive
BROKEN_GROUP_MARGIN_S = 1     # after a broken group's timeout, before it is released


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

    In-place restarts (recovery=flash with the live config's job.in_place): pass rebuild, a
    function that wraps the inner module again (``lambda: DDP(net)``) and returns the wrapper;
    train through ``job.model`` and hand a collective's failure to recover()::

        try:
            loss = F.mse_loss(job.model(x), y); loss.backward()
        except RuntimeError as e:       # a peer died in the all-reduce
            step = job.recover(e)       # the step every rank continues after
            continue

    recover() keeps this process and its state at the last step it completed, says so to the
    agent ("holding"), waits for the agent's re-form directive (a new generation and
    rendezvous), re-forms the gloo process group, calls rebuild, and takes the newest state any
    survivor holds by a broadcast; a relaunched rank (FAULTLINE_IN_PLACE=1) takes it in
    restore() the same way, not from a checkpoint. Without job.in_place (no
    FAULTLINE_REFORM_FILE), or without rebuild, recover() raises the error again: the rank
    fails as it would without it.
    """

    def __init__(self, model, optimizer=None, version=None, env=None, rebuild=None):
        env = os.environ if env is None else env
        self.active = bool(env.get("FAULTLINE_REPORT_FD", "").strip())
        self.rank = _env_int(env, "RANK", 0)
        self.world_size = _env_int(env, "WORLD_SIZE", 1)
        self._model = getattr(model, "module", model)
        self.model = model  # what the loop trains with: the wrapper, rebuilt when re-formed
        self._rebuild = rebuild
        self._gen = _env_int(env, "FAULTLINE_GEN", 0)
        reform = env.get("FAULTLINE_REFORM_FILE", "") if self.active else ""
        self._reform_file = reform if reform and rebuild is not None else None
        self._relaunched = self.active and env.get("FAULTLINE_IN_PLACE", "") == "1"
        hold = env.get("FAULTLINE_HOLD_TIMEOUT_S", "").strip()
        self._hold_timeout_s = float(hold) if hold else DEFAULT_HOLD_TIMEOUT_S
        self._done = 0              # the last step this process completed (or restored)
        self._broken = BrokenGroups()  # groups a peer's death broke, kept until their timeout
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
        # The agent's stack capture signals this process to write its Python stacks (the
        # started report names the signal) instead of attaching a debugger.
        self._stack_signal = register_stack_dump(env) if self.active else None
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
            if self._relaunched:
                step, restored_from = self._sync_in_place(), "in_place"
            else:
                step, restored_from = self._restore()
        except Exception as e:  # any failure here leaves the rank useless: say why and go
            self._fatal("restore: %s" % e)
        self._done = step
        # The kinds it takes: none without a fault file (the agent then refuses every
        # directive at once instead of waiting for an acknowledgement that cannot come).
        self._reporter.started(self.rank, step, restored_from, self._version,
                               KINDS if self._faults.enabled else None, self._stack_signal)
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
        self._broken.release_due()
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
        self._done = step
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

    # ----- in place -----

    def recover(self, error):
        """A collective failed (error: what it raised). In place: holds this rank's state, waits
        for the re-form directive, re-forms the process group, rebuilds the wrapper (job.model)
        and returns the step every rank continues after (the newest any survivor completed).
        Otherwise raises error again."""
        if self._reform_file is None:
            raise error
        held = self._done
        # A peer may still wait on this rank in the collective (in a ring all-reduce, the
        # dead rank's neighbours fail, the others wait on them): the broken group's connections
        # are shut down, so that every rank fails and holds, instead of waiting for gloo's
        # timeout (destroying the group closes them only once nothing refers to it).
        shutdown_tcp_connections()
        error.__traceback__ = None  # its frames may hold the old wrapper
        # The broken group is kept, not destroyed: see BrokenGroups.
        self._broken.keep(self.model, _group_timeout_s(self.model))
        self.model = None  # the old wrapper, with its hooks, before the group
        gc.collect()
        try:
            dist.destroy_process_group()
        except Exception:  # pylint: disable=broad-except
            pass  # a group broken by the peer's death: nothing left to tear down
        gc.collect()
        # The state as it is now: rebuilding the wrapper broadcasts rank 0's parameters, and a
        # relaunched rank 0 holds fresh ones.
        state = serialize(held, self._model, self._optimizer)
        self._reporter.holding(self.rank, held, "%s" % error)
        directive = self._wait_directive()
        try:
            os.environ["MASTER_ADDR"] = directive["master_addr"]
            os.environ["MASTER_PORT"] = str(directive["master_port"])
            os.environ["FAULTLINE_GEN"] = str(directive["gen"])
            os.environ["FAULTLINE_RENDEZVOUS_KEY"] = directive.get("rendezvous_key", "")
            self._gen = int(directive["gen"])
            dist.init_process_group("gloo", rank=self.rank, world_size=self.world_size)
            self.model = self._rebuild()
            step = self._sync_in_place(state)
        except Exception as e:  # pylint: disable=broad-except
            self._fatal("in place: re-forming generation %s failed: %s" % (directive["gen"], e))
        self._done = step
        self._reporter.started(self.rank, step, "in_place", self._version,
                               KINDS if self._faults.enabled else None, self._stack_signal)
        return step

    def _wait_directive(self):
        """The agent's re-form directive for a generation after this process's, from
        FAULTLINE_REFORM_FILE (JSON: gen, master_addr, master_port, rendezvous_key)."""
        deadline = time.monotonic() + self._hold_timeout_s
        while time.monotonic() < deadline:
            try:
                with open(self._reform_file) as f:
                    d = json.load(f)
                if (isinstance(d, dict) and isinstance(d.get("gen"), int) and d["gen"] > self._gen
                        and d.get("rank") == self.rank):
                    return d
            except (OSError, ValueError):
                pass  # not written yet, or being replaced
            time.sleep(0.02)
        self._fatal("in place: no re-form directive within FAULTLINE_HOLD_TIMEOUT_S = %g s"
                    % self._hold_timeout_s)

    def _sync_in_place(self, state=None):
        """Every rank of the re-formed group: the newest state any rank holds (the lowest rank
        holding it sends it) into every other, model and optimizer; returns its step. state: a
        survivor's, serialized before the wrapper was rebuilt. A relaunched rank holds none."""
        mine = torch.tensor([-1 if self._relaunched else self._done,
                             self._ckpt.step], dtype=torch.int64)
        held = [torch.zeros(2, dtype=torch.int64) for _ in range(self.world_size)]
        dist.all_gather(held, mine)
        steps = [int(h[0].item()) for h in held]
        step = max(steps)
        if step < 0:
            raise RuntimeError("in place: no rank holds a state to restore from")
        src = steps.index(step)
        data = state if self.rank == src else None
        received = broadcast_bytes(data, src)
        if load_into(received, self._model, self._optimizer) != step:
            raise RuntimeError("in place: rank %d's state holds another step" % src)
        self._ckpt.step = max(int(h[1].item()) for h in held)
        self._relaunched = False
        return step

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


class BrokenGroups:
    """The process groups a peer's death broke, each kept until its timeout has passed.

    A broken gloo group can keep a worker thread waiting in a collective that no peer will
    complete (one posted as the group broke), until the group's timeout: 30 minutes by default.
    The group's destructor joins that thread while holding the GIL, so the last reference to a
    broken group must not be dropped on the training thread -- and the loss of the step that
    failed holds it (DDP's autograd graph holds its reducer, the reducer the group) until the
    loop assigns the next step's loss, in the middle of that step, while the other ranks wait
    for this one in the all-reduce. recover() hands the broken wrapper here; begin_step()
    releases it once its timeout and BROKEN_GROUP_MARGIN_S have passed (its workers done).
    One still kept when the process exits is never destroyed: the extra reference taken
    here outlives interpreter shutdown, whose destructor would otherwise wait the same way.
    """

    def __init__(self):
        self._kept = []  # (release time on the monotonic clock, object), oldest first

    def keep(self, obj, timeout_s):
        if obj is None:
            return
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))
        self._kept.append((time.monotonic() + timeout_s + BROKEN_GROUP_MARGIN_S, obj))

    def release_due(self):
        now = time.monotonic()
        while self._kept and self._kept[0][0] <= now:
            _, obj = self._kept.pop(0)
            ctypes.pythonapi.Py_DecRef(ctypes.py_object(obj))

    def __len__(self):
        return len(self._kept)


def _group_timeout_s(wrapper):
    """The timeout of the group a DDP wrapper all-reduces over (the default group's when it
    names none), in seconds; torch's default when the group does not say."""
    group = getattr(wrapper, "process_group", None)
    try:
        if group is None:
            group = dist.distributed_c10d._get_default_group()
        return group.options._timeout.total_seconds()
    except (AttributeError, RuntimeError):
        return dist.default_pg_timeout.total_seconds()


def shutdown_tcp_connections(store_port=None):
    """Shuts down (both ways, the descriptors left open to their owners) the connected TCP
    sockets of this process but the store's (local or remote port store_port, default
    MASTER_PORT; a store server that sees its sockets shut down aborts the process): the
    broken group's gloo pairs, when a rank holds in place. Returns how many."""
    if store_port is None:
        store_port = _env_int(os.environ, "MASTER_PORT", -1)
    n = 0
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if not os.readlink("/proc/self/fd/%d" % fd).startswith("socket:"):
                continue
            s = socket.socket(fileno=fd)
        except OSError:
            continue  # closed meanwhile, or not a socket
        try:
            if (s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM
                    and not s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
                    and store_port not in (s.getsockname()[1], s.getpeername()[1])):
                s.shutdown(socket.SHUT_RDWR)
                n += 1
        except OSError:
            pass  # a listening socket, or one already shut down
        finally:
            s.detach()  # the descriptor stays its owner's
    return n


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
