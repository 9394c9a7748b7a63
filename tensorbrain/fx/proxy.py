"""``tb.fx.proxy`` (``torch.fx.proxy``): ``TraceError`` (programs catch it) and the refused
``Proxy`` (see ``tb.fx``)."""
from __future__ import annotations

from .._unsupported import unsupported_class
from .node import _USE, _WHY


class TraceError(ValueError):
    """What torch.fx raises when a module cannot be traced (never raised here)."""


Proxy = unsupported_class("torch.fx.proxy.Proxy", _WHY, _USE)
GraphAppendingTracer = unsupported_class("torch.fx.proxy.GraphAppendingTracer", _WHY, _USE)
