"""Per-op dispatch overhead and the MLP training step, TensorBrain vs hand-written NumPy (vs torch).

    python benchmarks/ops.py                 # 1 BLAS thread (independent of idle cores)
    python benchmarks/ops.py --threads 2     # both cores
    python benchmarks/ops.py --quick         # fewer steps, for a smoke run

The MLP is 784-512-512-10 with ReLU, cross-entropy and SGD (lr 0.01, momentum 0.9). The NumPy
baseline is the same math written by hand: forward, backward, and the momentum update in place
(the same in-place update tb.optim.SGD does). The figures are printed as ratios measured side by
side in one run; short blocks of steps are interleaved (order rotated each round) and the ratio is the median
of the per-round ratios, so machine noise hits every contender alike.
Timing goals are not asserted anywhere (docs/tensor.md records the figures).
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

# BLAS thread counts must be set before NumPy loads its BLAS (this script is the process entry,
# so it writes them; the library itself reads environment variables only via tensorbrain._config).
_ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
_ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads (default 1)")
_ap.add_argument("--quick", action="store_true", help="fewer steps (smoke run)")
_ap.add_argument("--no-torch", action="store_true", help="skip torch even when installed")
_ap.add_argument("--batches", default="64,512", help="comma-separated batch sizes")
_ap.add_argument("--only", choices=["dispatch", "conv", "mlp", "profiler"],
                 help="run one section")
ARGS = _ap.parse_args() if __name__ == "__main__" else _ap.parse_args([])
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = str(ARGS.threads)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402

import tensorbrain as tb  # noqa: E402
import tensorbrain.nn.functional as F  # noqa: E402

import _common  # noqa: E402  (benchmarks/ is sys.path[0] when a benchmark runs as a script)

LR, MOMENTUM = 0.01, 0.9
SIZES = (784, 512, 512, 10)


def hardware() -> str:
    blas = _common.blas().get("name", "?")
    return (f"{_common.cpu_model()}; {os.cpu_count()} logical cores; "
            f"Python {platform.python_version()}; "
            f"NumPy {np.__version__} ({blas}); BLAS threads {ARGS.threads}")


def timeit(fn, number, repeat=5):
    """Best of ``repeat`` blocks of the mean time per call (seconds): on a shared machine noise
    only ever adds time, so the minimum is the most repeatable figure for a microbenchmark."""
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t0) / number)
    return float(np.min(out))


# ***** dispatch overhead *****
def dispatch():
    print("\n== per-op dispatch overhead (small float32 tensors) ==")
    print(f"{'op':<34}{'NumPy':>10}{'tb':>10}{'tb, grad':>11}{'overhead':>11}")
    a_np = np.random.rand(16, 16).astype(np.float32)
    b_np = np.random.rand(16, 16).astype(np.float32)
    a, b = tb.from_numpy(a_np), tb.from_numpy(b_np)
    ag = tb.tensor(a_np, requires_grad=True)
    n = 2000 if ARGS.quick else 20000
    rows = [
        ("add 16x16", lambda: a_np + b_np, lambda: a + b, lambda: ag + b),
        ("mul 16x16", lambda: a_np * b_np, lambda: a * b, lambda: ag * b),
        ("matmul 16x16", lambda: a_np @ b_np, lambda: a @ b, lambda: ag @ b),
        ("relu 16x16", lambda: np.maximum(a_np, 0), lambda: a.relu(), lambda: ag.relu()),
        ("sum 16x16", lambda: a_np.sum(), lambda: a.sum(), lambda: ag.sum()),
        ("add scalar", lambda: a_np + 1.0, lambda: a + 1.0, lambda: ag + 1.0),
    ]
    for name, f_np, f_tb, f_g in rows:
        t_np, t_tb, t_g = timeit(f_np, n), timeit(f_tb, n), timeit(f_g, n)
        print(f"{name:<34}{t_np * 1e6:>8.2f}us{t_tb * 1e6:>8.2f}us{t_g * 1e6:>9.2f}us"
              f"{(t_tb - t_np) * 1e6:>9.2f}us")

    def fwd_bwd():
        x = tb.tensor(a_np, requires_grad=True)
        y = x
        for _ in range(10):
            y = y * 1.0001
        y.sum().backward()
    t = timeit(fwd_bwd, n // 20)
    print(f"{'10 muls + sum + backward, per op':<34}{'':>10}{'':>10}{t / 11 * 1e6:>9.2f}us")


# ***** MLP step *****
def init_params(seed=0):
    rng = np.random.default_rng(seed)
    ps = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        bound = 1 / np.sqrt(fan_in)
        ps.append(rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32))
        ps.append(rng.uniform(-bound, bound, fan_out).astype(np.float32))
    return ps


def make_numpy_step(x, y):
    """The same math by hand: forward, backward, SGD momentum in place."""
    W1, b1, W2, b2, W3, b3 = params = init_params()
    bufs = [None] * 6
    tmps = [np.empty_like(p) for p in params]
    n = x.shape[0]
    rows = np.arange(n)

    def step():
        h1 = x @ W1.T
        h1 += b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ W2.T
        h2 += b2
        a2 = np.maximum(h2, 0)
        z = a2 @ W3.T
        z += b3
        m = z.max(axis=1, keepdims=True)
        e = np.exp(z - m)
        s = e.sum(axis=1, keepdims=True)
        logp = z - m - np.log(s)
        loss = -logp[rows, y].mean()
        dz = e / s
        dz[rows, y] -= 1
        dz /= n
        gW3, gb3 = dz.T @ a2, dz.sum(axis=0)
        da2 = (dz @ W3) * (a2 > 0)
        gW2, gb2 = da2.T @ a1, da2.sum(axis=0)
        da1 = (da2 @ W2) * (a1 > 0)
        gW1, gb1 = da1.T @ x, da1.sum(axis=0)
        for i, (p, g) in enumerate(zip(params, (gW1, gb1, gW2, gb2, gW3, gb3))):
            if bufs[i] is None:
                bufs[i] = g.copy()
            else:
                bufs[i] *= MOMENTUM
                bufs[i] += g
            np.multiply(bufs[i], LR, out=tmps[i])
            p -= tmps[i]
        return loss
    return step


def make_tb_step(x, y):
    params = [tb.tensor(p, requires_grad=True) for p in init_params()]
    W1, b1, W2, b2, W3, b3 = params
    xt, yt = tb.from_numpy(x), tb.from_numpy(y)
    opt = tb.optim.SGD(params, lr=LR, momentum=MOMENTUM)

    def step():
        opt.zero_grad()
        h = F.relu(F.linear(xt, W1, b1))
        h = F.relu(F.linear(h, W2, b2))
        loss = F.cross_entropy(F.linear(h, W3, b3), yt)
        loss.backward()
        opt.step()
        return loss
    return step


def make_torch_step(x, y):
    import torch
    torch.set_num_threads(ARGS.threads)
    params = [torch.tensor(p, requires_grad=True) for p in init_params()]
    W1, b1, W2, b2, W3, b3 = params
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM)
    TF = torch.nn.functional

    def step():
        opt.zero_grad()
        h = TF.relu(TF.linear(xt, W1, b1))
        h = TF.relu(TF.linear(h, W2, b2))
        loss = TF.cross_entropy(TF.linear(h, W3, b3), yt)
        loss.backward()
        opt.step()
        return loss
    return step


def mlp(batch):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], batch).astype(np.int64)
    steps = {"numpy (hand-written)": make_numpy_step(x, y), "tensorbrain": make_tb_step(x, y)}
    if not ARGS.no_torch:
        try:
            steps["torch"] = make_torch_step(x, y)
        except ImportError:
            pass
    # Same starting point, same math: the first losses must agree (a correctness guard).
    l_np, l_tb = float(steps["numpy (hand-written)"]()), float(steps["tensorbrain"]().item())
    assert abs(l_np - l_tb) < 1e-4, (l_np, l_tb)
    warm, per_block, blocks = (5, 5, 6) if ARGS.quick else (20, 10 if batch <= 64 else 3, 40)
    for f in steps.values():
        for _ in range(warm):
            f()
    names = list(steps)
    times = {k: [] for k in steps}
    for r in range(blocks):  # interleaved short blocks, the order rotated every round
        for k in names[r % len(names):] + names[:r % len(names)]:
            f = steps[k]
            t0 = time.perf_counter()
            for _ in range(per_block):
                f()
            times[k].append((time.perf_counter() - t0) / per_block)
    base = times["numpy (hand-written)"]
    print(f"\n== MLP 784-512-512-10 step, B={batch} ({blocks} rounds x {per_block} steps) ==")
    print(f"{'':<24}{'median':>10}{'best':>10}   ratio to NumPy: median of per-round ratios (best/best)")
    for k, ts in times.items():
        paired = float(np.median(np.array(ts) / np.array(base)))
        print(f"{k:<24}{np.median(ts) * 1e3:>8.3f}ms{min(ts) * 1e3:>8.3f}ms   {paired:5.2f}x  "
              f"({min(ts) / min(base):4.2f}x)")
    return {k: float(np.median(v)) for k, v in times.items()}


def profiler_overhead(batch):
    """The tb MLP step with no profile and inside a recording ``tb.profiler.profile`` (plain, and
    with ``record_shapes=True``), interleaved blocks; the ratio is the median of the per-round
    ratios. With no profile nothing is installed (see tensorbrain/profiler/_hooks.py), so "off"
    is the ordinary step."""
    from tensorbrain.profiler import profile
    rng = np.random.default_rng(1)
    x = rng.standard_normal((batch, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], batch).astype(np.int64)
    step = make_tb_step(x, y)
    spans = {}

    def under(**kw):
        def run(n):  # the steps' time only: entering and leaving the profile is timed below
            with profile(**kw) as prof:
                t0 = time.perf_counter()
                for _ in range(n):
                    step()
                took = time.perf_counter() - t0
            spans[str(kw)] = len(prof.events()) / n
            return took
        return run

    def plain(n):
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        return time.perf_counter() - t0
    variants = {"off": plain, "profile()": under(), "profile(record_shapes)": under(record_shapes=True)}
    warm, per_block, blocks = (3, 3, 6) if ARGS.quick else (10, 10 if batch <= 64 else 3, 40)
    for f in variants.values():
        f(warm)
    names = list(variants)
    times = {k: [] for k in variants}
    for r in range(blocks):
        for k in names[r % len(names):] + names[:r % len(names)]:
            times[k].append(variants[k](per_block) / per_block)
    t0 = time.perf_counter()
    for _ in range(20):
        with profile():
            pass
    enter_exit = (time.perf_counter() - t0) / 20
    base = times["off"]
    print(f"\n== profiler overhead: MLP 784-512-512-10 step, B={batch} ({blocks} rounds x "
          f"{per_block} steps) ==")
    print(f"{'':<26}{'median':>10}   ratio to off (median of per-round ratios), spans per step")
    for k, ts in times.items():
        paired = float(np.median(np.array(ts) / np.array(base)))
        n = spans.get(str({}) if k == "profile()" else str({"record_shapes": True}), 0)
        print(f"{k:<26}{np.median(ts) * 1e3:>8.3f}ms   {paired:5.3f}x"
              + (f"   {n:.0f}" if k != "off" else ""))
    print(f"{'entering + leaving':<26}{enter_exit * 1e3:>8.3f}ms   (once per profile: installs "
          f"and removes the hooks)")


def conv_pool():
    """conv2d and max_pool2d forward+backward next to torch (no NumPy baseline: hand-written
    im2col NumPy would be this code)."""
    rng = np.random.default_rng(2)
    n, c, oc, hw = (8, 16, 32, 32) if ARGS.quick else (32, 32, 64, 32)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    w = rng.standard_normal((oc, c, 3, 3)).astype(np.float32) * 0.1
    xt, wt = tb.tensor(x, requires_grad=True), tb.tensor(w, requires_grad=True)

    def tb_conv():
        F.conv2d(xt, wt, padding=1).sum().backward()

    def tb_pool():
        F.max_pool2d(xt, 2).sum().backward()
    rows = [("conv2d 3x3 pad 1, fwd+bwd", tb_conv), ("max_pool2d 2x2, fwd+bwd", tb_pool)]
    torch_rows = {}
    if not ARGS.no_torch:
        try:
            import torch
            torch.set_num_threads(ARGS.threads)
            xq, wq = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
            torch_rows = {rows[0][0]: lambda: torch.nn.functional.conv2d(xq, wq, padding=1).sum().backward(),
                          rows[1][0]: lambda: torch.nn.functional.max_pool2d(xq, 2).sum().backward()}
        except ImportError:
            pass
    print(f"\n== conv / pool, input {n}x{c}x{hw}x{hw} float32, conv to {oc} channels ==")
    for name, f in rows:
        t = timeit(f, 2 if ARGS.quick else 5, repeat=3)
        line = f"{name:<30}tb {t * 1e3:8.2f} ms"
        if name in torch_rows:
            tt = timeit(torch_rows[name], 2 if ARGS.quick else 5, repeat=3)
            line += f"   torch {tt * 1e3:8.2f} ms   tb/torch {t / tt:5.2f}x"
        print(line)


def main():
    print("hardware:", hardware())
    try:
        import torch
        print("torch:", torch.__version__ if not ARGS.no_torch else "skipped")
    except ImportError:
        print("torch: not installed")
    if ARGS.only in (None, "dispatch"):
        dispatch()
    if ARGS.only in (None, "conv"):
        conv_pool()
    if ARGS.only in (None, "mlp"):
        for b in (int(v) for v in ARGS.batches.split(",")):
            mlp(b)
    if ARGS.only in (None, "profiler"):
        for b in (int(v) for v in ARGS.batches.split(",")):
            profiler_overhead(b)


if __name__ == "__main__":
    main()
