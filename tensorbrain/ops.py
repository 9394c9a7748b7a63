"""``tb.ops`` (``torch.ops``): refused by name. ``torch.ops.aten.mm`` & co. are handles on
torch's dispatcher operators, which TensorBrain does not have; every ``tb.ops.<ns>.<op>`` is
a refusal (usable as a dict key or in ``isinstance``-free checks, raising when called). Call
the public function (``tb.mm``, ``tb.nn.functional.linear``...) instead.
"""
from __future__ import annotations

from ._unsupported import NotSupportedError

_WHY = "TensorBrain has no operator dispatcher (torch.ops.aten.* are its operators)"


class _OpNamespace:
    """``tb.ops.<namespace>``: every attribute is a refused operator handle."""

    __tb_refuses__ = _WHY

    def __init__(self, path: str):
        self._path = path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _OpNamespace(f"{self._path}.{name}")

    def __call__(self, *args, **kwargs):
        raise NotSupportedError(f"{self._path} is not supported by TensorBrain: {_WHY}. Use the "
                                f"public function (tb.*, tb.nn.functional.*) instead")

    def __repr__(self):
        return f"<refused {self._path}>"


aten = _OpNamespace("torch.ops.aten")
prims = _OpNamespace("torch.ops.prims")
profiler = _OpNamespace("torch.ops.profiler")
__tb_refuses__ = _WHY


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _OpNamespace(f"torch.ops.{name}")
