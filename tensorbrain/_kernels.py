"""In-place elementwise reduction kernels: ``reduce_into`` and ``scale_into``.

The distributed backends reduce every received buffer with :func:`reduce_into`, and AVG is
``reduce_into(..., "sum")`` followed by :func:`scale_into` with ``1/world_size``. Each function
has two bodies with the same name and the same results, bit for bit:

* the C++ kernel in ``csrc/kernels/reduce.cpp`` (``tensorbrain._C``), which runs with the GIL
  released so a communication thread can reduce while Python keeps working;
* the NumPy/CuPy twin below (``xp`` ufuncs with ``out=``), used without the native module, for
  CuPy arrays, and for non-contiguous NumPy arrays.

``tests/test_kernels.py`` holds the two together over every dtype and op, NaN/inf and float16
rounding included.

The ops are plain strings, :data:`OPS` = ``{"sum", "prod", "min", "max", "band", "bor", "bxor"}``
with NumPy's ufunc semantics: integers wrap around, ``min``/``max`` propagate NaN, on bool
``sum``/``max`` are "or" and ``prod``/``min`` are "and"; the bitwise ops need an integer or bool
dtype. Dtypes: float16/32/64, int8/16/32/64, uint8, bool; ``dst`` and ``src`` must have the same
dtype and shape (no silent casts in a reduction).

>>> import numpy as np
>>> from tensorbrain import _kernels
>>> dst = np.array([1.0, 5.0, np.nan], dtype=np.float32)
>>> _kernels.reduce_into(dst, np.array([2.0, 3.0, 0.0], dtype=np.float32), "max")
>>> dst
array([ 2.,  5., nan], dtype=float32)
>>> _kernels.scale_into(dst, 0.5)
>>> dst
array([1. , 2.5, nan], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from . import _native
from ._xp import get_array_module

OPS = frozenset({"sum", "prod", "min", "max", "band", "bor", "bxor"})
BITWISE_OPS = frozenset({"band", "bor", "bxor"})
DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool")
_FLOAT = frozenset({"float16", "float32", "float64"})
# dtype objects compare with their byte order, so a big-endian array is not in this set.
_NATIVE_DTYPES = {np.dtype(name): name for name in DTYPES}
_UFUNC = {"sum": "add", "prod": "multiply", "min": "minimum", "max": "maximum",
          "band": "bitwise_and", "bor": "bitwise_or", "bxor": "bitwise_xor"}


def _native_for(native: bool | None, fn: str, *arrays):
    """The C++ module to run on, or None for the NumPy/CuPy twin. Only C-contiguous NumPy arrays
    go to C++ (it has no stride support; CuPy arrays live on the GPU). Kept lean: this runs for
    every bucket a backend reduces, and the C++ call itself costs ~0.4 us (measured)."""
    if native is False:
        return None
    eligible = True
    for a in arrays:
        if type(a) is not np.ndarray or not a.flags.c_contiguous:
            eligible = False
            break
    if native is None:
        return _native.loaded() if eligible else None
    if not eligible:
        raise ValueError(f"{fn}(native=True) needs C-contiguous NumPy arrays; got "
                         + ", ".join(f"{type(a).__name__} contiguous={getattr(getattr(a, 'flags', None), 'c_contiguous', '?')}"
                                     for a in arrays))
    return _native.module()  # raises with the reason when unavailable


def reduce_into(dst, src, op: str, *, native: bool | None = None) -> None:
    """``dst = dst (op) src`` elementwise, in place; ``op`` is one of :data:`OPS`.

    ``native=None`` picks the C++ kernel when it can run, ``True`` insists on it, ``False`` uses
    the NumPy/CuPy twin.

    >>> import numpy as np
    >>> a = np.array([1, 2, 3], dtype=np.int8)
    >>> reduce_into(a, np.array([127, 2, 1], dtype=np.int8), "sum")
    >>> a
    array([-128,    4,    4], dtype=int8)
    """
    C = _native_for(native, "reduce_into", dst, src)
    if C is not None:
        C.reduce_into(dst, src, op)
    else:
        _reduce_into_xp(dst, src, op)


def scale_into(dst, factor: float, *, native: bool | None = None) -> None:
    """``dst *= factor`` in place, for floating dtypes (float16 multiplies in float32).

    >>> import numpy as np
    >>> a = np.array([1.0, 3.0], dtype=np.float16)
    >>> scale_into(a, 1 / 3)
    >>> a
    array([0.3333, 1.    ], dtype=float16)
    """
    C = _native_for(native, "scale_into", dst)
    if C is not None:
        C.scale_into(dst, float(factor))
    else:
        _scale_into_xp(dst, factor)


# ***** the NumPy/CuPy twins (same checks, same words as csrc/kernels/bind.cpp) *****

def avg_plan(buf, op: str, n: int):
    """How a backend runs ``op`` over ``n`` ranks on ``buf``: (op to run, factor for
    :func:`scale_into` afterwards, or None). AVG on float16 divides each contribution by n (in
    float32) before summing, in place on ``buf``, so an average that fits in float16 never
    overflows on the way; on float32/64 it is a sum, then one scale by 1/n.
    """
    if op != "avg":
        return op, None
    if buf.dtype == np.float16:
        buf[...] = buf.astype(np.float32) * np.float32(1.0 / n)
        return "sum", None
    return "sum", 1.0 / n


def _check_dtype(fn: str, arg: str, a) -> str:
    name = _NATIVE_DTYPES.get(a.dtype)  # a dict lookup: str(dtype) costs ~2 us per call
    if name is None:
        raise TypeError(f"{fn}: unsupported dtype {a.dtype} for {arg}; supported: {', '.join(DTYPES)}")
    return name


def _reduce_into_xp(dst, src, op: str) -> None:
    if op not in OPS:
        raise ValueError(f"reduce_into: unknown op '{op}'; expected one of sum, prod, min, max, "
                         "band, bor, bxor (AVG is sum then scale_into)")
    for arg, a in (("dst", dst), ("src", src)):
        if not hasattr(a, "dtype") or not hasattr(a, "flags"):
            raise TypeError(f"reduce_into: {arg} must be a NumPy or CuPy array, got {type(a).__name__}")
    name = _check_dtype("reduce_into", "dst", dst)
    if src.dtype != dst.dtype:
        raise TypeError(f"reduce_into: dtype mismatch: dst is {dst.dtype}, src is {src.dtype}; "
                        "cast src to dst's dtype first")
    if name in _FLOAT and op in BITWISE_OPS:
        raise TypeError(f"reduce_into: op '{op}' needs an integer or bool dtype, got {name}")
    if dst.shape != src.shape:
        raise ValueError(f"reduce_into: shape mismatch: dst {dst.shape} vs src {src.shape}")
    if not getattr(dst.flags, "writeable", True):  # CuPy arrays have no writeable flag
        raise ValueError("reduce_into: dst is read-only; it is written in place")
    xp = get_array_module(dst)
    if get_array_module(src) is not xp:
        raise TypeError(f"reduce_into: dst is a {type(dst).__module__}.{type(dst).__name__}, src is a "
                        f"{type(src).__module__}.{type(src).__name__}; both must be on the same device")
    ufunc = getattr(xp, _UFUNC[op])
    if name in _FLOAT:
        with np.errstate(all="ignore"):  # overflow to inf / NaN is the result, as in C++: no warning
            ufunc(dst, src, out=dst)
    else:  # integer ufuncs wrap silently; errstate would cost ~2.5 us a call
        ufunc(dst, src, out=dst)


def _scale_into_xp(dst, factor: float) -> None:
    if not hasattr(dst, "dtype") or not hasattr(dst, "flags"):
        raise TypeError(f"scale_into: dst must be a NumPy or CuPy array, got {type(dst).__name__}")
    name = _check_dtype("scale_into", "dst", dst)
    if name not in _FLOAT:
        raise TypeError(f"scale_into: needs a floating dtype (float16/32/64), got {name}; "
                        "averaging integers is not defined here, divide explicitly")
    if not getattr(dst.flags, "writeable", True):
        raise ValueError("scale_into: dst is read-only; it is written in place")
    xp = get_array_module(dst)
    with np.errstate(all="ignore"):
        _scale(xp, name, dst, factor)


def _scale(xp, name, dst, factor):
    if name == "float16":
        # float16 * python float would round the factor to half first (NEP 50); multiply in
        # float32 and round once, as the C++ kernel does.
        dst[...] = (dst.astype(xp.float32) * xp.float32(factor)).astype(xp.float16)
    elif name == "float32":
        xp.multiply(dst, xp.float32(factor), out=dst)
    else:
        xp.multiply(dst, xp.float64(factor), out=dst)
