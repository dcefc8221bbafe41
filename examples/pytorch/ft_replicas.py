#!/usr/bin/env python3
"""A fault-tolerant data-parallel PyTorch script (torchft style, gloo on CPU) for faultline.

One process per replica. The launcher sets FAULTLINE_REPLICA (this replica's id),
FAULTLINE_REPLICAS (the data-parallel degree) and FAULTLINE_QUORUM_FILE, and rewrites the file
at each membership change; the store it names is the harness's own, or in live mode one hosted
by a member (each replica hosts one on FAULTLINE_STORE_PORT; python/faultline/README.md,
"Replica groups"). When a peer dies this process does not restart: faultline.replicas discards
the interrupted step, rebuilds the group among the survivors and redoes it; a replacement
joins at a step boundary with the parameters and optimizer state of a live peer.

faultline-specific lines: 4, each marked "# faultline" (the import, ReplicaGroup, join,
run_step). Deterministic: fixed seeds, and each step's data is a function of (step, replica
id) only, so a run is replayable from the membership of each step (--progress records it).
--digest writes the SHA-256 of the final parameters.
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

from faultline.replicas import Evicted, QuorumError, ReplicaGroup  # faultline

FEATURES, HIDDEN, BATCH = 16, 64, 32
LR, MOMENTUM = 0.05, 0.9


def batch(step, replica):
    """This replica's data of a step: a regression target from a fixed teacher, plus noise."""
    g = torch.Generator().manual_seed(1_000_003 * step + replica)
    x = torch.randn(BATCH, FEATURES, generator=g)
    teacher = torch.Generator().manual_seed(99)
    w = torch.randn(FEATURES, 1, generator=teacher)
    return x, torch.sin(x @ w) + 0.01 * torch.randn(BATCH, 1, generator=g)


def build(seed):
    """The model and optimizer, identical in every process of the job."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.Tanh(),
                                torch.nn.Linear(HIDDEN, 1))
    return model, torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)


def local_loss(model, step, replica):
    x, y = batch(step, replica)
    return F.mse_loss(model(x), y)


class Progress:
    """--progress: one JSON object per line, flushed at once (the e2e test tails it)."""

    def __init__(self, path):
        self._f = open(path, "a") if path else None

    def write(self, **obj):
        if self._f:
            self._f.write(json.dumps(obj, separators=(",", ":")) + "\n")
            self._f.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--step-ms", type=float, default=0,
                    help="extra time per step (simulated compute, before the all_reduce)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--digest", help="file for the SHA-256 of the final parameters")
    ap.add_argument("--save", help="file for the final state_dict (torch.save)")
    ap.add_argument("--progress", help="JSON lines: each committed step with time, pid, "
                    "quorum, members and parameter digest")
    ap.add_argument("--timeout-s", type=float, default=None,
                    help="a collective longer than this is a failure (a hung peer); default: "
                    "FAULTLINE_REPLICA_TIMEOUT_S, else 30")
    ap.add_argument("--quorum-wait-s", type=float, default=120,
                    help="after a failure, the longest wait for the next quorum")
    ap.add_argument("--join-wait-s", type=float, default=600,
                    help="the longest wait for a first quorum that contains this replica")
    args = ap.parse_args()
    model, optimizer = build(args.seed)
    progress = Progress(args.progress)
    rg = ReplicaGroup(model, optimizer, timeout_s=args.timeout_s,  # faultline
                      quorum_wait_s=args.quorum_wait_s)
    progress.write(event="up", replica=rg.replica, pid=os.getpid(), t=time.time())

    def compute(step):
        optimizer.zero_grad()
        loss = local_loss(model, step, rg.replica)
        loss.backward()
        time.sleep(args.step_ms / 1000)
        return loss

    rg.join(wait_s=args.join_wait_s)  # faultline
    progress.write(event="joined", replica=rg.replica, pid=os.getpid(), t=time.time(),
                   step=rg.step, restored_from=rg.restored_from, quorum=rg.quorum.number,
                   members=rg.members, digest=rg.digest())
    while rg.step < args.steps:
        loss = rg.run_step(rg.step + 1, compute)  # faultline
        progress.write(step=rg.step, t=time.time(), pid=os.getpid(), replica=rg.replica,
                       quorum=rg.quorum.number, members=rg.members, computed=loss is not None,
                       loss=None if loss is None else float(loss), digest=rg.digest())
    if args.digest:
        with open(args.digest, "w") as f:
            f.write(rg.digest() + "\n")
    if args.save:
        torch.save(model.state_dict(), args.save)
    rg.close()


if __name__ == "__main__":
    try:
        main()
    except QuorumError as e:  # evicted, or no quorum in time: already reported
        print("ft_replicas: %s" % e, file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(3 if isinstance(e, Evicted) else 1)
