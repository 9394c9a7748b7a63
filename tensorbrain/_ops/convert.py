"""Dtype conversions named after their dtype, as torch's ``Tensor.byte()``, ``char()``,
``short()``, ``cfloat()``, ``cdouble()`` (``float()``/``long()``/... are in ``tensor.py``):
one row of :data:`CONVERSIONS` each; all go through ``shape.to_dtype`` (gradients flow between
floating and complex dtypes, as torch's)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import shape as S


if TYPE_CHECKING:   # the ops this module makes from its tables, below, are seen by mypy as Any
    def __getattr__(name: str) -> Any: ...

#: name -> dtype.
CONVERSIONS = {"byte": np.uint8, "char": np.int8, "short": np.int16, "cfloat": np.complex64,
               "cdouble": np.complex128}


def _conversion(name, dtype):
    dtype = np.dtype(dtype)

    def convert(a, memory_format=None):
        return S.to_dtype(a, dtype)
    convert.__name__ = convert.__qualname__ = name
    convert.__doc__ = (f"``a`` converted to {dtype} (``torch.Tensor.{name}``); ``a`` itself "
                       f"when it already is.\n\nArgs:\n    a: the tensor.\n    memory_format: "
                       f"accepted.\n\nReturns:\n    Tensor: the converted tensor.\n\nExample:\n"
                       f"    >>> import tensorbrain as tb\n    >>> tb.ones(1).{name}().dtype\n"
                       f"    dtype('{dtype}')\n")
    return convert


for _name, _dtype in CONVERSIONS.items():
    globals()[_name] = _conversion(_name, _dtype)
del _name, _dtype
