"""What live recovery costs when nothing fails: a DDP step with and without ``tb.distributed.ft``.

    python benchmarks/ft.py                  # 2 replicas, MLP 784-512-512-10, B=512 per rank
    python benchmarks/ft.py --batch 64 --blocks 9 --steps 20

The script serves the store (it must outlive the replicas) and starts the replicas itself,
one BLAS thread each. In the same processes, in interleaved blocks of ``--steps`` steps (so the
machine's load hits every contender alike), three contenders train their own copy of the model
with SGD (momentum 0.9) on random data:

* ``ddp``: ``tb.nn.parallel.DistributedDataParallel`` over the live group (the baseline);
* ``ft hook``: ``ft.DistributedDataParallel`` (gradients through the manager's all_reduce) with
  the plain optimizer step: what routing the buckets through the manager costs;
* ``ft``: ``ft.DistributedDataParallel`` with ``ft.OptimizerWrapper``: ``start_step`` and the
  commit vote (one 16-byte all_reduce, and rank 0's read of the join doorbell) on top.

Each block's time is the slowest replica's; the table gives medians over blocks. The quorum's
overhead is ``ft - ft hook``; the goal (issue 33): <= 3% of the ``ddp`` step at 2 ranks, B=512.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def _mlp(tb):
    nn = tb.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def worker(args) -> None:
    import numpy as np

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    import tensorbrain.distributed.ft as ft
    from tensorbrain.nn.parallel import DistributedDataParallel as DDP

    tb.manual_seed(0)
    models = {k: _mlp(tb) for k in ("ddp", "ft hook", "ft")}
    opts = {k: tb.optim.SGD(m.parameters(), lr=0.01, momentum=0.9) for k, m in models.items()}
    manager = ft.Manager(models["ft"], opts["ft"], timeout=60)
    wrapped = {"ddp": DDP(models["ddp"]),
               "ft hook": ft.DistributedDataParallel(manager, models["ft hook"]),
               "ft": ft.DistributedDataParallel(manager, models["ft"])}
    ft_opt = ft.OptimizerWrapper(manager, opts["ft"])
    rng = np.random.default_rng(dist.get_rank())
    x = tb.tensor(rng.standard_normal((args.batch, 784)).astype(np.float32))
    y = tb.tensor(rng.integers(0, 10, args.batch))
    loss_fn = tb.nn.CrossEntropyLoss()

    def step(name):
        opt = ft_opt if name == "ft" else opts[name]
        opt.zero_grad()
        loss_fn(wrapped[name](x), y).backward()
        opt.step()

    times: dict = {k: [] for k in wrapped}
    for name in wrapped:  # warm-up (bucket rebuild, first allocations)
        for _ in range(3):
            step(name)
    for block in range(args.blocks):
        order = list(wrapped)
        order = order[block % 3:] + order[:block % 3]
        for name in order:
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(args.steps):
                step(name)
            mine = tb.tensor(np.array([(time.perf_counter() - t0) / args.steps]))
            dist.all_reduce(mine, op=dist.ReduceOp.MAX)
            times[name].append(float(mine.item()))
    if dist.get_rank() == 0:
        print("RESULT " + json.dumps(times), flush=True)
    manager.shutdown()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--batch", type=int, default=512, help="samples per replica and step")
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--steps", type=int, default=20, help="steps per block")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args)
    from tensorbrain.distributed.store import TCPStore
    store = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=300)
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(store.port),
               WORLD_SIZE=str(args.replicas), PYTHONPATH=ROOT)
    load = os.getloadavg()
    cmd = [sys.executable, __file__, "--worker", "--batch", str(args.batch), "--blocks",
           str(args.blocks), "--steps", str(args.steps)]
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(args.replicas)]
    out = "".join(p.communicate(timeout=1800)[0] for p in procs)
    times = json.loads(next(line[7:] for line in out.splitlines() if line.startswith("RESULT ")))
    base = statistics.median(times["ddp"])
    print(f"# {args.replicas} replicas, MLP 784-512-512-10, B={args.batch} per replica, "
          f"{args.blocks} blocks x {args.steps} steps; load average {load[0]:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after")
    print(f"{'contender':<10} {'step (ms)':>10} {'vs ddp':>8}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<10} {med * 1e3:>10.2f} {med / base - 1:>+8.1%}")
    quorum = [a - b for a, b in zip(times["ft"], times["ft hook"])]
    print(f"quorum overhead (ft - ft hook, median of per-block differences): "
          f"{statistics.median(quorum) * 1e3:.3f} ms = {statistics.median(quorum) / base:+.2%} "
          "of the ddp step")
    store.close()


if __name__ == "__main__":
    main()
