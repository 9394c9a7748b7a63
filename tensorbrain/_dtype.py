"""Dtypes. TensorBrain's dtypes are NumPy dtype objects, so promotion is NumPy's (NEP 50).

``tb.float32 is np.dtype('float32')``: a user may pass either. As in PyTorch, Python floats
become float32 tensors by default (not NumPy's float64) and Python ints become int64.

``tb.bfloat16`` is ml_dtypes' bfloat16 NumPy dtype (NumPy has none of its own). NumPy gives it
the kind ``'V'``, not ``'f'``, and promotes it unlike PyTorch (bfloat16 with float16 is an
error, with int64 float64): code asks :func:`is_floating_point` and :func:`promote_types`
here instead of reading ``dtype.kind`` or calling ``np.result_type``.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

float16 = half = np.dtype("float16")
float32 = float = np.dtype("float32")
float64 = double = np.dtype("float64")
bfloat16 = np.dtype(ml_dtypes.bfloat16)
int8 = np.dtype("int8")
int16 = short = np.dtype("int16")
int32 = int = np.dtype("int32")
int64 = long = np.dtype("int64")
uint8 = np.dtype("uint8")
uint16, uint32, uint64 = np.dtype("uint16"), np.dtype("uint32"), np.dtype("uint64")
bool_ = np.dtype("bool")
complex64 = cfloat = np.dtype("complex64")
complex128 = cdouble = np.dtype("complex128")

_default_float = float32


def get_default_dtype() -> np.dtype:
    """The floating-point dtype of new float tensors (float32 at start), as
    ``torch.get_default_dtype``.

    Returns:
        The dtype (``tb.float32`` unless :func:`set_default_dtype` changed it).
    """
    return _default_float


def set_default_dtype(dtype) -> None:
    """Set the dtype that ``tb.tensor([1.0])``, ``tb.zeros(...)`` and friends give floats, as
    ``torch.set_default_dtype``.

    Args:
        dtype: a floating-point dtype (``tb.float64``, ``tb.float32``, ``tb.float16``, ...).

    Raises:
        TypeError: ``dtype`` is not a floating-point dtype.

    Example:
        >>> import tensorbrain as tb
        >>> tb.set_default_dtype(tb.float64); tb.zeros(1).dtype == tb.float64
        True
        >>> tb.set_default_dtype(tb.float32)
    """
    global _default_float
    dtype = np.dtype(dtype)
    if not is_floating_point(dtype):
        raise TypeError(f"default dtype must be a floating point dtype, got {dtype}")
    _default_float = dtype


def as_dtype(dtype) -> np.dtype | None:
    """Normalise a user's dtype argument (tb dtype, NumPy dtype, type or name)."""
    if dtype is None:
        return None
    if dtype is bool:
        return bool_
    try:
        return np.dtype(dtype)
    except TypeError:
        from ._config import did_you_mean
        names = [n for n, v in globals().items() if isinstance(v, np.dtype) and n[0] != "_"]
        hint = did_you_mean(dtype, names) if isinstance(dtype, str) else ""
        if isinstance(dtype, str) and dtype.split(":")[0].lower() in ("gpu", "cuda", "mps"):
            # t.to("gpu"): read as a dtype because it is no device name TensorBrain knows
            hint = " did you mean the device 'cuda' (devices: 'cpu', 'cuda', 'cuda:N')?"
        raise TypeError(f"{dtype!r} is not a dtype TensorBrain understands:{hint} "
                        f"(tb.float32, 'float32' and np.float32 all work)") from None


def is_floating_point(dtype) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype == bfloat16


def is_float_or_complex(dtype) -> bool:
    """The dtypes that can require gradients."""
    dtype = np.dtype(dtype)
    return dtype.kind in "fc" or dtype == bfloat16


def promote_types(a, b) -> np.dtype:
    """PyTorch's ``torch.promote_types`` for two dtypes (tensor with tensor, same dim class).

    NumPy's table already matches PyTorch's for the NumPy dtypes that PyTorch has (NEP 50 is
    used for scalars elsewhere); bfloat16 is added as PyTorch places it: bfloat16 with bool or
    any integer gives bfloat16, with float16 gives float32, with a wider float that float.

    >>> import tensorbrain as tb
    >>> tb.promote_types(tb.bfloat16, tb.float16), tb.promote_types(tb.bfloat16, tb.int64)
    (dtype('float32'), dtype(bfloat16))
    """
    a, b = np.dtype(a), np.dtype(b)
    if a == b:
        return a
    if a == bfloat16 or b == bfloat16:
        other = b if a == bfloat16 else a
        if other.kind in "biu":
            return bfloat16
        if other == float16:
            return float32
        if other.kind in "fc":
            return other
        raise TypeError(f"promote_types: no common dtype for bfloat16 and {other}")
    return np.promote_types(a, b)


def finfo(dtype=None):
    """Machine limits of a floating dtype (``torch.finfo``): eps, max, min, tiny, resolution, bits.

    >>> import tensorbrain as tb
    >>> bool(tb.finfo(tb.bfloat16).eps == 2 ** -7), bool(tb.finfo(tb.float16).max == 65504)
    (True, True)
    """
    dtype = get_default_dtype() if dtype is None else as_dtype(dtype)
    if not is_floating_point(dtype):
        raise TypeError(f"finfo: {dtype} is not a floating point dtype (use tb.iinfo for integers)")
    return ml_dtypes.finfo(dtype)


def iinfo(dtype):
    """Machine limits of an integer dtype (``torch.iinfo``): min, max, bits."""
    dtype = as_dtype(dtype)
    if dtype.kind not in "iub":
        raise TypeError(f"iinfo: {dtype} is not an integer dtype (use tb.finfo for floats)")
    return np.iinfo(dtype)
