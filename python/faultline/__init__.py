"""faultline: run a PyTorch data-parallel job under faultline live mode.

See README.md beside this file. The whole API is :class:`Job`.
"""

from faultline.job import Job

__all__ = ["Job"]
