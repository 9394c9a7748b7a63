"""CPU matrix products on Intel MKL's GEMM when the ``mkl`` wheel is installed, else NumPy's.

Linear layers, the convolutions' column products and 2-D ``matmul`` call :func:`mm`. With MKL
found (``pip install 'tensorbrain[mkl]'``; ``TB_GEMM`` chooses, see docs/environment.md) the
product runs in ``tensorbrain._C.gemm``: MKL's sequential ``cblas_?gemm`` on blocks of the
output's rows or columns, split across ``tb.set_num_threads`` threads on the native pool
(csrc/kernels/blas.cpp).
Otherwise, and for anything that call cannot take (other dtypes, CuPy arrays, a broadcast
operand), it is NumPy's ``matmul`` (OpenBLAS), the twin tests/test_gemm.py compares against;
a batch of products (``mm_each``, ``mm_sum``, ``bmm``) on more than one thread then runs one
item per pool thread, each a one-thread OpenBLAS GEMM (``_batched_for``).

Why: on the Intel Xeon the benchmarks run on, MKL took 0.84x of OpenBLAS's time over the GPT's
and the conv net's products, the same as torch's ``mm`` (``benchmarks/gemm.py``,
docs/training.md); torch's linear layers run on MKL too. On an AMD EPYC it was slower than OpenBLAS at some shapes, so ``AUTO`` takes MKL on Intel
CPUs only.
"""
from __future__ import annotations

import functools
import glob
import os
import sys

import numpy as np

from . import _config, _native, _threads

_state: dict = {"C": None, "why": None}


@functools.cache
def _intel_cpu() -> bool:
    """Whether /proc/cpuinfo names an Intel CPU (read once: MKL's choice and the conv fold
    threshold, ``_ops/conv_columns.py``, both ask)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return "GenuineIntel" in line
    except OSError:
        pass
    return False


def _find_mkl() -> str | None:
    """libmkl_rt from the ``mkl`` wheel (its files land in ``<prefix>/lib``)."""
    try:
        from importlib import metadata
        files = metadata.files("mkl") or []
        for f in files:
            if os.path.basename(str(f)).startswith("libmkl_rt.so"):
                return str(f.locate())
    except Exception:   # not installed, or metadata without a file list
        pass
    for prefix in (sys.prefix, sys.base_prefix):
        found = sorted(glob.glob(os.path.join(prefix, "lib", "libmkl_rt.so*")))
        if found:
            return found[-1]
    return None


def _setup():
    """The native module with MKL loaded, or None (and why, in ``_state["why"]``)."""
    mode = _config.get("TB_GEMM")
    C = _native.loaded()
    if mode == "NUMPY":
        return None, "TB_GEMM=numpy"
    if C is None or not hasattr(C, "_gemm_load"):
        why = "tensorbrain._C is not built (or predates csrc/kernels/blas.cpp)"
    elif mode == "AUTO" and not _intel_cpu():
        why = "not an Intel CPU (TB_GEMM=mkl forces MKL)"
    else:
        path = _find_mkl()
        if path is None:
            why = "the mkl wheel is not installed (pip install 'tensorbrain[mkl]')"
        else:
            try:
                C._gemm_load(path)
                return C, f"MKL ({os.path.realpath(path)})"
            except RuntimeError as e:
                why = str(e)
    if mode == "MKL":
        raise RuntimeError(f"TB_GEMM=mkl but MKL cannot be used: {why}. Unset TB_GEMM (or set it "
                           f"to numpy) to use NumPy's BLAS.")
    return None, why


def _module():
    if _state["why"] is None:
        _state["C"], _state["why"] = _setup()
    return _state["C"]


def _takes(C, a, b, ndim_a, ndim_b):
    """``C`` when it is not None and the operands are NumPy arrays of ``ndim_a`` and ``ndim_b``
    dims and one float32/float64 dtype, else None."""
    if C is not None and type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == ndim_a and \
            b.ndim == ndim_b and a.dtype == b.dtype and a.dtype in (np.float32, np.float64):
        return C
    return None


def _mkl_for(a, b, ndim_a, ndim_b):
    """The native module when MKL is loaded and can take these operands, else None."""
    return _takes(_module(), a, b, ndim_a, ndim_b)


def _batched_for(a, b, ndim_a, ndim_b):
    """The native module for a batch of products (``gemm_batched``): MKL's, or without MKL on
    more than one thread NumPy's OpenBLAS one item per pool thread, where ``_threads`` found its
    symbols (``TB_GEMM=numpy`` keeps NumPy's matmul). Why: NumPy's batched matmul hands
    OpenBLAS one item at a time, and an item as small as a conv net's first layer per image ran as
    long on two threads as on one (docs/training.md, "Winograd, products one per thread")."""
    C = _module()
    if C is None and _threads._state["blas_items"] and (_threads._state["threads"] or 1) > 1 and \
            _config.get("TB_GEMM") != "NUMPY":
        C = _native.loaded()
    return _takes(C, a, b, ndim_a, ndim_b)


def backend() -> str:
    """Which GEMM :func:`mm` uses: ``"MKL (<path>)"``, or ``"numpy"`` and the reason.

    Example:
        >>> from tensorbrain import _gemm
        >>> _gemm.backend().split()[0] in ("MKL", "numpy:")
        True
    """
    return _state["why"] if _module() is not None else f"numpy: {_state['why']}"


def mm(a, b, out=None, bias=None):
    """``a @ b`` (+ ``bias``, broadcast over the rows) for 2-D arrays, on MKL when loaded.

    Args:
        a (ndarray): ``(M, K)``; NumPy or CuPy.
        b (ndarray): ``(K, N)`` of the same module.
        out (ndarray | None): a C-contiguous ``(M, N)`` array to write into.
        bias (ndarray | None): ``(N,)`` added to every row (MKL: written into each block of
            output rows just before the GEMM accumulates into them, as torch's ``addmm``).

    Returns:
        The ``(M, N)`` product (``out`` when given).

    Example:
        >>> mm(np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)).shape
        (2, 4)
    """
    C = _mkl_for(a, b, 2, 2)
    if C is not None:
        dest = out if out is not None else np.empty((a.shape[0], b.shape[1]), a.dtype)
        if C.gemm(a, b, dest, 0.0, bias):   # a bias of another dtype or shape: False
            return dest
    if out is None:
        out = a @ b
    else:   # NumPy's or, for a CuPy array, CuPy's matmul (cupy is imported if a is one)
        (np if type(a) is np.ndarray else sys.modules[type(a).__module__.split(".")[0]]).matmul(a, b, out=out)
    if bias is not None:
        out += bias
    return out


_SUM_STACK_BYTES = 8 << 20   # mm_sum: the (B, M, N) products in one batched call up to this size


def mm_sum(a, b):
    """``sum_i a[i] @ b[i]`` over stacks ``(B, M, K)`` and ``(B, K, N)``: on MKL, the products in
    one batch-strided call (split across threads by item) and summed over the stack while the
    ``(B, M, N)`` products fit in 8 MiB, else each product accumulated into one ``(M, N)``
    output on its own; without MKL, the same batched call on NumPy's OpenBLAS one item per
    pool thread on more than one thread (``_batched_for``), else NumPy's ``matmul(a, b).sum(0)``.

    Why: a conv net's first layer sums 32 products of ``(27, 1024) @ (1024, 32)``; one at a
    time each is too small to split across threads, so two threads gained nothing.

    Args:
        a (ndarray): ``(B, M, K)``.
        b (ndarray): ``(B, K, N)``.

    Returns:
        ndarray: ``(M, N)``.
    """
    C = _batched_for(a, b, 3, 3)
    if C is not None and len(a) == len(b) > 0:
        if len(a) * a.shape[1] * b.shape[2] * a.itemsize <= _SUM_STACK_BYTES:
            each = np.empty((len(a), a.shape[1], b.shape[2]), a.dtype)
            if C.gemm_batched(a, b, each):
                return np.add.reduce(each, axis=0)
        out = np.empty((a.shape[1], b.shape[2]), a.dtype)
        if C.gemm(a[0], b[0], out, 0.0):
            for i in range(1, len(a)):
                C.gemm(a[i], b[i], out, 1.0)
            return out
    return (a @ b).sum(axis=0)


def mm_each(a, b):
    """``a @ b[i]`` for every ``i`` of a stack ``b`` ``(B, K, N)`` (``a`` ``(M, K)``): MKL's
    batch-strided GEMM with ``a`` at stride 0 (the items split across threads), without MKL on
    more than one thread one-thread OpenBLAS GEMMs an item each on the pool (``_batched_for``),
    else NumPy's batched ``matmul``.

    Args:
        a (ndarray): ``(M, K)``.
        b (ndarray): ``(B, K, N)``.

    Returns:
        ndarray: ``(B, M, N)``.
    """
    C = _batched_for(a, b, 2, 3)
    if C is not None:
        out = np.empty((len(b), a.shape[0], b.shape[2]), a.dtype)
        if C.gemm_batched(np.broadcast_to(a, (len(b),) + a.shape), b, out):
            return out
    return a @ b


def bmm(a, b, out=None):
    """``a @ b`` for stacks ``(B, M, K)`` and ``(B, K, N)``: MKL's batch-strided GEMM when
    loaded, else on more than one thread OpenBLAS an item per pool thread (``_batched_for``),
    else NumPy's ``matmul``.

    Args:
        a (ndarray): ``(B, M, K)``.
        b (ndarray): ``(B, K, N)``.
        out (ndarray | None): a C-contiguous ``(B, M, N)`` array to write into.

    Returns:
        ndarray: ``(B, M, N)`` (``out`` when given).
    """
    C = _batched_for(a, b, 3, 3)
    if C is not None:
        dest = out if out is not None else np.empty((a.shape[0], a.shape[1], b.shape[2]), a.dtype)
        if C.gemm_batched(a, b, dest):
            return dest
    return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
