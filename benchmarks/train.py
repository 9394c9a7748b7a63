"""Training-step time: TensorBrain vs the same math written by hand in NumPy (and vs torch).

Two models, each trained with SGD (momentum 0.9) on cross-entropy, on random data:

* ``mlp``: 784-512-512-10 with ReLU (the model of docs/tensor.md's training-step table);
* ``cnn``: 28x28x1 -> conv3x3(16)+ReLU -> maxpool2 -> conv3x3(32)+ReLU -> maxpool2 -> fc(10).

A step is ``zero_grad; loss(model(x), y).backward(); step()``. The NumPy baseline does exactly
the same arithmetic by hand (im2col convolutions, in-place momentum update) with no framework
around it, so ``tb / numpy`` is TensorBrain's overhead. By default everything runs on one thread
(torch and BLAS pinned) and the process's CPU time is measured, in alternating rounds, reporting
each implementation's median: on a machine shared with other jobs, wall time swung 3x between
runs here while CPU-time ratios held (compare ratios from one run, never absolute times across
runs).

    python benchmarks/train.py                     # MLP at B=64 and 512, CNN at B=64
    python benchmarks/train.py --model mlp --batch-size 64 --rounds 15 --steps 20
    python benchmarks/train.py --threads 2 --clock wall   # both cores, elapsed time

Goals (not asserted anywhere): MLP within 1.15x of hand-written NumPy; CNN within 2x of torch.

``--workload`` runs issue 15's training steps instead, TensorBrain against torch in this one
process (one thread each, alternating rounds): a 3-block conv net (B=32, 3x32x32), ResNet-18
(B=8, 32x32), a DCGAN generator (4 ConvTranspose2d + BatchNorm, B=16), a 2-layer LSTM language
model (hidden 200, seq 35, B=20, 1000 words), the MLP 784-512-512-10 (B=64) and a 6-layer
char-level GPT (embedding 256, T=128, B=8); see _workloads.py. ``--profile STEPS`` prints
where each side's step time goes instead (docs/training.md, "At torch's level"). Both sides
start from the same weights; the first step's loss of each is printed as a check that they
compute the same thing. A workload whose layers tb.nn does not
have yet prints "skipped". Goal (issue 31): every ratio <= 1.0x torch, at --threads 1 and 2.

    python benchmarks/train.py --workload all --plot docs/img/train-workloads.png
    python benchmarks/train.py --workload convnet resnet18 --rounds 5 --steps 3
    python benchmarks/train.py --workload convnet gpt --amp bfloat16   # under autocast
    python benchmarks/train.py --workload all --rounds 9 --steps 3 --threads 2
    python benchmarks/train.py --workload lstm --profile 5              # where the time goes

With more than one thread each side leaves threads behind that spin for a while after its
round (OpenBLAS's workers about 0.1 s, torch's OpenMP ones), and in one process they take the
second core from the other side's next round: here torch's 2-thread MLP step took 8.3 ms right
after tb's round and 3.7 ms when OpenBLAS's workers had stopped spinning. So each round first
waits ``--settle`` seconds (default 0.3 with --threads > 1, else 0) and then runs one untimed
step, so that the side about to be timed starts with its own threads awake, as in a training
loop (on this VM a thread woken on an idle core took long enough to double a 3 ms MLP step).
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))   # _common, also under python -m
import tensorbrain as tb  # noqa: E402
from tensorbrain import nn  # noqa: E402
from tensorbrain.nn import functional as F  # noqa: E402

from tensorbrain import _gemm  # noqa: E402  (which GEMM the products run on: MKL or NumPy's)

import _common  # noqa: E402  (benchmarks/ is sys.path[0] when a benchmark runs as a script)
import _workloads  # noqa: E402

LR, MOMENTUM = 0.01, 0.9


# ***** hardware *****
def hardware() -> str:
    cpu = _common.cpu_model()
    info = _common.blas()
    blas = f"{info.get('name')} {info.get('version', '')}".strip() if info else "unknown BLAS"
    lines = [f"cpu: {cpu}, {os.cpu_count()} logical cores, load average "
             f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else f"cpu: {cpu}",
             f"python {platform.python_version()}, numpy {np.__version__} ({blas}), "
             f"tensorbrain {tb.__version__}, GEMM: {_gemm.backend()}"]
    return "\n".join(lines)


# ***** models in TensorBrain *****
def tb_mlp():
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


class TbCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


def tb_runner(model, x, y):
    opt = tb.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    xt, yt = tb.from_numpy(x), tb.from_numpy(y)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(xt), yt).backward()
        opt.step()
    return step


# ***** the same math by hand in NumPy *****
def _softmax_xent_grad(logits, y):
    z = logits - logits.max(1, keepdims=True)
    e = np.exp(z)
    p = e / e.sum(1, keepdims=True)
    n = logits.shape[0]
    loss = -np.log(p[np.arange(n), y]).mean()
    p[np.arange(n), y] -= 1
    p /= n
    return loss, p


class _Sgd:
    """In-place SGD with momentum (PyTorch's formula: buf = m*buf + g; p -= lr*buf), with one
    preallocated scratch array per parameter so a step allocates nothing."""

    def __init__(self, params):
        self.params = params
        self.bufs = None
        self.scratch = [np.empty_like(p) for p in params]

    def step(self, grads):
        if self.bufs is None:
            self.bufs = [g.copy() for g in grads]
        else:
            for b, g in zip(self.bufs, grads):
                b *= MOMENTUM
                b += g
        for p, b, s in zip(self.params, self.bufs, self.scratch):
            np.multiply(b, LR, out=s)
            p -= s


def numpy_mlp_runner(weights, x, y):
    w1, b1, w2, b2, w3, b3 = weights
    sgd = _Sgd([w1, b1, w2, b2, w3, b3])

    def step():
        h1 = x @ w1.T
        h1 += b1
        a1 = np.maximum(h1, 0)
        h2 = a1 @ w2.T
        h2 += b2
        a2 = np.maximum(h2, 0)
        logits = a2 @ w3.T
        logits += b3
        _, g = _softmax_xent_grad(logits, y)
        gw3, gb3 = g.T @ a2, g.sum(0)
        g = g @ w3
        g *= h2 > 0
        gw2, gb2 = g.T @ a1, g.sum(0)
        g = g @ w2
        g *= h1 > 0
        gw1, gb1 = g.T @ x, g.sum(0)
        sgd.step([gw1, gb1, gw2, gb2, gw3, gb3])
    return step


def _im2col(x, k=3, pad=1):
    """(N, C, H, W) -> (N*H*W, C*k*k) patches for a stride-1 'same' convolution."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    s = xp.strides
    win = np.lib.stride_tricks.as_strided(xp, (n, h, w, c, k, k),
                                          (s[0], s[2], s[3], s[1], s[2], s[3]))
    return win.reshape(n * h * w, c * k * k)


def _col2im(cols, shape, k=3, pad=1):
    n, c, h, w = shape
    g = cols.reshape(n, h, w, c, k, k)
    out = np.zeros((n, c, h + 2 * pad, w + 2 * pad), cols.dtype)
    for i in range(k):
        for j in range(k):
            out[:, :, i:i + h, j:j + w] += g[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return out[:, :, pad:pad + h, pad:pad + w]


def _conv_fwd(x, w, b):
    n, _, h, wd = x.shape
    cols = _im2col(x)
    out = cols @ w.reshape(w.shape[0], -1).T
    out += b
    return out.reshape(n, h, wd, -1).transpose(0, 3, 1, 2), cols


def _conv_bwd(g, cols, x_shape, w):
    o = w.shape[0]
    g2 = g.transpose(0, 2, 3, 1).reshape(-1, o)
    gw = (g2.T @ cols).reshape(w.shape)
    gb = g2.sum(0)
    gx = _col2im(g2 @ w.reshape(o, -1), x_shape)
    return gx, gw, gb


def _pool_fwd(x):
    n, c, h, w = x.shape
    r = x.reshape(n, c, h // 2, 2, w // 2, 2)
    out = r.max((3, 5))
    mask = r == out[:, :, :, None, :, None]
    return out, mask


def _pool_bwd(g, mask):
    n, c, h2, _, w2, _ = mask.shape
    # ties are rare with float inputs; like a max pool's argmax, route to every max
    return (mask * g[:, :, :, None, :, None]).reshape(n, c, h2 * 2, w2 * 2)


def numpy_cnn_runner(weights, x, y):
    cw1, cb1, cw2, cb2, fw, fb = weights
    sgd = _Sgd([cw1, cb1, cw2, cb2, fw, fb])

    def step():
        h1, cols1 = _conv_fwd(x, cw1, cb1)
        a1 = np.maximum(h1, 0)
        p1, m1 = _pool_fwd(a1)
        h2, cols2 = _conv_fwd(p1, cw2, cb2)
        a2 = np.maximum(h2, 0)
        p2, m2 = _pool_fwd(a2)
        flat = p2.reshape(len(x), -1)
        logits = flat @ fw.T
        logits += fb
        _, g = _softmax_xent_grad(logits, y)
        gfw, gfb = g.T @ flat, g.sum(0)
        g = (g @ fw).reshape(p2.shape)
        g = _pool_bwd(g, m2) * (h2 > 0)
        g, gcw2, gcb2 = _conv_bwd(g, cols2, p1.shape, cw2)
        g = _pool_bwd(g, m1) * (h1 > 0)
        _, gcw1, gcb1 = _conv_bwd(g, cols1, x.shape, cw1)
        sgd.step([gcw1, gcb1, gcw2, gcb2, gfw, gfb])
    return step


# ***** torch (optional) *****
def torch_runner(kind, weights, x, y):
    import torch
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 512), torch.nn.ReLU(),
                                    torch.nn.Linear(512, 10))
    else:
        class TorchCNN(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv1 = torch.nn.Conv2d(1, 16, 3, padding=1)
                self.conv2 = torch.nn.Conv2d(16, 32, 3, padding=1)
                self.fc = torch.nn.Linear(32 * 7 * 7, 10)

            def forward(self, x):
                f = torch.nn.functional
                x = f.max_pool2d(f.relu(self.conv1(x)), 2)
                x = f.max_pool2d(f.relu(self.conv2(x)), 2)
                return self.fc(x.flatten(1))
        model = TorchCNN()
    with torch.no_grad():
        for p, w in zip(model.parameters(), weights):
            p.copy_(torch.from_numpy(w))
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def step():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(xt), yt).backward()
        opt.step()
    return step


# ***** timing *****
def bench(kind, batch, rounds, steps, use_torch, clock=time.process_time, settle=0.0):
    rng = np.random.default_rng(0)
    if kind == "mlp":
        x = rng.standard_normal((batch, 784), dtype=np.float32)
        model = tb_mlp()
    else:
        x = rng.standard_normal((batch, 1, 28, 28), dtype=np.float32)
        model = TbCNN()
    y = rng.integers(0, 10, batch).astype(np.int64)
    weights = [p._data.copy() for p in model.parameters()]  # same start for everyone
    np_weights = [w.copy() for w in weights]
    runners = {"tensorbrain": tb_runner(model, x, y),
               "numpy": (numpy_mlp_runner if kind == "mlp" else numpy_cnn_runner)(
                   np_weights, x, y)}
    if use_torch:
        runners["torch"] = torch_runner(kind, weights, x, y)
    for run in runners.values():  # warm-up: allocations, BLAS threads, caches
        for _ in range(3):
            run()
    # the baseline must be the same math: after the same 3 steps the parameters agree
    for p, w in zip(model.parameters(), np_weights):
        np.testing.assert_allclose(p._data, w, rtol=1e-3, atol=1e-5,
                                   err_msg=f"{kind}: hand-written NumPy diverged from TensorBrain")
    samples = {name: [] for name in runners}
    for _ in range(rounds):  # alternate so load changes hit every implementation alike
        for name, run in runners.items():
            samples[name].append(_round(run, steps, clock, settle))
    return {name: statistics.median(v) for name, v in samples.items()}


def _round(run, steps, clock, settle):
    """Seconds per step of ``steps`` calls of ``run``. With ``settle``, first that many seconds'
    pause and one untimed step: the other side's idle threads stop spinning and ours wake
    (module docstring)."""
    if settle:
        time.sleep(settle)
        run()
    t0 = clock()
    for _ in range(steps):
        run()
    return (clock() - t0) / steps


# ***** issue 15's workloads: tb vs torch, same model source *****
def _workload_step(lib, model, w, x, y, amp=None):
    params = list(model.parameters())
    if w.optimizer == "adam":
        opt = lib.optim.Adam(params, lr=w.lr, betas=(0.5, 0.999) if w.name == "dcgan" else (0.9, 0.999))
    else:
        opt = lib.optim.SGD(params, lr=w.lr, momentum=0.0 if w.optimizer == "plain_sgd" else MOMENTUM)
    f = lib.nn.functional
    loss_fn = f.cross_entropy if w.loss == "cross_entropy" else f.mse_loss
    xt, yt = lib.from_numpy(x), lib.from_numpy(y)
    last = {}
    region = (lambda: lib.autocast("cpu", dtype=getattr(lib, amp))) if amp else None

    def step():
        opt.zero_grad()
        if region is None:
            loss = loss_fn(model(xt), yt)
        else:
            with region():
                loss = loss_fn(model(xt), yt)
        loss.backward()
        if w.clip:
            lib.nn.utils.clip_grad_norm_(params, w.clip)
        opt.step()
        last["loss"] = loss
    return step, last


def bench_workload(w, rounds, steps, clock, amp=None, settle=0.0):
    """(tb seconds/step, torch seconds/step, first losses) for workload ``w``, or a skip reason."""
    import torch
    missing = [n for n in w.needs if not hasattr(tb.nn, n)]
    if missing:
        return f"skipped: tb.nn has no {', '.join(missing)} yet"
    x, y = w.data(np.random.default_rng(0))
    tb.manual_seed(0)
    tmodel = w.build(tb)
    torch.manual_seed(0)
    pmodel = w.build(torch)
    pmodel.load_state_dict({k: torch.from_numpy(np.array(v._data))
                            for k, v in tmodel.state_dict().items()})
    runners = {"tb": _workload_step(tb, tmodel, w, x, y, amp),
               "torch": _workload_step(torch, pmodel, w, x, y, amp)}
    for run, _ in runners.values():   # the first step: the two must compute the same loss
        run()
    first = {k: float(last["loss"].item()) for k, (_, last) in runners.items()}
    for run, _ in runners.values():
        run()
    samples = {k: [] for k in runners}
    for _ in range(rounds):
        for k, (run, _) in runners.items():
            samples[k].append(_round(run, steps, clock, settle))
    return statistics.median(samples["tb"]), statistics.median(samples["torch"]), first


def profile_workload(w, steps, top=10):
    """Where a tb step's time goes: cProfile's own time per function (NumPy's ufuncs and
    matmul count in the op body that calls them), next to torch.profiler's self CPU time per
    aten op for the same model; both over ``steps`` steps after two warm-up steps."""
    import cProfile
    import pstats

    import torch
    x, y = w.data(np.random.default_rng(0))
    tb.manual_seed(0)
    sides = {"tb": (tb, w.build(tb)), "torch": (torch, w.build(torch))}
    print(f"\n== {w.name}: {w.title}")
    for name, (lib, model) in sides.items():
        run, _ = _workload_step(lib, model, w, x, y)
        run()
        run()
        t0 = time.process_time()
        if name == "tb":
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(steps):
                run()
            prof.disable()
            total = time.process_time() - t0
            stats = pstats.Stats(prof).stats
            rows = sorted(((v[2], f"{os.path.basename(k[0])}:{k[2]}") for k, v in stats.items()),
                          reverse=True)[:top]
        else:
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                for _ in range(steps):
                    run()
            total = time.process_time() - t0
            rows = sorted(((e.self_cpu_time_total / 1e6, e.key) for e in prof.key_averages()),
                          reverse=True)[:top]
        print(f"  {name}: {total / steps * 1e3:.1f} ms/step under the profiler; own time per step:")
        for sec, fn in rows:
            print(f"    {sec / steps * 1e3:7.2f} ms {100 * sec / total:5.1f}%  {fn}")


def run_workloads(names, rounds, steps, clock, plot=None, amp=None, settle=0.0):
    header = f"{'workload':9} {'tb step':>10} {'torch step':>11} {'tb/torch':>9}  {'first loss tb / torch':>22}"
    print(header)
    print("-" * len(header))
    done = {}
    for name in names:
        w = _workloads.WORKLOADS[name]
        try:
            r = bench_workload(w, rounds, steps, clock, amp, settle)
        except Exception as exc:   # one broken workload must not hide the others' figures
            r = f"error: {type(exc).__name__}: {str(exc)[:100]}"
        if isinstance(r, str):
            print(f"{name:9} {r}", flush=True)
            continue
        t_tb, t_torch, first = r
        done[name] = t_tb / t_torch
        mark = "" if t_tb / t_torch <= 1.0 else "  (goal 1.0x)"
        print(f"{name:9} {t_tb * 1e3:7.1f} ms {t_torch * 1e3:8.1f} ms {t_tb / t_torch:8.2f}x  "
              f"{first['tb']:10.4f} / {first['torch']:.4f}{mark}", flush=True)
    if plot and done:
        _plot(done, plot)


def _plot(ratios, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6, 3))
    names = list(ratios)
    ax.bar(names, [ratios[n] for n in names], color="#4a7ab5")
    ax.axhline(1.0, color="#c0392b", linestyle="--", label="goal 1.0x")
    ax.set_ylabel("tb step / torch step")
    ax.set_title("training step, 1 thread, CPU time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"wrote {path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", choices=("mlp", "cnn", "all"), default="all")
    p.add_argument("--batch-size", type=int, nargs="*", default=[64, 512], help="for the MLP")
    p.add_argument("--cnn-batch-size", type=int, nargs="*", default=[64], help="for the CNN")
    p.add_argument("--rounds", type=int, default=7, help="alternating timing rounds")
    p.add_argument("--steps", type=int, default=5, help="steps per round")
    p.add_argument("--threads", type=int, default=1,
                   help="torch intra-op threads and BLAS threads (threadpoolctl); default 1")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                   help="cpu: process CPU time (default; steady while other jobs share the "
                        "machine), wall: elapsed time")
    p.add_argument("--settle", type=float, default=None,
                   help="seconds to wait, then one untimed step, before each timed round (default "
                        "0.3 with --threads > 1, else 0): see the module docstring")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--workload", nargs="+", choices=(*_workloads.WORKLOADS, "all"),
                   help="issue 15's training-step workloads (tb vs torch) instead of mlp/cnn")
    p.add_argument("--plot", metavar="PNG", help="with --workload: bar chart of the ratios")
    p.add_argument("--profile", type=int, metavar="STEPS",
                   help="with --workload: instead of timing, where each step's time goes (cProfile "
                        "for tb, torch.profiler for torch) over STEPS steps")
    p.add_argument("--amp", choices=("bfloat16", "float16"),
                   help="with --workload: forward and loss under autocast('cpu', dtype) on both sides")
    args = p.parse_args(argv)

    use_torch = not args.no_torch
    if use_torch:
        try:
            import torch
        except ImportError:
            use_torch = False
    if args.threads:
        if use_torch:
            torch.set_num_threads(args.threads)
        tb.set_num_threads(args.threads)     # tb's fused native kernels too (BLAS: below)
        try:
            from threadpoolctl import threadpool_limits
            threadpool_limits(args.threads)
        except ImportError:
            print("(threadpoolctl missing: NumPy's BLAS keeps its own thread count)")
    print(hardware())
    if use_torch:
        print(f"torch {torch.__version__}, {torch.get_num_threads()} intra-op threads")
    else:
        print("torch not installed: comparing with NumPy only")
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    settle = args.settle if args.settle is not None else (0.3 if args.threads > 1 else 0.0)
    if args.workload:
        if not use_torch:
            raise SystemExit("--workload compares with torch, which is not installed")
        print(f"{args.clock} time per step, median of {args.rounds} alternating rounds of "
              f"{args.steps} steps, {args.threads} thread(s)\n")
        names = list(_workloads.WORKLOADS) if "all" in args.workload else args.workload
        if args.profile:
            for name in names:
                profile_workload(_workloads.WORKLOADS[name], args.profile)
            return
        if args.amp:
            print(f"forward and loss under autocast('cpu', dtype={args.amp}) on both sides")
        run_workloads(names, args.rounds, args.steps, clock, args.plot, args.amp, settle)
        return
    print(f"SGD momentum {MOMENTUM}, cross-entropy; {args.clock} time per step, median of "
          f"{args.rounds} alternating rounds of {args.steps} steps, {args.threads} thread(s)\n")
    header = f"{'model':5} {'batch':>5} {'tensorbrain':>12} {'numpy':>10}" + \
        (f" {'torch':>10}" if use_torch else "") + f" {'tb/numpy':>9}" + \
        (f" {'tb/torch':>9}" if use_torch else "")
    print(header)
    print("-" * len(header))
    kinds = ("mlp", "cnn") if args.model == "all" else (args.model,)
    for kind in kinds:
        for batch in (args.batch_size if kind == "mlp" else args.cnn_batch_size):
            r = bench(kind, batch, args.rounds, args.steps, use_torch, clock, settle)
            line = f"{kind:5} {batch:5d} {r['tensorbrain'] * 1e3:9.2f} ms {r['numpy'] * 1e3:7.2f} ms"
            if use_torch:
                line += f" {r['torch'] * 1e3:7.2f} ms"
            line += f" {r['tensorbrain'] / r['numpy']:8.2f}x"
            if use_torch:
                line += f" {r['tensorbrain'] / r['torch']:8.2f}x"
            print(line, flush=True)


if __name__ == "__main__":
    main()
