"""Graph nodes. Each differentiable op's output owns one :class:`Node` (its ``grad_fn``).

A node holds the op's input tensors and a ``backward`` closure written next to the op's forward
(see ``tensorbrain/_ops``). The closure maps the output's gradient to one gradient per input
(None where an input needs none). Tensors the closure reads are listed in ``saved`` with their
version at save time, so an in-place change before backward is detected instead of silently
giving a wrong gradient.
"""
from __future__ import annotations

import itertools

_seq = itertools.count()


class Node:
    __slots__ = ("name", "inputs", "backward", "saved", "seq", "pre_hooks", "__weakref__")

    def __init__(self, name, inputs, backward, saved=()):
        self.name = name
        self.inputs = inputs            # tuple of Tensor | None, one per differentiable input
        self.backward = backward        # fn(grad_array) -> tuple of grad arrays | None
        self.saved = tuple((t, t._version[0]) for t in saved)
        self.seq = next(_seq)           # later nodes run first, as in PyTorch's engine
        self.pre_hooks = None           # hooks registered on the output tensor (register_hook)

    def __repr__(self):
        return f"<{self.name} object>"

    def next_functions(self):
        """(node or leaf tensor, index) pairs, for graph walks (DDP's unused-parameter search)."""
        out = []
        for t in self.inputs:
            if t is None or not t.requires_grad:
                out.append((None, 0))
            else:
                out.append((t.grad_fn if t.grad_fn is not None else t, 0))
        return tuple(out)


def reachable_leaves(roots):
    """Leaf tensors requiring grad that the graph of ``roots`` reaches (iteratively)."""
    seen, leaves, stack = set(), {}, []
    for r in roots:
        if r.grad_fn is not None:
            stack.append(r.grad_fn)
        elif r.requires_grad:
            leaves[id(r)] = r
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for t in node.inputs:
            if t is None or not t.requires_grad:
                continue
            if t.grad_fn is not None:
                stack.append(t.grad_fn)
            else:
                leaves[id(t)] = t
    return list(leaves.values())
