"""``tb.types`` (``torch.types``): the type aliases programs use in annotations (``Number``,
``Device``, ``_size``...), naming TensorBrain's classes.

>>> import tensorbrain as tb
>>> isinstance(3.0, tb.types.Number)
True
"""
from __future__ import annotations

import os
from typing import IO

import numpy as np

from ._device import device as _device
from ._layout import layout as _layout  # noqa: F401  (torch.types._layout)
from .tensor import Tensor
from ._torch_extras import SymBool, SymFloat, SymInt

_int = int
_float = float
_bool = bool
_complex = complex
_str = str
_bytes = bytes
_dtype = np.dtype
_qscheme = str

Number = int | float | bool
_Number = (int, float, bool)
Device = _device | str | int | None
_size = tuple | list
_symsize = _size
IntLikeType = int | SymInt
FloatLikeType = float | SymFloat
BoolLikeType = bool | SymBool
py_sym_types = (SymInt, SymFloat, SymBool)
FileLike = str | os.PathLike | IO[bytes]
_TensorOrTensors = Tensor | tuple
_TensorOrOptionalTensors = Tensor | None | tuple

__all__ = ["BoolLikeType", "Device", "FileLike", "FloatLikeType", "IntLikeType", "Number",
           "SymBool", "SymFloat", "SymInt", "Tensor", "py_sym_types"]


def __getattr__(name):
    if name == "Size":
        from ._tensor_base import Size
        return Size
    if name == "Storage":
        from .storage import UntypedStorage
        return UntypedStorage
    raise AttributeError(f"module 'tensorbrain.types' has no attribute {name!r}")
