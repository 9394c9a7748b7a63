"""``tb.cuda.amp``: ``autocast`` for CUDA (float16 by default) and ``GradScaler``.

Imported as ``tensorbrain.cuda.amp``: ``tensorbrain/cuda.py`` names this folder as its package
path (see the note there), so ``from tensorbrain.cuda.amp import autocast, GradScaler`` works as
``from torch.cuda.amp import ...`` does. Without CUDA both warn and disable themselves, as in
PyTorch, so GPU scripts still run on the CPU in float32.
"""
from __future__ import annotations

from .. import _dtype
from ..amp import autocast as _autocast
from .. import amp as _amp
from ..amp import GradScaler as _GradScaler


class autocast(_autocast):
    """``tb.cuda.amp.autocast(...)`` is ``tb.autocast("cuda", ...)``.

    Args:
        enabled: False makes the region a no-op.
        dtype: float16 (default) or bfloat16 (needs CuPy >= 14, which has ml_dtypes' bfloat16).
        cache_enabled: cache the low-precision copies of parameters within the region.
    """

    def __init__(self, enabled=True, dtype=_dtype.float16, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(_GradScaler):
    """``tb.cuda.amp.GradScaler(...)`` is ``tb.amp.GradScaler("cuda", ...)``."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval,
                         enabled)


def custom_fwd(fwd=None, *, cast_inputs=None):
    """``tb.amp.custom_fwd(device_type="cuda", ...)``."""
    return _amp.custom_fwd(fwd, device_type="cuda", cast_inputs=cast_inputs)


def custom_bwd(bwd=None):
    """``tb.amp.custom_bwd(device_type="cuda")``."""
    return _amp.custom_bwd(bwd, device_type="cuda")


def _submodule(name: str, doc: str, **names):
    """A module object ``tensorbrain.cuda.amp.<name>`` holding ``names`` (torch's old paths)."""
    import sys
    import types
    mod = types.ModuleType(f"{__name__}.{name}", doc)
    mod.__dict__.update(names)
    sys.modules[mod.__name__] = mod
    return mod


def _amp_definitely_not_available() -> bool:
    """True when no GPU can run autocast (torch's ``amp.common`` helper)."""
    from .. import _xp
    return not _xp.cuda_available()


common = _submodule("common", "torch.cuda.amp.common",
                    amp_definitely_not_available=_amp_definitely_not_available)
grad_scaler = _submodule("grad_scaler", "torch.cuda.amp.grad_scaler", GradScaler=GradScaler)
autocast_mode = _submodule("autocast_mode", "torch.cuda.amp.autocast_mode", autocast=autocast,
                           custom_fwd=custom_fwd, custom_bwd=custom_bwd)
