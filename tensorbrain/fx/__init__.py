"""``tb.fx`` (``torch.fx``): refused by name. TensorBrain has no symbolic tracer or graph IR
(its modules run Python eagerly on NumPy/CuPy), so graph capture, rewriting and
``GraphModule`` cannot be supported; each name exists so that imports and ``isinstance``
checks go on, and using one raises ``NotImplementedError`` saying so
(``tensorbrain/_unsupported.py``). Split pipelines by hand instead of tracing them (see
docs/pipeline.md).
"""
from __future__ import annotations

from .._unsupported import unsupported, unsupported_class
from .node import _USE, _WHY, Node, map_arg  # noqa: F401
from .proxy import Proxy, TraceError  # noqa: F401

symbolic_trace = unsupported("torch.fx.symbolic_trace", _WHY, _USE)
wrap = unsupported("torch.fx.wrap", _WHY, _USE)
replace_pattern = unsupported("torch.fx.replace_pattern", _WHY, _USE)
has_side_effect = unsupported("torch.fx.has_side_effect", _WHY, _USE)
Tracer = unsupported_class("torch.fx.Tracer", _WHY, _USE)
Graph = unsupported_class("torch.fx.Graph", _WHY, _USE)
GraphModule = unsupported_class("torch.fx.GraphModule", _WHY, _USE)
Interpreter = unsupported_class("torch.fx.Interpreter", _WHY, _USE)
Transformer = unsupported_class("torch.fx.Transformer", _WHY, _USE)
