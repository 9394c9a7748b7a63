"""Gradient accumulation with DistributedDataParallel.no_sync().

Each rank splits its batch into ``--micro`` micro-batches. The backward passes of all but the
last run inside ``ddp.no_sync()``: gradients only accumulate locally, nothing is sent. The last
backward runs normally and averages the accumulated sum over the ranks: one all_reduce per
optimizer step instead of one per micro-batch, and the same gradient as one big batch.

    tbrun --standalone --nproc_per_node 2 examples/ddp_accumulate.py
    python examples/ddp_accumulate.py          # one process (a world of one)

The script checks the claim: every rank also computes, without DDP, the gradient of the whole
global batch (all ranks' data is generated from one seed) and prints the largest difference.
"""
from __future__ import annotations

import argparse
import os
import socket

import numpy as np

import tensorbrain as tb
import tensorbrain.distributed as dist
from tensorbrain import nn
from tensorbrain.nn import functional as F


def init():
    if "WORLD_SIZE" in os.environ:        # under tbrun / torchrun: env://
        dist.init_process_group("tcp")
    else:                                 # plain `python`: a world of one on a free port
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        dist.init_process_group("tcp", init_method=f"tcp://127.0.0.1:{port}", rank=0,
                                world_size=1)
    return dist.get_rank(), dist.get_world_size()


def model_fn():
    tb.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    ap.add_argument("--micro", type=int, default=4, help="micro-batches per step")
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args(argv)
    rank, world = init()
    rng = np.random.default_rng(42)                       # the same data on every rank
    X = rng.standard_normal((a.steps, world, a.batch, 20)).astype(np.float32)
    Y = rng.integers(0, 5, (a.steps, world, a.batch))

    model = model_fn()
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = tb.optim.SGD(ddp.parameters(), lr=0.05)
    ref = model_fn()                                      # one process, the whole global batch
    ref_opt = tb.optim.SGD(ref.parameters(), lr=0.05)
    worst = 0.0
    for step in range(a.steps):
        opt.zero_grad()
        xs = np.array_split(X[step, rank], a.micro)
        ys = np.array_split(Y[step, rank], a.micro)
        for i, (x, y) in enumerate(zip(xs, ys)):
            # each micro-batch's loss is scaled so the sum is the mean over this rank's batch
            scale = len(x) / a.batch
            if i < a.micro - 1:
                with ddp.no_sync():                       # local accumulation, no all_reduce
                    (F.cross_entropy(ddp(tb.from_numpy(x)), tb.from_numpy(y)) * scale).backward()
            else:                                         # this backward averages the sum
                (F.cross_entropy(ddp(tb.from_numpy(x)), tb.from_numpy(y)) * scale).backward()
        ref_opt.zero_grad()
        F.cross_entropy(ref(tb.from_numpy(X[step].reshape(-1, 20))),
                        tb.from_numpy(Y[step].reshape(-1))).backward()
        worst = max(worst, max(float(np.abs(p.grad.data - q.grad.data).max())
                               for p, q in zip(model.parameters(), ref.parameters())))
        opt.step()
        ref_opt.step()
    if rank == 0:
        print(f"{world} rank(s) x {a.micro} micro-batches of ~{a.batch // a.micro}: largest "
              f"gradient difference to one big batch of {world * a.batch}: {worst:.2e}")
    dist.destroy_process_group()
    return worst


if __name__ == "__main__":
    main()
