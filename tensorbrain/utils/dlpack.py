"""``tb.utils.dlpack``: torch.utils.dlpack's two functions.

>>> import numpy as np, tensorbrain as tb
>>> from tensorbrain.utils.dlpack import from_dlpack, to_dlpack
>>> t = from_dlpack(to_dlpack(tb.tensor([1.0, 2.0])))
>>> t.tolist()
[1.0, 2.0]
"""
from __future__ import annotations

from .._interop import from_dlpack, to_dlpack  # noqa: F401

__all__ = ["from_dlpack", "to_dlpack"]
