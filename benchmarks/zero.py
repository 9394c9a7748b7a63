"""ZeroRedundancyOptimizer vs plain DDP + Adam at N ranks: optimizer memory per rank, step time.

    python benchmarks/zero.py                  # MLP 784-512-512-10, B=64 and 512 per rank, 2 ranks
    python benchmarks/zero.py --batches 512 --blocks 41 --steps 5
    python benchmarks/zero.py --quick          # smoke run

Every rank is a process with 1 BLAS thread (``run_workers``, TCP backend). Each rank builds three
copies of the same model, each under its own ``DistributedDataParallel``: with ``tb.optim.Adam``
(the baseline), with ``ZeroRedundancyOptimizer(Adam)``, and with ZeRO and
``parameters_as_bucket_view=True``. They run in interleaved blocks of steps (``zero_grad;
cross_entropy(model(x), y).backward(); step()``) so load changes on this shared machine hit all
alike; a block's time is the slowest rank's, the figure is the median over blocks. "CPU per
step" is the busiest rank's process CPU time per step (median over blocks): it counts the work
each variant does but not the time spent waiting for a core, so it is the steadier figure on a
loaded machine.

Memory: bytes of optimizer state per rank (``exp_avg`` + ``exp_avg_sq``; "+ scratch" adds the
one scratch buffer per parameter that our Adam keeps to step without allocating).
Goal (issue 16, not asserted anywhere): ZeRO step <= 1.15 x DDP's at 2 ranks.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

CONTENDERS = ("ddp+adam", "ddp+zero", "ddp+zero(bucket view)")


def _state_bytes(optim, scratch):
    return sum(v.nbytes for st in optim.state.values() for k, v in st.items()
               if hasattr(v, "nbytes") and (scratch or not k.startswith("_")))


def worker(rank, world, batch, blocks, steps, warmup):
    import numpy as np

    import tensorbrain as tb
    from tensorbrain.distributed.optim import ZeroRedundancyOptimizer
    DDP = tb.nn.parallel.DistributedDataParallel
    rng = np.random.default_rng(rank)
    x = tb.from_numpy(rng.standard_normal((batch, 784)).astype(np.float32))
    y = tb.from_numpy(rng.integers(0, 10, batch))

    def mlp():
        tb.manual_seed(0)
        return tb.nn.Sequential(tb.nn.Linear(784, 512), tb.nn.ReLU(), tb.nn.Linear(512, 512),
                                tb.nn.ReLU(), tb.nn.Linear(512, 10))
    runs = {}
    for name in CONTENDERS:
        model = DDP(mlp())
        if name == "ddp+adam":
            opt = tb.optim.Adam(model.parameters(), lr=1e-3)
        else:
            opt = ZeroRedundancyOptimizer(model.parameters(), tb.optim.Adam, lr=1e-3,
                                          parameters_as_bucket_view="bucket" in name)

        def step(model=model, opt=opt):
            opt.zero_grad()
            tb.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        runs[name] = (step, opt)
    for step, _ in runs.values():
        for _ in range(warmup):
            step()
    times = {name: [] for name in runs}
    cpu = {name: [] for name in runs}
    for _ in range(blocks):
        for name, (step, _) in runs.items():
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(steps):
                step()
            times[name].append((time.perf_counter() - t0) / steps)
            cpu[name].append((time.process_time() - c0) / steps)
    mem = {}
    for name, (_, opt) in runs.items():
        local = opt.optim if hasattr(opt, "optim") else opt
        mem[name] = [_state_bytes(local, False), _state_bytes(local, True)]
    return {"times": times, "cpu": cpu, "mem": mem}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--blocks", type=int, default=41)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    if a.quick:
        a.batches, a.blocks, a.steps, a.warmup = [64], 2, 3, 2
    from benchmarks._common import cpu_model
    from tensorbrain.testing.distributed import run_workers
    print(f"# ZeRO vs DDP+Adam, MLP 784-512-512-10, {a.world} ranks, TCP, 1 thread/rank, "
          f"{cpu_model()}")
    for batch in a.batches:
        res = run_workers("benchmarks.zero:worker", a.world, batch, a.blocks, a.steps, a.warmup,
                          timeout=1200)
        med, cpu = {}, {}
        for name in CONTENDERS:
            per_block = [max(r["times"][name][b] for r in res) for b in range(a.blocks)]
            med[name] = statistics.median(per_block)
            cpu[name] = statistics.median(max(r["cpu"][name][b] for r in res)
                                          for b in range(a.blocks))
        base = med["ddp+adam"]
        print(f"\n## B={batch} per rank\n")
        print("| optimizer | step (ms) | vs DDP+Adam | CPU per step (ms) | vs DDP+Adam | "
              "optimizer state per rank (MiB) | + scratch (MiB) |")
        print("| --- | ---: | ---: | ---: | ---: | --- | --- |")
        for name in CONTENDERS:
            state = " / ".join(f"{r['mem'][name][0] / 2**20:.2f}" for r in res)
            scratch = " / ".join(f"{r['mem'][name][1] / 2**20:.2f}" for r in res)
            print(f"| {name} | {med[name] * 1e3:.2f} | {med[name] / base:.2f}x | "
                  f"{cpu[name] * 1e3:.2f} | {cpu[name] / cpu['ddp+adam']:.2f}x | {state} | "
                  f"{scratch} |")


if __name__ == "__main__":
    main()
