"""Convolution training steps and conv micro-cases: TensorBrain vs torch, side by side.

Workloads (random data, one process, torch and BLAS pinned to one thread each):

* ``cnn``: a 3-block conv net on B=32 3x32x32 images: 3 x [conv3x3 + BatchNorm2d + ReLU +
  maxpool2] (32, 64, 128 channels) -> Linear(2048, 10), cross-entropy, SGD momentum 0.9;
* ``dcgan``: PyTorch's DCGAN generator (ngf=64): nz=100 -> 4 x [ConvTranspose2d + BatchNorm2d +
  ReLU] -> ConvTranspose2d + Tanh -> B=16 64x64x3 images; MSE to a fixed image, Adam(2e-4,
  betas=(0.5, 0.999));
* ``conv2d``: F.conv2d forward + backward, 32x32x32x32 input, 64 3x3 filters, padding 1;
* ``conv_transpose2d``: F.conv_transpose2d forward + backward, 16x256x8x8 input, 128 4x4
  filters, stride 2, padding 1 (a DCGAN middle layer).

Rounds alternate TensorBrain and torch (``--steps`` steps each per round) and each
implementation's median per-step CPU time is reported with the ratio tb / torch (CPU time holds
its ratio on a shared machine where wall time swings; compare ratios from one run only).

    python benchmarks/conv.py                       # everything
    python benchmarks/conv.py --workload dcgan --rounds 7 --steps 3

Goal (not asserted anywhere): every ratio <= 1.25.
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # before NumPy loads
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # _common, also under python -m
import tensorbrain as tb  # noqa: E402

import _common  # noqa: E402


# ***** the models, written once for either library (``lib`` is tensorbrain or torch) *****
def cnn(lib):
    nn = lib.nn
    blocks = []
    for cin, cout in ((3, 32), (32, 64), (64, 128)):
        blocks += [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(),
                   nn.MaxPool2d(2)]
    return nn.Sequential(*blocks, nn.Flatten(), nn.Linear(128 * 4 * 4, 10))


def dcgan(lib, nz=100, ngf=64):
    nn = lib.nn
    layers, cin = [], nz
    for i, cout in enumerate((ngf * 8, ngf * 4, ngf * 2, ngf)):
        layers += [nn.ConvTranspose2d(cin, cout, 4, 1 if i == 0 else 2, 0 if i == 0 else 1,
                                      bias=False), nn.BatchNorm2d(cout), nn.ReLU(True)]
        cin = cout
    return nn.Sequential(*layers, nn.ConvTranspose2d(cin, 3, 4, 2, 1, bias=False), nn.Tanh())


def _copy_weights(src, dst):
    """Same initial weights in both libraries (so both do the same arithmetic)."""
    import torch
    with torch.no_grad():
        for (_, p), (_, q) in zip(src.named_parameters(), dst.named_parameters(), strict=True):
            q.copy_(torch.from_numpy(np.array(p._data)))


def model_steps(name):
    import torch
    rng = np.random.default_rng(0)
    if name == "cnn":
        x = rng.standard_normal((32, 3, 32, 32)).astype(np.float32)
        y = rng.integers(0, 10, 32)
        m_tb, m_t = cnn(tb), cnn(torch)
        opt_tb = tb.optim.SGD(m_tb.parameters(), lr=0.01, momentum=0.9)
        opt_t = torch.optim.SGD(m_t.parameters(), lr=0.01, momentum=0.9)
        loss_tb = lambda out, t: tb.nn.functional.cross_entropy(out, t)   # noqa: E731
        loss_t = torch.nn.functional.cross_entropy
    else:
        x = rng.standard_normal((16, 100, 1, 1)).astype(np.float32)
        y = rng.uniform(-1, 1, (16, 3, 64, 64)).astype(np.float32)
        m_tb, m_t = dcgan(tb), dcgan(torch)
        opt_tb = tb.optim.Adam(m_tb.parameters(), lr=2e-4, betas=(0.5, 0.999))
        opt_t = torch.optim.Adam(m_t.parameters(), lr=2e-4, betas=(0.5, 0.999))
        loss_tb = lambda out, t: tb.nn.functional.mse_loss(out, t)   # noqa: E731
        loss_t = torch.nn.functional.mse_loss
    _copy_weights(m_tb, m_t)
    xt, yt = tb.from_numpy(x), tb.from_numpy(y)
    xT, yT = torch.from_numpy(x), torch.from_numpy(y)

    def step_tb():
        opt_tb.zero_grad()
        loss_tb(m_tb(xt), yt).backward()
        opt_tb.step()

    def step_torch():
        opt_t.zero_grad()
        loss_t(m_t(xT), yT).backward()
        opt_t.step()
    return step_tb, step_torch


def micro_steps(name):
    import torch
    rng = np.random.default_rng(0)
    if name == "conv2d":
        xs, ws, kw = (32, 32, 32, 32), (64, 32, 3, 3), dict(padding=1)
    else:
        xs, ws, kw = (16, 256, 8, 8), (256, 128, 4, 4), dict(stride=2, padding=1)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.05).astype(np.float32)
    b = rng.standard_normal(ws[0] if name == "conv2d" else ws[1]).astype(np.float32)
    fn_tb = getattr(tb.nn.functional, name)
    fn_t = getattr(torch.nn.functional, name)
    ts = [tb.tensor(a, requires_grad=True) for a in (x, w, b)]
    Ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]

    def step_tb():
        for t in ts:
            t.grad = None
        fn_tb(*ts, **kw).sum().backward()

    def step_torch():
        for t in Ts:
            t.grad = None
        fn_t(*Ts, **kw).sum().backward()
    return step_tb, step_torch


def measure(step_tb, step_torch, rounds, steps):
    for f in (step_tb, step_torch):   # warm-up: first-step allocations, optimizer state
        f()
        f()
    times = {"tb": [], "torch": []}
    for _ in range(rounds):
        for key, f in (("tb", step_tb), ("torch", step_torch)):
            t0 = time.process_time()
            for _ in range(steps):
                f()
            times[key].append((time.process_time() - t0) / steps)
    return statistics.median(times["tb"]), statistics.median(times["torch"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=["all", "cnn", "dcgan", "conv2d", "conv_transpose2d"],
                    default="all")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    info = _common.blas()
    print(f"cpu: {_common.cpu_model()}; numpy {np.__version__} ({info.get('name', '?')} "
          f"{info.get('version', '')}), torch {torch.__version__}; one thread each; CPU time, "
          f"median of {args.rounds} rounds x {args.steps} steps")
    names = ["cnn", "dcgan", "conv2d", "conv_transpose2d"] if args.workload == "all" \
        else [args.workload]
    print("| workload | tensorbrain | torch | tb / torch |\n| --- | ---: | ---: | ---: |")
    for name in names:
        steps = model_steps(name) if name in ("cnn", "dcgan") else micro_steps(name)
        a, b = measure(*steps, args.rounds, args.steps)
        print(f"| {name} | {a * 1e3:.1f} ms | {b * 1e3:.1f} ms | {a / b:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
