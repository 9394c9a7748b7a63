"""``tb.amp``: automatic mixed precision, PyTorch's ``torch.amp``.

* :class:`autocast` runs PyTorch's lower-precision op list (matmul, linear, convolutions, ...)
  in float16/bfloat16 and the float32 list (losses, and on CUDA softmax, norms, sums, exp...) in
  float32; see ``_lists.py`` and docs/amp.md.
* :class:`GradScaler` does dynamic loss scaling for float16 training.

>>> import tensorbrain as tb
>>> with tb.amp.autocast("cpu"):
...     y = tb.nn.functional.linear(tb.randn(2, 3), tb.randn(4, 3))
>>> y.dtype
dtype(bfloat16)
"""
from __future__ import annotations

from .autocast_mode import (autocast, autocast_op, clear_autocast_cache, custom_bwd, custom_fwd,
                            get_autocast_dtype, is_autocast_available, is_autocast_enabled)
from .grad_scaler import GradScaler

__all__ = ["autocast", "GradScaler", "is_autocast_available", "is_autocast_enabled",
           "get_autocast_dtype", "clear_autocast_cache", "autocast_op", "custom_fwd", "custom_bwd"]
