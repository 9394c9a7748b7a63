"""Host microseconds per call of CuPy (and torch) operations on a GPU machine: what one kernel
launch costs the CPU, which decides whether a training step is launch-bound (docs/gpu.md).

    python benchmarks/gpu/host_cost.py

Each row: 50 warm-up calls, then 2,000 timed calls without synchronising (the host's time per
call; the GPU runs behind). Rows: a 4096x256 @ 256x768 GEMM through ``@`` and through cuBLAS
directly, small elementwise ops, reductions, an ElementwiseKernel and a RawKernel launch, an
allocation, views; then the same few ops in torch.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def per_call(cp, fn, n=2000):
    for _ in range(50):
        fn()
    cp.cuda.Device().synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t) / n * 1e6
    cp.cuda.Device().synchronize()
    return host


def main() -> int:
    from tensorbrain import _xp
    if not _xp.cuda_available():
        print(f"# host_cost: cannot run here: {_xp._CUPY_ERROR}")
        return 2
    import cupy as cp
    from cupy_backends.cuda.libs import cublas

    a = cp.ones((4096, 256), cp.float32)
    w = cp.ones((768, 256), cp.float32)
    out = cp.empty((4096, 768), cp.float32)
    b = cp.ones(768, cp.float32)
    small = cp.ones(16, cp.float32)
    k = cp.ElementwiseKernel("float32 x", "float32 y", "y = x * 2.f", "tb_x2")
    raw = cp.RawKernel(r'extern "C" __global__ void f(float* x) { x[threadIdx.x] += 1.f; }', "f")
    handle = cp.cuda.device.get_cublas_handle()
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    M, K, N = 4096, 256, 768

    def direct():   # row-major out = a @ w.T as column-major out^T = w @ a^T
        cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
        cublas.sgemm(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, N, M, K, one.ctypes.data,
                     w.data.ptr, K, a.data.ptr, K, zero.ctypes.data, out.data.ptr, N)

    direct()
    print(f"direct sgemm correct: {bool(cp.allclose(out, a @ w.T))}")
    rows = {
        "a @ w.T (4096x256 @ 256x768)": lambda: a @ w.T,
        "cublas sgemm direct, same": direct,
        "small + small": lambda: small + small,
        "small += 1 (in place)": lambda: small.__iadd__(1),
        "out += b (broadcast)": lambda: out.__iadd__(b),
        "a.sum(axis=0)": lambda: a.sum(axis=0),
        "a.mean(axis=1)": lambda: a.mean(axis=1),
        "ElementwiseKernel": lambda: k(small),
        "RawKernel": lambda: raw((1,), (16,), (small,)),
        "cp.empty((4096,768))": lambda: cp.empty((4096, 768), cp.float32),
        "a.reshape(-1)": lambda: a.reshape(-1),
        "a.T": lambda: a.T,
        "ascontiguousarray(contig)": lambda: cp.ascontiguousarray(a),
    }
    for name, fn in rows.items():
        print(f"{per_call(cp, fn):8.1f} us  {name}")
    try:
        import torch
    except ImportError:
        return 0
    x = torch.ones(16, device="cuda")
    A, W = torch.ones(4096, 256, device="cuda"), torch.ones(768, 256, device="cuda")
    print(f"{per_call(cp, lambda: x + x):8.1f} us  torch small + small")
    print(f"{per_call(cp, lambda: A @ W.T):8.1f} us  torch A @ W.T")
    print(f"{per_call(cp, lambda: A.sum(0)):8.1f} us  torch A.sum(0)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
