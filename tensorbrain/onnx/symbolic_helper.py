"""``tb.onnx.symbolic_helper``: the helpers symbolic functions use (torch's module of the same
name, the part that programs reach for): the dtype tables and :func:`parse_args`.
"""
from __future__ import annotations

import enum
import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ._graph import Value


class TensorProtoDataType(enum.IntEnum):
    """ONNX's ``TensorProto.DataType`` numbers (torch's ``torch.onnx.TensorProtoDataType``)."""

    UNDEFINED = 0
    FLOAT = 1
    UINT8 = 2
    INT8 = 3
    UINT16 = 4
    INT16 = 5
    INT32 = 6
    INT64 = 7
    STRING = 8
    BOOL = 9
    FLOAT16 = 10
    DOUBLE = 11
    UINT32 = 12
    UINT64 = 13
    COMPLEX64 = 14
    COMPLEX128 = 15
    BFLOAT16 = 16


_T = TensorProtoDataType

#: torch's scalar type names -> ONNX data type (as torch's ``symbolic_helper``).
cast_pytorch_to_onnx: dict[str, TensorProtoDataType] = {
    "Byte": _T.UINT8, "Char": _T.INT8, "Double": _T.DOUBLE, "Float": _T.FLOAT,
    "Half": _T.FLOAT16, "Int": _T.INT32, "Long": _T.INT64, "Short": _T.INT16, "Bool": _T.BOOL,
    "ComplexFloat": _T.COMPLEX64, "ComplexDouble": _T.COMPLEX128, "BFloat16": _T.BFLOAT16,
    "Undefined": _T.UNDEFINED,
}

#: ONNX data type of each torch ``ScalarType`` number (uint8, int8, int16, int32, int64,
#: float16, float32, float64, complex32, complex64, complex128, bool, qint8, quint8, qint32,
#: bfloat16), as torch's ``symbolic_helper``.
scalar_type_to_onnx: list[TensorProtoDataType] = [
    _T.UINT8, _T.INT8, _T.INT16, _T.INT32, _T.INT64, _T.FLOAT16, _T.FLOAT, _T.DOUBLE,
    _T.UNDEFINED, _T.COMPLEX64, _T.COMPLEX128, _T.BOOL, _T.INT8, _T.UINT8, _T.INT32,
    _T.BFLOAT16,
]

_NUMPY_TO_ONNX = {np.dtype(k): v for k, v in {
    "float32": _T.FLOAT, "uint8": _T.UINT8, "int8": _T.INT8, "uint16": _T.UINT16,
    "int16": _T.INT16, "int32": _T.INT32, "int64": _T.INT64, "bool": _T.BOOL,
    "float16": _T.FLOAT16, "float64": _T.DOUBLE, "uint32": _T.UINT32, "uint64": _T.UINT64,
    "complex64": _T.COMPLEX64, "complex128": _T.COMPLEX128}.items()}


def onnx_dtype(dtype: Any) -> TensorProtoDataType:
    """The ONNX data type of a NumPy or tb dtype (``tb.float32`` -> ``FLOAT``).

    Raises:
        TypeError: ONNX has no such type.
    """
    name = str(dtype).replace("tensorbrain.", "").replace("torch.", "")
    if name == "bfloat16":
        return _T.BFLOAT16
    try:
        return _NUMPY_TO_ONNX[np.dtype(name)]
    except (TypeError, KeyError):
        raise TypeError(f"dtype {dtype} has no ONNX data type") from None


def _as_python(value: Any, desc: str, name: str) -> Any:
    if desc in ("v", "none") or value is None:
        return value
    if isinstance(value, Value):
        if value.example is None:
            raise TypeError(f"parse_args: argument '{name}' was asked for as '{desc}' but is a "
                            f"value computed in the graph, not a constant")
        value = value.example
    arr = np.asarray(value)
    if desc == "i":
        return int(arr)
    if desc == "f":
        return float(arr)
    if desc == "b":
        return bool(arr)
    if desc == "is":
        return [int(v) for v in arr.reshape(-1)]
    if desc == "fs":
        return [float(v) for v in arr.reshape(-1)]
    if desc == "s":
        return str(value)
    raise ValueError(f"parse_args: unknown descriptor {desc!r} (use v, i, f, b, is, fs, s, "
                     f"none)")


def parse_args(*arg_descriptors: str) -> Callable[[Callable], Callable]:
    """Decorate a symbolic function so its arguments arrive as Python values (torch's
    ``symbolic_helper.parse_args``): ``"v"`` a graph Value as it is, ``"i"`` int, ``"f"``
    float, ``"b"`` bool, ``"is"`` list of ints, ``"fs"`` list of floats, ``"s"`` str,
    ``"none"`` as it is.

    Args:
        *arg_descriptors: one descriptor per argument after ``g``.

    Returns:
        The decorator.
    """
    def decorator(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapper(g: Any, *args: Any, **kwargs: Any) -> Any:
            parsed = [_as_python(a, d, f"#{i}") for i, (a, d) in
                      enumerate(zip(args, arg_descriptors))]
            return fn(g, *parsed, *args[len(arg_descriptors):], **kwargs)
        return wrapper
    return decorator


def _get_tensor_rank(x: Any) -> int | None:
    """The rank of ``x`` when the example run tells it (torch's private helper of that name)."""
    return x.rank() if isinstance(x, Value) else int(np.ndim(x))
