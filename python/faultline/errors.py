"""The exceptions of faultline's Python API (simulate, compare, sweep).

A command the simulator refuses or fails raises :class:`Error` with the CLI's one-line message
(``faultline: `` stripped) and its exit code; bad input (exit code 2: a scenario field, a
``set`` path, an unknown stack) raises :class:`InputError`, which is also a ``ValueError``.
"""

__all__ = ["Error", "InputError"]


class Error(Exception):
    """The simulator failed: ``str(e)`` is its message, ``e.exit_code`` its exit code (1 a
    runtime failure, 2 bad input), ``e.stderr`` everything it wrote to stderr and ``e.command``
    the CLI arguments it ran (``faultline ARGS...``)."""

    def __init__(self, message, exit_code=1, stderr="", command=()):
        super().__init__(message)
        self.exit_code = exit_code
        self.stderr = stderr
        self.command = list(command)


class InputError(Error, ValueError):
    """The simulator refused its input (exit code 2): a scenario field, a ``set`` path or
    value, a stack or module name, a policy parameter the stack does not read."""
