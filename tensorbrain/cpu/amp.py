"""``tb.cpu.amp``: ``autocast`` for the CPU (bfloat16 by default) and ``GradScaler``."""
from __future__ import annotations

from .. import _dtype
from ..amp import autocast as _autocast
from .. import amp as _amp
from ..amp import GradScaler as _GradScaler


class autocast(_autocast):
    """``tb.cpu.amp.autocast(...)`` is ``tb.autocast("cpu", ...)`` (PyTorch's old spelling).

    Args:
        enabled: False makes the region a no-op.
        dtype: bfloat16 (default) or float16.
        cache_enabled: cache the low-precision copies of parameters within the region.
    """

    def __init__(self, enabled=True, dtype=_dtype.bfloat16, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``tb.cpu.amp.GradScaler(...)`` is ``tb.amp.GradScaler("cpu", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("cpu", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``tb.amp.custom_fwd(device_type="cpu", ...)``."""
    return _amp.custom_fwd(fwd, device_type="cpu", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``tb.amp.custom_bwd(device_type="cpu")``."""
    return _amp.custom_bwd(bwd, device_type="cpu")
