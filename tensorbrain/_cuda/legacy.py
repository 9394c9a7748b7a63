"""``tb.cuda.FloatTensor`` & co.: the legacy typed CUDA classes, made with the CPU ones in
``tensorbrain/_legacy_types.py`` and reached through ``tb.cuda``'s ``__getattr__``."""
from __future__ import annotations

from .._legacy_types import CUDA_TYPES

globals().update(CUDA_TYPES)
__all__ = sorted(CUDA_TYPES)
