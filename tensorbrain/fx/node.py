"""``tb.fx.node`` (``torch.fx.node``): refused by name (see ``tb.fx``)."""
from __future__ import annotations

from .._unsupported import unsupported, unsupported_class

_WHY = "TensorBrain has no symbolic tracer or graph IR (modules run eagerly)"
_USE = "the module itself, or a split written by hand"
Node = unsupported_class("torch.fx.node.Node", _WHY, _USE)
map_arg = unsupported("torch.fx.node.map_arg", _WHY, _USE)
Target = object   # torch's type alias of what a node calls
