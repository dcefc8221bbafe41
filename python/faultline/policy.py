"""Policy modules written in Python (docs/writing-a-policy-module.md).

A module is a class deriving from the base of its kind, with an ``info`` and the methods of
that kind; ``faultline.register(TheClass)`` adds it to the simulator and to live mode, where
it is chosen by name like a built-in module (``policy.params.localization``)::

    class MyLocalizer(faultline.Localizer):
        info = faultline.Info("my-localizer", version="1", summary="one line",
                              params=[faultline.Param("my_groups", "help", unit="count",
                                                      default=2, min=1, max=100)])

        def __init__(self, params):          # the declared parameters' values, by name
            self.groups = int(params["my_groups"])

        def begin(self, why, view):          # -> RunProbe, RunReplay or Located
            ...

        def answer(self, outcome, view):     # outcome: ProbeResult or ReplayResult
            ...

    faultline.register(MyLocalizer)

The simulator and live mode call the module through an embedded interpreter (or this one,
when the simulator runs from Python). Machines and slots are ints; times are seconds. A
``view`` (the cluster as the stack sees it) is valid during the call only. A call that
raises, answers the wrong type or outlasts ``deadline_s`` is a module failure: the
simulator stops with one line naming the module (exit 2); live mode reports it and falls
back to the kind's built-in default for the rest of the run.
"""

from dataclasses import dataclass, field
from typing import List, Optional

__all__ = [
    "Info", "Param", "register", "load_plugin",
    "Localizer", "Recovery", "StopVerdict", "CheckpointPlanner",
    "RunProbe", "RunReplay", "Located", "ProbeResult", "ReplayResult",
    "CheckpointPlan", "StandbyPool", "AcquireMachines", "Strike",
]


@dataclass
class Param:
    """A parameter the module reads, validated like a C++ module's (ParamSpec)."""
    name: str
    help: str
    unit: str = ""
    default: float = 0.0
    min: float = 0.0
    max: float = 0.0


@dataclass
class Info:
    """The module's identity: its choice name, a version that changes whenever the same
    inputs can give different decisions, one line for `faultline policies`, its params."""
    name: str
    version: str = "1"
    summary: str = ""
    params: List[Param] = field(default_factory=list)


# ---------------------------------------------------------------- what modules answer

@dataclass
class RunProbe:
    """A stop-time test on machines (test: gpu-diag, intra-all-to-all, inter-all-gather,
    bitwise, stress); groups: machine sets run as one collective each (grouped probe)."""
    machines: List[int]
    test: str = "gpu-diag"
    reason: str = ""
    deadline_s: float = 600.0
    groups: List[List[int]] = field(default_factory=list)


@dataclass
class RunReplay:
    """A replay of the job's step on groups of machines (-1: a slot without a machine)."""
    groups: List[List[int]]
    reason: str = ""


@dataclass
class Located:
    """A localizer's verdict: the slots to evict (empty: nothing found, the stack
    reattempts), whether the code is at fault (the stack rolls it back), and the
    mechanism the eviction counts as (replay, analyzer_over_eviction, stop_time_eviction...,
    or the module's own name: the results count it under that name)."""
    evict: List[int] = field(default_factory=list)
    code_at_fault: bool = False
    credit: str = "replay"
    reason: str = ""


@dataclass
class CheckpointPlan:
    """How the job checkpoints: tier remote, memory or memory+peer."""
    interval_s: float
    blocking_s: float
    tier: str = "remote"
    reason: str = ""
    remote_interval_s: float = 3600.0


@dataclass
class StandbyPool:
    size: int
    reason: str = ""


@dataclass
class AcquireMachines:
    """The request that refills slots: mode requeue, reschedule, standby or oracle."""
    slots: List[int]
    mode: str = "reschedule"
    reason: str = ""
    mechanism: str = "reschedule"
    same_domain: bool = False


@dataclass
class Strike:
    retire: bool = False
    avoid: bool = False


# ---------------------------------------------------------------- what modules are told

@dataclass
class ProbeResult:
    test: str
    failed: List[int]
    timed_out: bool
    group_failed: List[bool]
    group_seconds: List[float]


@dataclass
class ReplayResult:
    group_failed: List[bool]


# ---------------------------------------------------------------- the kinds

class _Module:
    kind = ""
    info: Optional[Info] = None
    deadline_s = 10.0  # a call that takes longer is a module failure

    def __init__(self, params):
        self.params = params


class Localizer(_Module):
    """A search for the machine(s) behind a failure, as a conversation of tests."""
    kind = "localization"

    def begin(self, why, view):
        raise NotImplementedError

    def answer(self, outcome, view):
        raise NotImplementedError

    def places_slowdowns(self):
        return False


class Recovery(_Module):
    """How evicted machines are replaced."""
    kind = "recovery"

    def start(self, view):
        return None

    def replace(self, slots, why, credit):
        raise NotImplementedError

    def struck(self, machine):
        return Strike()

    def avoided(self):
        return []


class CheckpointPlanner(_Module):
    """How the job checkpoints: asked at the start, told of every interruption."""
    kind = "checkpoint"

    def plan(self, view):
        raise NotImplementedError

    def replan(self, interruptions, running_s, view):
        return None


class StopVerdict(_Module):
    """Whether failures follow the code or the data: carry_on, roll_back or stop."""
    kind = "verdict"

    def judge(self, identical, runs_without_progress):
        raise NotImplementedError


KINDS = (Localizer, Recovery, CheckpointPlanner, StopVerdict)

# Classes registered and not yet taken by the host: an embedded host (the faultline and
# faultline-live programs) takes them after running a --plugin file; in a Python process the
# extension module takes them at once.
_pending = []
_embedded = False


def register(cls):
    """Adds a module class to the simulator run from this process (and, in a --plugin file,
    to the faultline program that loads it); returns the class, so it also works as a class
    decorator. Raises faultline.InputError naming the class and the field when it is refused
    (a name taken, an info or a parameter that does not hold). Register before simulating:
    each simulate() runs with the modules registered by then."""
    _pending.append(cls)
    if not _embedded:
        from faultline import _core  # the extension module: the simulator in this process
        from faultline.errors import InputError
        taken = list(_pending)
        _pending.clear()
        for c in taken:
            refusal = _core.register_module(c)
            if refusal is not None:
                raise InputError(refusal, exit_code=2)
    return cls


def load_plugin(path):
    """Loads a --plugin file into the simulator run from this process: FILE.py (its classes
    passed to faultline.register) or a shared object built against an installed faultline.
    Raises faultline.InputError with the one-line refusal."""
    from faultline import _core
    from faultline.errors import InputError
    refusal = _core.load_plugin(str(path))
    if refusal is not None:
        raise InputError("plugin " + refusal, exit_code=2)


def _deadline_passed(signum, frame):
    # SIGUSR2 from the deadline's watchdog (plugins/python_host.cc), in faultline's own
    # processes only: a module's call blocked in a system call ends here.
    raise TimeoutError("the module's call outlasted its deadline_s")


def _take_pending():
    taken = list(_pending)
    _pending.clear()
    return taken
