"""``tb.onnx.symbolic_opset9``: symbolic functions symbolic code calls by name (torch's module
of that name; these two are the ones programs use). Each writes into the ``g`` it is given, in
the form the graph's opset wants (axes as an attribute before opset 13, as an input after).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ._graph import GraphContext, Value
from .symbolic_helper import _get_tensor_rank


def unsqueeze(g: GraphContext, self: Any, dim: int) -> Value:
    """``self.unsqueeze(dim)`` as an ONNX ``Unsqueeze`` node.

    Args:
        g: the graph context.
        self: the input Value.
        dim: the new axis (negative counts from the end of the result).

    Raises:
        ValueError: ``dim`` is negative and the input's rank is unknown.
    """
    dim = int(np.asarray(dim.example if isinstance(dim, Value) else dim))
    if dim < 0:
        rank = _get_tensor_rank(self)
        if rank is None:
            raise ValueError("unsqueeze with a negative dim needs the input's rank, which is "
                             "not known here")
        dim += rank + 1
    if g.opset < 13:
        return g.op("Unsqueeze", self, axes_i=[dim])
    return g.op("Unsqueeze", self, g.constant(np.array([dim], np.int64)))


def shape_tensor(g: GraphContext, sizes: Any) -> Value:
    """A 1-D int64 Value from a list of ints and scalar Values (a traced ``x.size(0)``), or a
    Value that already is one."""
    if isinstance(sizes, Value):
        return sizes
    if all(not isinstance(s, Value) for s in sizes):
        return g.constant(np.array([int(s) for s in sizes], np.int64))
    parts = [unsqueeze(g, s, 0) if isinstance(s, Value) else
             g.constant(np.array([int(s)], np.int64)) for s in sizes]
    return g.op("Concat", *parts, axis_i=0)


def expand(g: GraphContext, self: Any, size: Any, implicit: Any = False) -> Value:
    """``self.expand(*size)`` as an ONNX ``Expand`` node (a ``-1`` keeps that dimension: it
    becomes 1, which ONNX's two-way broadcast leaves as it is).

    Args:
        g: the graph context.
        self: the input Value.
        size: the sizes (ints and scalar Values) or a 1-D int64 Value.
        implicit: torch's flag, unused.
    """
    if isinstance(size, Value):
        ones = g.op("ConstantOfShape", g.op("Shape", size),
                    value_t=np.array([1], np.int64))
        size = g.op("Where", g.op("Equal", size, g.constant(np.array(-1, np.int64))), ones,
                    size)
    else:
        size = shape_tensor(g, [1 if (not isinstance(s, Value) and int(s) == -1) else s
                                for s in size])
    return g.op("Expand", self, size)
