"""Checkpoints on the machine's disk and the restore agreement across ranks.

Layout: ``FAULTLINE_CKPT_DIR/rank<R>/step-<10 digits>.pt`` (torch.save of the model's and
optimizer's state dicts, the step and the CPU RNG state), written atomically, newest
KEEP kept. Data-parallel ranks hold identical state, so any rank's checkpoint of a step
restores every rank.
"""

import io
import math
import os
import re

import torch
import torch.distributed as dist

from faultline.files import read_file, write_atomic

KEEP = 3
EXPLODED_GRAD_RATIO = 1000.0  # a gradient norm this far above its running mean: corruption
_NAME = re.compile(r"^step-(\d{10})\.pt$")


class CheckpointStore:
    """The checkpoints of one rank on this machine's disk."""

    def __init__(self, root, rank):
        self.dir = os.path.join(root, "rank%d" % rank)

    def path(self, step):
        return os.path.join(self.dir, "step-%010d.pt" % step)

    def steps(self):
        """Complete checkpoints held, oldest first (temporary files never match the name)."""
        try:
            names = os.listdir(self.dir)
        except OSError:
            return []
        return sorted(int(m.group(1)) for m in map(_NAME.match, names) if m)

    def write(self, step, data):
        os.makedirs(self.dir, exist_ok=True)
        write_atomic(self.path(step), data)
        for old in self.steps()[:-KEEP]:
            try:
                os.remove(self.path(old))
            except OSError:
                pass  # a concurrent cleanup got it first


class Checkpointer:
    """When a data-parallel rank saves its state: at every step that is a multiple of
    ``every`` (none when every <= 0 or store is None), never a state that is not finite or
    whose gradient exploded (a norm EXPLODED_GRAD_RATIO times the running mean of the healthy
    steps'), so that recovery goes back to before the damage. Every rank takes the same
    decision: the gradient is all-reduced and the states agree. ``step``: the newest step
    saved or restored, -1 before any."""

    def __init__(self, store, every):
        self.store = store
        self.every = every
        self.step = -1
        self._grad_norm_mean = 0.0

    def after_step(self, step, grad_norm, model, optimizer):
        """Called once the step is committed; True when it wrote a checkpoint of it. OSError
        when the write failed."""
        exploded = grad_norm is not None and (
            not math.isfinite(grad_norm) or
            (self._grad_norm_mean > 0 and grad_norm > EXPLODED_GRAD_RATIO * self._grad_norm_mean))
        if grad_norm is not None and not exploded:
            self._grad_norm_mean = (grad_norm if self._grad_norm_mean == 0
                                    else 0.9 * self._grad_norm_mean + 0.1 * grad_norm)
        if self.store is None or self.every <= 0 or step % self.every != 0 or exploded:
            return False
        if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
            return False
        self.store.write(step, serialize(step, model, optimizer))
        self.step = step
        return True

    def restore_own(self, model, optimizer):
        """Loads this rank's newest readable checkpoint on its own disk (a world restart of a
        job whose ranks agree on their state themselves, as replica groups do); returns its
        step, or -1 when it holds none."""
        if self.store is None:
            return -1
        for step in reversed(self.store.steps()):
            data = read_file(self.store.path(step))
            if data is not None and load_into(data, model, optimizer) == step:
                self.step = step
                return step
        return -1


def serialize(step, model, optimizer):
    buf = io.BytesIO()
    torch.save({"step": step, "model": model.state_dict(),
                "optimizer": optimizer.state_dict() if optimizer is not None else None,
                "rng": torch.get_rng_state()}, buf)
    return buf.getvalue()


def load_into(data, model, optimizer):
    """Loads checkpoint bytes into model and optimizer; returns the checkpoint's step."""
    ckpt = torch.load(io.BytesIO(data), map_location="cpu")
    model.load_state_dict(ckpt["model"])
    if optimizer is not None:
        optimizer.load_state_dict(ckpt["optimizer"])
    torch.set_rng_state(ckpt["rng"])
    return ckpt["step"]


def broadcast_bytes(data, src):
    """Sends src's bytes to every rank of the default group; returns them everywhere."""
    size = torch.tensor([len(data) if data is not None else 0], dtype=torch.int64)
    dist.broadcast(size, src)
    buf = torch.empty(int(size.item()), dtype=torch.uint8)
    if data is not None:
        buf.copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    dist.broadcast(buf, src)
    return buf.numpy().tobytes()


def agree(store, rank, world_size):
    """The restore point every rank agrees on and its bytes: (step, data, own), where own
    says whether this rank's own disk held it. (-1, None, False) when nobody holds one.

    The newest step any rank holds wins (all_reduce MAX): a standby that joined with an empty
    disk, or a rank whose last checkpoint write was cut off, catches up with the others. When
    some rank lacks that step, the lowest rank holding it broadcasts the file."""
    held = store.steps()
    newest = torch.tensor([held[-1] if held else -1], dtype=torch.int64)
    if world_size > 1:
        dist.all_reduce(newest, op=dist.ReduceOp.MAX)
    step = int(newest.item())
    if step < 0:
        return -1, None, False
    data = read_file(store.path(step)) if step in held else None
    if world_size == 1:
        if data is None:
            raise RuntimeError("checkpoint of step %d unreadable" % step)
        return step, data, True
    has = [torch.zeros(1, dtype=torch.int64) for _ in range(world_size)]
    dist.all_gather(has, torch.tensor([1 if data is not None else 0], dtype=torch.int64))
    holders = [r for r in range(world_size) if has[r].item()]
    if len(holders) == world_size:
        return step, data, True
    if not holders:
        raise RuntimeError("restore: checkpoint of step %d unreadable on every rank" % step)
    received = broadcast_bytes(data if rank == holders[0] else None, holders[0])
    return step, (data if data is not None else received), data is not None
