"""Step reports to the faultline agent: one strict JSON object per line on FAULTLINE_REPORT_FD.

The wire format is the reference job's (realexec/PROTOCOL.md, "Rank reports"): a non-finite
loss or gradient norm goes out as ``null`` plus ``"<name>_nan": true``, never as a bare
``NaN`` token, so any strict JSON reader (and the agent's type checks) accepts every line.
"""

import faulthandler
import json
import math
import os
import select
import signal


def encode_number(obj, name, value):
    """Sets obj[name] to a finite float, or to None with obj[name + "_nan"] = True."""
    x = float(value)
    if math.isfinite(x):
        obj[name] = x
    else:
        obj[name] = None
        obj[name + "_nan"] = True


def step_report(rank, step, loss, grad_norm, step_time_s, checkpoint_step):
    """The object of a "step" report; loss or grad_norm None means not known (left out)."""
    obj = {"type": "step", "rank": rank, "step": step}
    if loss is not None:
        encode_number(obj, "loss", loss)
    if grad_norm is not None:
        encode_number(obj, "grad_norm", grad_norm)
    obj["step_time_s"] = max(0.0, float(step_time_s))
    obj["checkpoint_step"] = checkpoint_step
    return obj


def encode_line(obj):
    """One report line; allow_nan=False makes a stray NaN a bug here, not on the wire."""
    return (json.dumps(obj, allow_nan=False, separators=(",", ":")) + "\n").encode()


class Reporter:
    """Writes reports to a file descriptor; fd None (not under faultline) writes nothing.

    Step and checkpoint reports never hold training up: while the agent reads nothing
    (stopped for a checkpoint save, swapping) the descriptor's buffer fills, and a blocking
    write would stall the rank's step, its peers' collectives with it (a replica group then
    drops the replica as hung). The newest of each waits instead, replacing an older one of
    its kind (the agent keeps only the newest too), and they go out in the order they were
    last written, before the next report of any other kind, which does wait."""

    LATEST_ONLY = ("step", "checkpoint")

    def __init__(self, fd):
        self._fd = fd
        self._head = b""    # the rest of a line partly written: goes first
        self._waiting = []  # (type, line): the newest report of each LATEST_ONLY type unsent

    @property
    def active(self):
        return self._fd is not None

    def write(self, obj):
        if self._fd is None:
            return
        data = encode_line(obj)
        kind = obj.get("type")
        try:
            if kind in self.LATEST_ONLY:
                self._waiting = [w for w in self._waiting if w[0] != kind] + [(kind, data)]
                self._drain(block=False)
                return
            self._drain(block=True)
            self._head = data
            self._drain(block=True)
        except OSError:
            self._fd = None  # the agent is gone: keep training, stop reporting

    def _drain(self, block):
        while self._head or self._waiting:
            if not block and not select.select([], [self._fd], [], 0)[1]:
                return
            if not self._head:
                self._head = self._waiting.pop(0)[1]
            self._head = self._head[os.write(self._fd, self._head):]

    def started(self, rank, step, restored_from, version=None, faults=None, stack_signal=None):
        """faults: the fault-file kinds this job takes and acknowledges (faults.KINDS); the
        agent refuses to inject any other kind into it. stack_signal: "SIGUSR1" or "SIGUSR2",
        the signal on which this process writes every thread's Python stack to
        FAULTLINE_STACK_FD (register_stack_dump); the agent's stack capture then sends it
        instead of attaching a debugger."""
        obj = {"type": "started", "rank": rank, "step": step, "restored_from": restored_from,
               "pid": os.getpid()}
        if version is not None:
            obj["version"] = version
        if faults is not None:
            obj["faults"] = list(faults)
        if stack_signal is not None:
            obj["stack_signal"] = stack_signal
        self.write(obj)

    def fault(self, rank, directive_id, kind):
        """The acknowledgement of a fault-file directive this process took (its id, its kind),
        written before the fault acts: the agent confirms the injection to the controller only
        on it (realexec/PROTOCOL.md, "Fault acknowledgement")."""
        self.write({"type": "fault", "rank": rank, "id": directive_id, "fault": kind})

    def step(self, rank, step, loss, grad_norm, step_time_s, checkpoint_step):
        self.write(step_report(rank, step, loss, grad_norm, step_time_s, checkpoint_step))

    def checkpoint(self, rank, step):
        self.write({"type": "checkpoint", "rank": rank, "step": step})

    def holding(self, rank, step, signature):
        """In place (recovery=flash): a peer of this rank died; it keeps its process and its
        state at `step`, the last it completed, and waits for the agent's re-form directive
        (realexec/PROTOCOL.md, "In-place restarts"). signature: the collective's error."""
        self.write({"type": "holding", "rank": rank, "step": step,
                    "signature": signature[:1024]})

    def fatal(self, rank, signature):
        self.write({"type": "fatal", "rank": rank, "signature": signature})


STACK_SIGNALS = ("SIGUSR2", "SIGUSR1")


def register_stack_dump(env):
    """Under a faultline agent (FAULTLINE_STACK_FD set: a descriptor the agent reads), registers
    faulthandler to write every thread's Python stack there on SIGUSR2, or on SIGUSR1 when the
    program has a handler of its own on SIGUSR2 (on neither when it has both). faulthandler's
    handler is C: it writes even while the main thread is blocked in a collective. Returns the
    signal's name for the started report, or None (the agent then reads the stacks with gdb,
    which takes seconds for a process that loaded libtorch)."""
    value = env.get("FAULTLINE_STACK_FD", "").strip()
    if not value:
        return None
    try:
        fd = int(value)
        os.fstat(fd)
    except (ValueError, OSError):
        return None
    for name in STACK_SIGNALS:
        signo = getattr(signal, name)
        if signal.getsignal(signo) != signal.SIG_DFL:
            continue  # the program's own (or ignored)
        try:
            faulthandler.register(signo, file=fd, all_threads=True, chain=False)
        except (ValueError, RuntimeError, OSError):
            return None
        return name
    return None
