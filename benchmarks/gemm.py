"""Matrix products at the training workloads' shapes: TensorBrain's GEMM (``tensorbrain._gemm``:
MKL when the ``mkl`` extra is installed, else NumPy's) against NumPy's OpenBLAS and torch's
``mm``, in one process, interleaved.

Each shape is timed as the three products a linear layer makes (forward ``x @ W.T``, input
gradient ``g @ W``, weight gradient ``g.T @ x``), median of ``--reps`` calls. Prints the hardware,
the backend, each time and the ratios to tb's time (above 1: tb is faster).

    python benchmarks/gemm.py                  # one thread
    python benchmarks/gemm.py --threads 2
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tensorbrain as tb  # noqa: E402
from tensorbrain import _gemm  # noqa: E402

import _common  # noqa: E402  (benchmarks/ is sys.path[0] when a benchmark runs as a script)

# (M, K, N): the GPT's linear layers (B*T = 1024 rows) and the conv net's column products
SHAPES = [(1024, 256, 768), (1024, 256, 256), (1024, 256, 1024), (1024, 1024, 256),
          (1024, 256, 65), (64, 288, 8192), (128, 576, 2048)]


def _median(fn, reps):
    fn()
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1, help="tb/torch/BLAS threads (default 1)")
    ap.add_argument("--reps", type=int, default=25, help="timed calls per product (default 25)")
    args = ap.parse_args(argv)
    tb.set_num_threads(args.threads)
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    info = _common.blas()
    print(f"cpu: {_common.cpu_model()}, {os.cpu_count()} logical cores, load average "
          f"{os.getloadavg()[0]:.1f}; python {platform.python_version()}, numpy {np.__version__} "
          f"({info.get('name') if info else '?'} {info.get('version', '') if info else ''})")
    print(f"tb GEMM: {_gemm.backend()}; {args.threads} thread(s); median of {args.reps} calls")
    print(f"{'M x K x N':>18s} {'product':>8s} {'tb':>9s} {'numpy':>9s} {'np/tb':>6s}"
          + (f" {'torch':>9s} {'torch/tb':>8s}" if torch else ""))
    rng = np.random.default_rng(0)
    total = {"tb": 0.0, "numpy": 0.0, "torch": 0.0}
    for m, k, n in SHAPES:
        x = rng.standard_normal((m, k), dtype=np.float32)
        w = rng.standard_normal((n, k), dtype=np.float32)
        g = rng.standard_normal((m, n), dtype=np.float32)
        prods = {"x@W.T": (x, w.T), "g@W": (g, w), "g.T@x": (g.T, x)}
        for name, (a, b) in prods.items():
            t_tb = _median(lambda: _gemm.mm(a, b), args.reps)
            t_np = _median(lambda: np.matmul(a, b), args.reps)
            line = f"{f'{m}x{k}x{n}':>18s} {name:>8s} {t_tb * 1e3:7.3f}ms {t_np * 1e3:7.3f}ms {t_np / t_tb:6.2f}"
            total["tb"] += t_tb
            total["numpy"] += t_np
            if torch:
                ta, tb_ = torch.from_numpy(a), torch.from_numpy(b)   # the same strides (views)
                t_t = _median(lambda: torch.mm(ta, tb_), args.reps)
                total["torch"] += t_t
                line += f" {t_t * 1e3:7.3f}ms {t_t / t_tb:8.2f}"
            print(line)
    print(f"{'all':>18s} {'':>8s} {total['tb'] * 1e3:7.2f}ms {total['numpy'] * 1e3:7.2f}ms "
          f"{total['numpy'] / total['tb']:6.2f}"
          + (f" {total['torch'] * 1e3:7.2f}ms {total['torch'] / total['tb']:8.2f}" if torch else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
