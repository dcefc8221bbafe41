"""Crash-safe file writes shared by checkpoints and the fault file."""

import os


def write_atomic(path, data):
    """Writes bytes to path so that readers see the old or the new file, never a torn one:
    temporary file, fsync, rename, fsync of the directory (the rename survives a power cut)."""
    directory = os.path.dirname(path) or "."
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def read_file(path):
    """The file's bytes, or None when it cannot be read (gone, raced with a rename)."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
