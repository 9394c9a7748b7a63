"""Dtypes. TensorBrain's dtypes are NumPy dtype objects, so promotion is NumPy's (NEP 50).

``tb.float32 is np.dtype('float32')``: a user may pass either. As in PyTorch, Python floats
become float32 tensors by default (not NumPy's float64) and Python ints become int64.
"""
from __future__ import annotations

import numpy as np

float16 = half = np.dtype("float16")
float32 = float = np.dtype("float32")
float64 = double = np.dtype("float64")
int8 = np.dtype("int8")
int16 = short = np.dtype("int16")
int32 = int = np.dtype("int32")
int64 = long = np.dtype("int64")
uint8 = np.dtype("uint8")
bool_ = np.dtype("bool")

_default_float = float32


def get_default_dtype() -> np.dtype:
    return _default_float


def set_default_dtype(dtype) -> None:
    global _default_float
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
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
        raise TypeError(f"{dtype!r} is not a dtype TensorBrain understands") from None


def is_floating_point(dtype) -> bool:
    return np.dtype(dtype).kind == "f"
