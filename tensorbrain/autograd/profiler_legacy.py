"""``tb.autograd.profiler_legacy`` (``torch.autograd.profiler_legacy``): its ``profile`` is
:class:`tensorbrain.autograd.profiler.profile` (one recorder serves both of torch's APIs)."""
from .profiler import profile

__all__ = ["profile"]
