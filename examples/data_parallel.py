"""DataParallel: one process, the batch split over devices, replicas in threads.

    python examples/data_parallel.py                 # two CPU "devices" (threads)
    python examples/data_parallel.py --devices 4
    python examples/data_parallel.py --cuda          # every visible GPU

Each step scatters the batch, runs one replica per device in its own thread, gathers the
outputs and backpropagates into the original parameters (the replicas' gradients summed). The
script trains for a few steps, checks that the gradient equals the single-module gradient on the
whole batch, and prints the time per step of both. On CPU, NumPy releases the GIL inside BLAS,
so replicas overlap their matrix products; for real speed-ups prefer DistributedDataParallel
(one process per device), as with PyTorch.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import tensorbrain as tb
from tensorbrain import nn
from tensorbrain.nn import functional as F


def build():
    tb.manual_seed(0)
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--devices", type=int, default=2, help="CPU replicas (default 2)")
    ap.add_argument("--cuda", action="store_true", help="use every visible GPU instead")
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args(argv)
    device_ids = (list(range(tb.cuda.device_count())) if a.cuda else ["cpu"] * a.devices)
    dev = "cuda:0" if a.cuda else "cpu"
    rng = np.random.default_rng(0)
    x = tb.tensor(rng.standard_normal((a.batch, 256)).astype(np.float32), device=dev)
    y = tb.tensor(rng.integers(0, 10, a.batch), device=dev)

    single = build().to(dev)
    dp = nn.DataParallel(build().to(dev), device_ids=device_ids)
    times = {"single module": 0.0, f"DataParallel x{len(device_ids)}": 0.0}
    worst = 0.0
    for step in range(a.steps):
        for name, model in zip(times, (single, dp)):
            model.zero_grad()
            t0 = time.perf_counter()
            F.cross_entropy(model(x), y).backward()
            if step:  # the first step warms up
                times[name] += time.perf_counter() - t0
        worst = max(worst, max(float(np.abs(tb.tensor(p.grad).data - tb.tensor(q.grad).data).max())
                               for p, q in zip(single.parameters(), dp.module.parameters())))
        with tb.no_grad():  # the same SGD step on both, so they stay equal
            for m in (single, dp.module):
                for p in m.parameters():
                    p.data -= 0.01 * p.grad.data
    for name, t in times.items():
        print(f"{name:>18}: {1e3 * t / max(a.steps - 1, 1):7.2f} ms per forward+backward")
    print(f"largest gradient difference DataParallel vs single module: {worst:.2e}")
    return worst


if __name__ == "__main__":
    main()
