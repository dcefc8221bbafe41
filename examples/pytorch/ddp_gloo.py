#!/usr/bin/env python3
"""A plain PyTorch DDP training script (gloo, CPU) that runs under faultline live mode.

faultline-specific lines: 6, each marked "# faultline" (the import, Job, restore,
begin_step, recover, end_step), plus one DDP argument for bit-exact resumption
(find_unused_parameters=True, see below). Without them this is an ordinary script: run it
standalone (one process) or under torchrun; under `faultline agent` the same file reports
its steps, checkpoints, restores after a failure and obeys `faultline live inject`.

In place (recovery=flash with the live config's job.in_place): when a peer dies in the
all-reduce, job.recover keeps this process and its state, re-forms the process group with
the relaunched peer and rebuilds the DDP wrapper (Job's rebuild argument), and the loop goes
on from the newest step a survivor completed. Without job.in_place it raises the error again.

Deterministic: fixed seeds, and each step's data is a function of (step, rank) only, so a
run resumed from a checkpoint ends with the same parameters, bit for bit, as a run without
faults of the same world size. --digest writes the SHA-256 of the final parameters (rank 0).
"""

import argparse
import hashlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

import faultline  # faultline

FEATURES, HIDDEN, BATCH = 16, 64, 32


def batch(step, rank):
    """This rank's data of a step: a regression target from a fixed teacher, plus noise."""
    g = torch.Generator().manual_seed(1_000_003 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    teacher = torch.Generator().manual_seed(99)
    w = torch.randn(FEATURES, 1, generator=teacher)
    return x, torch.sin(x @ w) + 0.01 * torch.randn(BATCH, 1, generator=g)


def digest(model):
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-ms", type=float, default=0,
                    help="extra time per step (simulated compute)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--digest", help="file for the SHA-256 of the final parameters (rank 0)")
    args = ap.parse_args()
    alone = {"RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    for k, v in alone.items():
        os.environ.setdefault(k, v)  # without a launcher: a group of one
    dist.init_process_group("gloo")
    torch.manual_seed(args.seed)
    # find_unused_parameters=True keeps DDP's first bucket layout for good. Without it DDP
    # re-buckets after each process's first iteration, so the first step after a restart
    # all-reduces with another layout; ring all-reduce sums an element in an order set by its
    # offset, and with more than 2 ranks the resumed run drifts from a fault-free one.
    net = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                              torch.nn.Linear(HIDDEN, 1))
    wrap = lambda: DDP(net, find_unused_parameters=True)  # noqa: E731 (again when re-formed)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    job = faultline.Job(wrap(), optimizer, rebuild=wrap)  # faultline
    step = job.restore()  # faultline
    while step < args.steps:
        job.begin_step(step + 1)  # faultline
        x, y = batch(step + 1, dist.get_rank())
        optimizer.zero_grad()
        try:
            loss = F.mse_loss(job.model(x), y)
            loss.backward()
        except RuntimeError as e:  # a peer died in the all-reduce
            step = job.recover(e)  # faultline
            continue
        optimizer.step()
        step += 1
        time.sleep(args.step_ms / 1000)
        job.end_step(step, loss)  # faultline
    if args.digest and dist.get_rank() == 0:
        with open(args.digest, "w") as f:
            f.write(digest(net) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
