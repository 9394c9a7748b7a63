"""The one seam that chooses NumPy or CuPy.

Every op body is written once against ``xp`` (the array module of its inputs) and runs on both.
CuPy is imported here and only here, inside try/except; the import error is kept and shown, with
the install hint, the first time a user asks for a CUDA tensor.
"""
from __future__ import annotations

import numpy as np

from . import _gemm, _native

try:  # CuPy is optional: CPU-only machines never need it.
    import cupy as _cupy  # type: ignore

    try:
        _cupy_devices = _cupy.cuda.runtime.getDeviceCount()
        _CUPY_ERROR: str | None = None if _cupy_devices > 0 else "CuPy found no CUDA device"
    except Exception as exc:  # driver missing, no GPU
        _cupy_devices = 0
        _CUPY_ERROR = f"CuPy is installed but CUDA is not usable: {exc}"
except Exception as exc:  # ImportError, or a broken CUDA install
    _cupy = None
    _cupy_devices = 0
    _CUPY_ERROR = f"CuPy is not importable ({type(exc).__name__}: {exc})"

CUDA_INSTALL_HINT = (
    "install the CUDA extra for your CUDA version, `pip install tensorbrain[cuda12]` or "
    "`tensorbrain[cuda13]` (cupy-cuda12x / cupy-cuda13x), on a machine "
    "with an NVIDIA GPU and driver")


def cuda_available() -> bool:
    return _cupy is not None and _cupy_devices > 0


def cupy():
    """The cupy module, or a clear RuntimeError saying why CUDA cannot be used."""
    if not cuda_available():
        raise RuntimeError(f"CUDA is not available: {_CUPY_ERROR}; {CUDA_INSTALL_HINT}")
    return _cupy


def get_array_module(array):
    """``numpy`` for host arrays, ``cupy`` for device arrays (Chainer's seam)."""
    if _cupy is not None and isinstance(array, _cupy.ndarray):
        return _cupy
    return np


def is_cupy_array(array) -> bool:
    return _cupy is not None and isinstance(array, _cupy.ndarray)


def to_numpy(array) -> np.ndarray:
    """A host copy (or the array itself when it already lives on the host)."""
    if is_cupy_array(array):
        return _cupy.asnumpy(array)
    return np.asarray(array)


_ADD_NATIVE_MIN = 1 << 16   # values: smaller adds stay on NumPy (nothing worth splitting)


def add(a, b, out=None):
    """``a + b`` (into ``out``, which may be ``a``): on the native kernel, split across
    ``tb.set_num_threads`` threads, for large same-shape C-contiguous float32 NumPy arrays (a
    residual connection, the autograd engine's gradient sums: single-threaded NumPy otherwise);
    NumPy's or CuPy's ``add`` for everything else. The same bits either way.

    Args:
        a (ndarray): NumPy or CuPy array.
        b (ndarray): an array of the same module (broadcast as ``add`` does).
        out (ndarray | None): where to write the sum.

    Example:
        >>> add(np.ones(3, np.float32), np.ones(3, np.float32))
        array([2., 2., 2.], dtype=float32)
    """
    if type(a) is np.ndarray and type(b) is np.ndarray and a.dtype == b.dtype == np.float32 and \
            a.shape == b.shape and a.size >= _ADD_NATIVE_MIN and a.flags.c_contiguous and \
            b.flags.c_contiguous and (out is None or out is a):
        C = _native.loaded()
        if C is not None and hasattr(C, "add_arrays"):
            return C.add_arrays(a, b, out)
    return (np if type(a) is np.ndarray else get_array_module(a)).add(a, b, out=out)


def matmul(a, b, out=None):
    """``a @ b`` (``out=`` as ``matmul``'s), also for CuPy bfloat16 stacks.

    CuPy 14 multiplies bfloat16 matrices (cuBLAS) but sends stacks (ndim > 2) to its integer
    kernel, which fails with "data type 'E' not understood". Such a product runs here as one 2-D
    GEMM when the right operand is a matrix (``(..., K) @ (K, N)``: the leading dims fold into
    the rows), else in float32 and is rounded once to bfloat16 (cuBLAS accumulates bfloat16
    products in float32 too). Every other product (mixed dtypes promote as CuPy's do) is plain
    ``matmul``; 2-D NumPy products go through ``tensorbrain._gemm.mm`` (MKL when installed).

    Args:
        a (ndarray): NumPy or CuPy array.
        b (ndarray): an array of the same module.
        out (ndarray | None): where to write the product.

    Example:
        >>> matmul(np.ones((2, 2, 3)), np.ones((3, 4))).shape
        (2, 2, 4)
    """
    if (a.ndim > 2 or b.ndim > 2) and a.dtype.char == b.dtype.char == "E" and is_cupy_array(a):
        if b.ndim == 2 and a.ndim > 2:
            r = (a.reshape(-1, a.shape[-1]) @ b).reshape(a.shape[:-1] + (b.shape[-1],))
        else:
            r = _cupy.matmul(a.astype(np.float32), b.astype(np.float32)).astype(a.dtype)
        if out is None:
            return r
        out[...] = r
        return out
    if a.ndim == 2 and b.ndim == 2 and type(a) is np.ndarray:
        return _gemm.mm(a, b, out)   # MKL when installed
    return a @ b if out is None else get_array_module(a).matmul(a, b, out=out)


_BF16_REASON: list = []   # filled on first use: [None] when CuPy computes in bfloat16, else [why]


def cupy_bfloat16_unsupported() -> str | None:
    """None when CuPy can hold and compute bfloat16 arrays, else the reason it cannot.

    CuPy 14 added ``ml_dtypes.bfloat16`` (elementwise kernels, reductions and cuBLAS matmul;
    cupy/cupy#9494); older CuPy has no bfloat16 at all. Asked once, by making a tiny array and
    adding and multiplying it on the device, so the answer is what this CuPy really does.
    """
    if not _BF16_REASON:
        cp = cupy()
        try:
            import ml_dtypes
            a = cp.arange(4, dtype=ml_dtypes.bfloat16)
            ok = float(((a + a) @ a).get()) == 28.0
            _BF16_REASON.append(None if ok else "CuPy computed a wrong bfloat16 test product")
        except Exception as exc:  # CuPy < 14: TypeError/NotImplementedError on the dtype
            _BF16_REASON.append(f"CuPy {_cupy.__version__} has no bfloat16 ({type(exc).__name__}: "
                                f"{exc}); CuPy >= 14 with ml_dtypes has it")
    return _BF16_REASON[0]


# ***** the meta device *****
class MetaArray(np.ndarray):
    """An array with a shape and a dtype but no values (``torch.device("meta")``): every element
    is one shared, read-only zero (all strides 0), so a meta model of any size takes no memory.

    Writes are dropped (``a[...] = x``, ``a.fill(v)``: an initialiser on the meta device does
    nothing, as in torch); reshaping and slicing give meta arrays; arithmetic raises (torch would
    return meta results; TensorBrain does not compute shapes without values).
    """

    def __setitem__(self, key, value):
        pass

    def fill(self, value):
        pass

    def copy(self, order="C"):
        return meta_array(self.shape, self.dtype)

    def astype(self, dtype, *args, **kwargs):
        return meta_array(self.shape, dtype)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        raise RuntimeError(
            f"{ufunc.__name__} on a tensor of the meta device: it has a shape and a dtype but no "
            f"values; give the module real storage first (module.to_empty(device='cpu'), then "
            f"reset_parameters() or load a state dict)")


def meta_array(shape, dtype) -> MetaArray:
    """A :class:`MetaArray` of ``shape`` and ``dtype`` (one element of memory).

    Example:
        >>> a = meta_array((1000, 1000), np.float32)
        >>> a.shape, a.dtype, a.strides, is_meta(a)
        ((1000, 1000), dtype('float32'), (0, 0), True)
    """
    shape = tuple(int(n) for n in shape)
    base = np.zeros(1, dtype=dtype)
    view = np.lib.stride_tricks.as_strided(base, shape, (0,) * len(shape), writeable=False)
    return view.view(MetaArray)


def is_meta(array) -> bool:
    """Whether ``array`` is a meta-device array."""
    return isinstance(array, MetaArray)
