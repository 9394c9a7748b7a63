"""Timing of tensorbrain._kernels: the C++ reduce_into/scale_into next to their NumPy twins.

Prints the hardware, array sizes, the best-of-N time per call for each path and the ratio
NumPy twin / C++ (> 1 means the C++ kernel is faster). Both columns are full calls of
tensorbrain._kernels (argument checks included) with native=True / native=False; the baseline
is the NumPy twin, i.e. NumPy's own ufunc loops. Nothing here is asserted; run it with
``python benchmarks/kernels.py`` (``--quick`` for a few seconds).
"""
from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np

from tensorbrain import _kernels, _native

import _common  # benchmarks/ is sys.path[0] when a benchmark runs as a script


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    args = parser.parse_args()
    if not _native.is_available():
        raise SystemExit(f"native module unavailable: {_native.why_unavailable()}")
    cpu = _common.cpu_model(default=platform.processor())
    print(f"hardware: {cpu}, {os.cpu_count()} cpus; numpy {np.__version__}")
    sizes = [1 << 10, 1 << 20] if args.quick else [1 << 10, 1 << 16, 1 << 20, 1 << 24]
    cases = [("float32", "sum"), ("float32", "max"), ("float16", "sum"), ("float64", "sum"),
             ("int64", "sum"), ("int8", "bxor"), ("bool", "sum"), ("float32", "scale"), ("float16", "scale")]
    rng = np.random.default_rng(0)
    print(f"{'dtype':>8} {'op':>6} {'elements':>10} {'C++ us':>10} {'twin us':>10} {'twin/C++':>9} {'C++ GB/s':>9}")
    for n in sizes:
        repeat = 5 if n >= 1 << 22 else 50
        for dtype, op in cases:
            src = (rng.standard_normal(n) * 100).astype(dtype)
            dst = (rng.standard_normal(n) * 100).astype(dtype)
            if op == "scale":
                c = best_of(lambda: _kernels.scale_into(dst, 1.0, native=True), repeat)
                p = best_of(lambda: _kernels.scale_into(dst, 1.0, native=False), repeat)
                moved = 2 * dst.nbytes
            else:
                # max/sum with src=dst-like data keep values bounded across repeats for floats
                c = best_of(lambda: _kernels.reduce_into(dst, src, op, native=True), repeat)
                p = best_of(lambda: _kernels.reduce_into(dst, src, op, native=False), repeat)
                moved = 3 * dst.nbytes
            print(f"{dtype:>8} {op:>6} {n:>10} {c * 1e6:>10.1f} {p * 1e6:>10.1f} {p / c:>9.2f} {moved / c / 1e9:>9.2f}")


if __name__ == "__main__":
    main()
