"""``tb.fx`` (``torch.fx``): a symbolic tracer and graph IR for TensorBrain modules.

``symbolic_trace(module)`` runs ``forward`` once on :class:`Proxy` values and returns a
:class:`GraphModule`: a :class:`Graph` of :class:`Node` s (``placeholder``, ``get_attr``,
``call_function``, ``call_method``, ``call_module``, ``output``) compiled into Python source
(``.code``) that computes what the module computes. Graphs can be edited and recompiled, run
node by node with :class:`Interpreter` or rewritten with :class:`Transformer`, as torch's.
How calls such as ``torch.relu(proxy)`` are caught without ``__torch_function__`` is described
in ``tensorbrain/fx/_symbolic_trace.py`` and docs/fx.md. ``replace_pattern`` and
``has_side_effect`` are refused by name (``tensorbrain/_unsupported.py``).
"""
from __future__ import annotations

from .._unsupported import unsupported
from . import traceback  # noqa: F401
from ._symbolic_trace import Tracer, symbolic_trace, wrap
from .graph import CodeGen, Graph
from .graph_module import GraphModule
from .interpreter import Interpreter, Transformer
from .node import Node, map_arg
from .proxy import Proxy

_WHY = "TensorBrain's fx has no subgraph rewriter"
replace_pattern = unsupported("torch.fx.replace_pattern", _WHY,
                              "Graph.inserting_before / node.replace_all_uses_with")
has_side_effect = unsupported("torch.fx.has_side_effect", "TensorBrain's fx keeps its own list "
                              "of side-effecting functions", "Node.is_impure")

__all__ = ["CodeGen", "Graph", "GraphModule", "Interpreter", "Node", "Proxy", "Tracer",
           "Transformer", "map_arg", "replace_pattern", "symbolic_trace", "wrap"]
