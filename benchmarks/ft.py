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
* ``ft``: ``ft.DistributedDataParallel`` with what ``ft.OptimizerWrapper`` does: ``start_step`` and the
  commit vote (one 16-byte all_reduce, and rank 0's read of the join doorbell) on top.

Each block's time is the slowest replica's; the table gives medians over blocks. The quorum's
overhead is ``ft - ft hook``; measured directly, the time the ``ft`` contender spends inside
``start_step`` and ``should_commit`` (this includes waiting for the slower replica in the vote's
all_reduce, a wait plain DDP has in its gradient all_reduce instead), and the quorum's own cost:
the two calls timed right after a barrier, so that neither replica waits for the other. The
goal (issue 33): <= 3% of the ``ddp`` step at 2 ranks, B=512.
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
    rng = np.random.default_rng(dist.get_rank())
    x = tb.tensor(rng.standard_normal((args.batch, 784)).astype(np.float32))
    y = tb.tensor(rng.integers(0, 10, args.batch))
    loss_fn = tb.nn.CrossEntropyLoss()

    in_quorum = [0.0]  # seconds inside start_step + should_commit (the ft contender)

    def step(name):
        if name == "ft":  # OptimizerWrapper's two calls, timed one by one
            t0 = time.perf_counter()
            manager.start_step()
            in_quorum[0] += time.perf_counter() - t0
            opts["ft"].zero_grad()
            loss_fn(wrapped[name](x), y).backward()
            t0 = time.perf_counter()
            ok = manager.should_commit()
            in_quorum[0] += time.perf_counter() - t0
            if ok:
                opts["ft"].step()
            return
        opt = opts[name]
        opt.zero_grad()
        loss_fn(wrapped[name](x), y).backward()
        opt.step()

    times: dict = {k: [] for k in wrapped}
    for name in wrapped:  # warm-up (bucket rebuild, first allocations)
        for _ in range(3):
            step(name)
    in_quorum[0] = 0.0
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
    # the quorum's own cost, without the replicas' skew: both arrive together (a barrier)
    own = []
    for _ in range(args.blocks * args.steps):
        dist.barrier()
        t0 = time.perf_counter()
        manager.start_step()
        manager.should_commit()
        own.append(time.perf_counter() - t0)
    own_t = tb.tensor(np.array([statistics.median(own)]))
    dist.all_reduce(own_t, op=dist.ReduceOp.MAX)
    times["own"] = [float(own_t.item())]
    per_step = tb.tensor(np.array([in_quorum[0] / (args.blocks * args.steps)]))
    dist.all_reduce(per_step, op=dist.ReduceOp.MAX)
    times["in_quorum"] = [float(per_step.item())]
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
    in_quorum = times.pop("in_quorum")[0]
    own = times.pop("own")[0]
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<10} {med * 1e3:>10.2f} {med / base - 1:>+8.1%}")
    quorum = [a - b for a, b in zip(times["ft"], times["ft hook"])]
    print(f"quorum overhead (ft - ft hook, median of per-block differences): "
          f"{statistics.median(quorum) * 1e3:.3f} ms = {statistics.median(quorum) / base:+.2%} "
          "of the ddp step")
    print(f"time inside start_step + should_commit per ft step (slowest replica's mean): "
          f"{in_quorum * 1e3:.3f} ms = {in_quorum / base:.2%} of the ddp step (includes waiting "
          "for the slower replica, which DDP absorbs in its own all_reduce)")
    print(f"the quorum's own cost per step (start_step + should_commit right after a barrier, "
          f"median): {own * 1e3:.3f} ms = {own / base:.2%} of the ddp step")
    store.close()


if __name__ == "__main__":
    main()
