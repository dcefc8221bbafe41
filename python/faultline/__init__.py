"""faultline from Python: the simulator as a library, and the job side of live mode.

Simulation (docs/python.md; needs pandas for the tables, not torch):

- :func:`simulate` (``sim run``), :func:`compare` (``sim compare``), :func:`sweep`
  (``sim sweep``): results as attributes (``r.ettr.mean``) and pandas DataFrames
  (``r.replicas``, ``c.table``, ``s.table``); module :mod:`faultline.sim`.
- :func:`tune` (``sim tune``, or an Optuna study's sampler driving faultline's evaluations):
  the Pareto front with CIs (``t.front``, ``t.table``); module :mod:`faultline.tuning`.
- :class:`Error` (the simulator failed; ``.exit_code``) and :class:`InputError` (it refused
  its input; also a ``ValueError``); module :mod:`faultline.errors`.

Loaded on first use, so that ``import faultline`` needs neither torch nor the extension:

- :class:`Job` (:mod:`faultline.job`, needs torch): a PyTorch job under live mode, restarted
  from checkpoints (README.md beside this file).
- :class:`ReplicaGroup` (:mod:`faultline.replicas`, needs torch): fault-tolerant replica groups.
- the policy-module API of :mod:`faultline.policy` (``register``, ``Localizer``, ``Recovery``,
  ``StopVerdict``, ``CheckpointPlanner``, ``Param``, ...: every name in its ``__all__``;
  docs/writing-a-policy-module.md).

The simulator itself runs in this process through the extension ``faultline._core``, loaded by
the first simulate/compare/sweep call.
"""

import importlib as _importlib

from faultline.errors import Error, InputError
from faultline.sim import compare, simulate, sweep
from faultline.tuning import tune

__all__ = ["simulate", "compare", "sweep", "tune", "Error", "InputError"]

_LAZY = {"Job": "faultline.job", "ReplicaGroup": "faultline.replicas"}


def _policy():
    """faultline.policy, or None where this build has none."""
    try:
        return _importlib.import_module("faultline.policy")
    except ModuleNotFoundError as e:
        if e.name != "faultline.policy":
            raise  # it exists but needs something missing: say so
        return None


def __getattr__(name):
    # Lazy: `import faultline` loads neither torch (faultline.job, faultline.replicas) nor
    # faultline.policy until one of their names is used.
    if name in _LAZY:
        return getattr(_importlib.import_module(_LAZY[name]), name)
    if not name.startswith("_"):
        policy = _policy()
        if policy is not None and name in getattr(policy, "__all__", ()):
            return getattr(policy, name)
    raise AttributeError("module 'faultline' has no attribute %r" % name)


def __dir__():
    import sys
    names = set(globals()) | set(_LAZY)
    policy = sys.modules.get("faultline.policy")  # listed once loaded, not loaded to list it
    return sorted(names | set(getattr(policy, "__all__", ())))
