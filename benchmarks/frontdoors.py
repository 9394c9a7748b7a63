"""Step time of the front doors at 2 ranks against plain DDP, on one MLP training step.

    python benchmarks/frontdoors.py                 # MLP 784-512-512-10, B=64 per rank, 2 ranks
    python benchmarks/frontdoors.py --batch 512 --blocks 7 --steps 10
    python benchmarks/frontdoors.py --quick         # smoke run

Every rank is a process with 1 BLAS thread (``run_workers``, TCP backend). Each rank builds one
copy of the same model per contender: plain ``DistributedDataParallel`` + SGD (the baseline),
``Accelerator.prepare`` (DDP inside), ``deepspeed.initialize`` at ZeRO stage 0 (DDP inside),
``hvd.DistributedOptimizer`` with Tensor Fusion (one fused all-reduce, launched from the gradient
hooks during backward) and with fusion off (``HOROVOD_FUSION_THRESHOLD=1``: one all-reduce per
parameter). They run in interleaved blocks of steps so load changes on this shared machine hit
all alike; a block's time is the slowest rank's, the figure is the median over blocks.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CONTENDERS = ("ddp", "accelerate", "deepspeed zero-0", "horovod fused", "horovod unfused")


def worker(rank, world, batch, blocks, steps, warmup):
    import numpy as np

    import tensorbrain as tb
    import tensorbrain.deepspeed as deepspeed
    import tensorbrain.horovod as hvd
    import tensorbrain.nn.functional as F
    from tensorbrain.accelerate import Accelerator
    hvd.init()
    rng = np.random.default_rng(rank)
    x = tb.from_numpy(rng.standard_normal((batch, 784)).astype(np.float32))
    y = tb.from_numpy(rng.integers(0, 10, batch))

    def mlp():
        tb.manual_seed(0)
        return tb.nn.Sequential(tb.nn.Linear(784, 512), tb.nn.ReLU(), tb.nn.Linear(512, 512),
                                tb.nn.ReLU(), tb.nn.Linear(512, 10))

    def plain(model, opt):
        def step():
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        return step

    runs = {}
    model = tb.nn.parallel.DistributedDataParallel(mlp())
    runs["ddp"] = plain(model, tb.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))
    acc = Accelerator(cpu=True)
    model = mlp()
    model, opt = acc.prepare(model, tb.optim.SGD(model.parameters(), lr=0.01, momentum=0.9))

    def acc_step(model=model, opt=opt):
        opt.zero_grad()
        acc.backward(F.cross_entropy(model(x), y))
        opt.step()
    runs["accelerate"] = acc_step
    model = mlp()
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config={
        "train_micro_batch_size_per_gpu": batch, "zero_optimization": {"stage": 0},
        "optimizer": {"type": "SGD", "params": {"lr": 0.01, "momentum": 0.9}}})

    def ds_step(engine=engine):
        engine.backward(F.cross_entropy(engine(x), y))
        engine.step()
    runs["deepspeed zero-0"] = ds_step
    for name, threshold in (("horovod fused", None), ("horovod unfused", "1")):
        if threshold is None:
            os.environ.pop("HOROVOD_FUSION_THRESHOLD", None)
        else:
            os.environ["HOROVOD_FUSION_THRESHOLD"] = threshold
        model = mlp()
        opt = hvd.DistributedOptimizer(tb.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                       named_parameters=model.named_parameters())
        runs[name] = plain(model, opt)
    for step in runs.values():
        for _ in range(warmup):
            step()
    times = {k: [] for k in runs}
    for _ in range(blocks):
        for name, step in runs.items():
            hvd.barrier()
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            dt = tb.tensor([(time.perf_counter() - t0) / steps])
            times[name].append(float(hvd.allreduce(dt, op=hvd.Max).item()))
    return {k: statistics.median(v) for k, v in times.items()}


def main():
    from tensorbrain.testing.distributed import run_workers
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--quick", action="store_true")
    a = p.parse_args()
    if a.quick:
        a.blocks, a.steps, a.warmup = 2, 2, 1
    res = run_workers("benchmarks.frontdoors:worker", a.world, a.batch, a.blocks, a.steps,
                      a.warmup, timeout=900)
    r0 = res[0]
    print(f"MLP 784-512-512-10, B={a.batch}/rank, {a.world} ranks, median of {a.blocks} blocks "
          f"of {a.steps} steps")
    print("| front door | step | vs DDP |")
    print("| --- | ---: | ---: |")
    for name in CONTENDERS:
        print(f"| {name} | {r0[name] * 1e3:.2f} ms | {r0[name] / r0['ddp']:.2f} |")


if __name__ == "__main__":
    main()
