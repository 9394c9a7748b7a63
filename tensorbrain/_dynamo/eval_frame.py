"""``tb._dynamo.eval_frame``: :class:`OptimizedModule`, what ``tb.compile(module)`` returns."""
from __future__ import annotations

import functools

from ..nn.modules.module import Module


class OptimizedModule(Module):
    """A compiled module, as torch's: it holds the original as ``_orig_mod`` and runs it as it
    is (TensorBrain compiles nothing). Attributes it does not have are the original's, and its
    ``state_dict`` keys carry the ``_orig_mod.`` prefix, as torch's do.

    Args:
        mod: the module that was compiled.
    """

    def __init__(self, mod: Module):
        super().__init__()
        self._orig_mod = mod

    def forward(self, *args, **kwargs):
        return self._orig_mod(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._modules["_orig_mod"], name)


def wrap_function(fn):
    """What ``tb.compile(fn)`` returns for a function: a wrapper that calls it."""
    @functools.wraps(fn)
    def compiled(*args, **kwargs):
        return fn(*args, **kwargs)
    compiled._torchdynamo_orig_callable = fn  # type: ignore[attr-defined]
    return compiled


def is_dynamo_supported() -> bool:
    """False: there is no dynamo here (programs check before compiling)."""
    return False


__all__ = ["OptimizedModule", "is_dynamo_supported", "wrap_function"]
