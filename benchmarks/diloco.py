"""DiLoCo against DDP over a slow link: 2 replicas in two network namespaces joined by a shaped
link (``tensorbrain.testing.shaped_link``: 100 Mbit/s, 20 ms one way; needs root).

    python benchmarks/diloco.py                       # H=50, 600 steps
    python benchmarks/diloco.py --steps 600 --sync-every 50 --rate 100 --delay 20

Task: classify 64-dimensional inputs labelled by a fixed random "teacher" MLP with label noise
(so the loss has a floor both methods approach); model MLP 64-256-256-10 (85k parameters);
each replica takes B=64 samples per step from its half of the 131 072 training samples (no
sample is seen twice in these runs, so neither method overfits); the figure is the
cross-entropy on 4096 held-out samples. Both methods use AdamW (lr 1e-3) per step:

* ``ddp``: ``tb.nn.parallel.DistributedDataParallel`` (gradients averaged every step);
* ``diloco``: ``tb.distributed.ft.DiLoCo`` with AdamW inside and SGD(lr 0.7, momentum 0.9,
  Nesterov) outside every ``--sync-every`` steps (the paper's outer optimizer).

The relay counts every byte of every IP packet on the link, in both directions, for the whole
run of each method (start-up and store traffic included). Wall time is the training loop's, on
rank 0. Goals (issue 33): DiLoCo within 2% of DDP's loss, >= 40x less traffic, faster.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

DIM, CLASSES, N_TRAIN, N_EVAL, B = 64, 10, 131072, 4096, 64


def task():
    """The data set (the same in every process: seeded)."""
    import numpy as np
    rng = np.random.default_rng(2023)
    x = rng.standard_normal((N_TRAIN + N_EVAL, DIM)).astype(np.float32)
    w1 = rng.standard_normal((DIM, 128)).astype(np.float32) / np.sqrt(DIM)
    w2 = rng.standard_normal((128, CLASSES)).astype(np.float32) / np.sqrt(128) * 3
    logits = np.tanh(x @ w1) @ w2
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    u = rng.random((len(x), 1))
    y = np.minimum((p.cumsum(1) < u).sum(1), CLASSES - 1)  # label noise: sampled labels
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]


def worker(mode: str, steps: int, h: int) -> None:
    import numpy as np

    import tensorbrain as tb
    import tensorbrain.distributed as dist
    from tensorbrain.distributed import ft
    from tensorbrain.nn.parallel import DistributedDataParallel as DDP

    dist.init_process_group("tcp")
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y, xe, ye = task()
    mine = np.arange(rank, N_TRAIN, world)
    tb.manual_seed(0)
    model = tb.nn.Sequential(tb.nn.Linear(DIM, 256), tb.nn.ReLU(), tb.nn.Linear(256, 256),
                             tb.nn.ReLU(), tb.nn.Linear(256, CLASSES))
    inner = tb.optim.AdamW(model.parameters(), lr=1e-3)
    if mode == "ddp":
        net, opt = DDP(model), inner
    else:
        outer = tb.optim.SGD(model.parameters(), lr=0.7, momentum=0.9, nesterov=True)
        net, opt = model, ft.DiLoCo(model, inner, outer, sync_every=h)
    rng = np.random.default_rng(rank)
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(steps):
        idx = rng.choice(mine, B, replace=False)
        opt.zero_grad()
        tb.nn.functional.cross_entropy(net(tb.tensor(x[idx])), tb.tensor(y[idx])).backward()
        opt.step()
    dist.barrier()
    wall = time.perf_counter() - t0
    with tb.no_grad():
        loss = float(tb.nn.functional.cross_entropy(model(tb.tensor(xe)), tb.tensor(ye)).item())
    if rank == 0:
        print("RESULT " + json.dumps({"wall": wall, "loss": loss}), flush=True)
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=600)
    p.add_argument("--sync-every", type=int, default=50)
    p.add_argument("--rate", type=float, default=100.0, help="Mbit/s")
    p.add_argument("--delay", type=float, default=20.0, help="one-way ms")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return worker(args.worker, args.steps, args.sync_every)
    from tensorbrain.testing.shaped_link import shaped_link, why_unavailable
    why = why_unavailable()
    if why:
        sys.exit(f"benchmarks/diloco.py: {why}")
    load0 = os.getloadavg()[0]
    rows = {}
    with shaped_link(rate_mbit=args.rate, delay_ms=args.delay) as link:
        for port, mode in enumerate(("ddp", "diloco"), 29631):
            env = dict(os.environ, MASTER_ADDR=link.addresses[0], MASTER_PORT=str(port),
                       WORLD_SIZE="2", PYTHONPATH=ROOT, TB_SHM="0", TB_TCP_UNIX="0")
            before = link.stats()["bytes"]
            cmd = [sys.executable, __file__, "--worker", mode, "--steps", str(args.steps),
                   "--sync-every", str(args.sync_every)]
            procs = [link.popen(r, cmd, env=dict(env, RANK=str(r)), stdout=-1, text=True)
                     for r in (0, 1)]
            out = [pr.communicate(timeout=3600)[0] for pr in procs]
            after = link.stats()["bytes"]
            res = json.loads(next(line[7:] for line in out[0].splitlines()
                                  if line.startswith("RESULT ")))
            res["bytes"] = sum(after) - sum(before)
            rows[mode] = res
    d, s = rows["ddp"], rows["diloco"]
    print(f"# 2 replicas over a shaped link ({args.rate:g} Mbit/s, {args.delay:g} ms one way), "
          f"MLP 64-256-256-10, B={B} per replica, {args.steps} steps, DiLoCo H="
          f"{args.sync_every}; load average {load0:.2f} before, {os.getloadavg()[0]:.2f} after")
    print(f"{'method':<8} {'eval loss':>10} {'wall (s)':>9} {'link MB':>9}")
    for name, r in rows.items():
        print(f"{name:<8} {r['loss']:>10.4f} {r['wall']:>9.1f} {r['bytes'] / 1e6:>9.2f}")
    print(f"diloco vs ddp: loss {s['loss'] / d['loss'] - 1:+.2%}, traffic "
          f"{d['bytes'] / s['bytes']:.1f}x less, wall time {d['wall'] / s['wall']:.1f}x faster")


if __name__ == "__main__":
    main()
