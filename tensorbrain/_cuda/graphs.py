"""``tb.cuda.graphs`` (``torch.cuda.graphs``): CUDA-graph capture, which TensorBrain refuses
(its GPU ops are CuPy kernels run eagerly); the names are those of ``tb.cuda``."""
from __future__ import annotations

from ..cuda import CUDAGraph, graph, graph_pool_handle, make_graphed_callables  # noqa: F401

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "make_graphed_callables"]
