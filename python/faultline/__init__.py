"""faultline: run a PyTorch data-parallel job under faultline live mode.

See README.md beside this file. The API is :class:`Job` (a job restarted from checkpoints) and
:class:`ReplicaGroup` (fault-tolerant replica groups, faultline.replicas; loaded on first use).
"""

from faultline.job import Job

__all__ = ["Job", "ReplicaGroup"]


def __getattr__(name):
    # Lazy: `import faultline` does not load faultline.replicas until it is used.
    if name == "ReplicaGroup":
        from faultline.replicas import ReplicaGroup
        return ReplicaGroup
    raise AttributeError("module 'faultline' has no attribute %r" % name)
