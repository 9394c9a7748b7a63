"""``torch.distributed.pipelining.microbatch``: splitting a batch's arguments into micro-batches
and merging the micro-batches' outputs back, as torch's.

Tensors split with ``tensor_split`` along their :class:`TensorChunkSpec` dimension (0 by
default); other values are replicated to every chunk. When a tensor is too short for ``chunks``
pieces, every argument is split into as many chunks as the shortest allows (torch's rule).
Arguments may be nested in tuples, lists and dicts. (torch also splits flex attention's
``BlockMask``; TensorBrain's dense ``BlockMask`` is not split.)

>>> import tensorbrain as tb
>>> from tensorbrain.distributed.pipelining.microbatch import (merge_chunks,
...     split_args_kwargs_into_chunks)
>>> args, kwargs = split_args_kwargs_into_chunks((tb.arange(6),), {"scale": 2}, 3)
>>> [a[0].tolist() for a in args], kwargs[0]
([[0, 1], [2, 3], [4, 5]], {'scale': 2})
>>> merge_chunks([a[0] for a in args], None).tolist()
[0, 1, 2, 3, 4, 5]
"""
from __future__ import annotations

from typing import Any

from ...tensor import Tensor

DEFAULT_CHUNK_DIM = 0


class TensorChunkSpec:
    """The dimension a tensor argument is split along.

    Args:
        split_dim: the dimension.
    """

    def __init__(self, split_dim: int):
        self.split_dim = split_dim

    def __repr__(self):
        return f"{type(self).__module__}.{type(self).__name__}({self.split_dim})"

    def __str__(self):
        return f"TensorChunkSpec({self.split_dim})"

    def __eq__(self, other):
        return isinstance(other, TensorChunkSpec) and other.split_dim == self.split_dim

    __hash__ = None   # type: ignore[assignment]

    @staticmethod
    def from_tuple(chunk_dims: tuple[int, ...]):
        """A tuple of specs from a tuple of dimensions.

        Args:
            chunk_dims: one dimension per positional argument.
        """
        return _map(chunk_dims, TensorChunkSpec)

    @staticmethod
    def from_dict(chunk_dims: dict[str, int]):
        """A dict of specs from a dict of dimensions.

        Args:
            chunk_dims: one dimension per keyword argument.
        """
        return _map(chunk_dims, TensorChunkSpec)


class _Replicate:
    """The spec of a value copied to every chunk."""


class _CustomReducer:
    """A spec merging chunks with ``reduce_fn`` from ``init_value`` (torch's)."""

    def __init__(self, init_value, reduce_fn):
        self.init_value, self.reduce_fn = init_value, reduce_fn


class _LossReducer(_CustomReducer):
    pass


sum_reducer = _LossReducer(0.0, lambda a, b: a + b)


def _flatten(tree) -> tuple[list, Any]:
    """Leaves of nested tuples/lists/dicts, and how to rebuild them."""
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for v in tree:
            sub, spec = _flatten(v)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (type(tree), None, specs)
    if isinstance(tree, dict):
        leaves, specs = [], []
        for v in tree.values():
            sub, spec = _flatten(v)
            leaves += sub
            specs.append((len(sub), spec))
        return leaves, (dict, list(tree), specs)
    return [tree], None


def _unflatten(leaves: list, spec):
    if spec is None:
        return leaves[0]
    kind, keys, specs = spec
    out, at = [], 0
    for n, sub in specs:
        out.append(_unflatten(leaves[at:at + n], sub))
        at += n
    if kind is dict:
        return dict(zip(keys, out))
    return kind(out)


def _map(tree, fn):
    leaves, spec = _flatten(tree)
    return _unflatten([fn(v) for v in leaves], spec)


def _shard(values: dict, specs: dict, num_chunks: int) -> list[dict]:
    if not values:
        return [{} for _ in range(num_chunks)]
    if len(values) != len(specs):
        raise AssertionError(f"args_dict.keys() = {list(values)} args_chunk_spec.keys() = "
                             f"{list(specs)}")
    leaves, tree = _flatten(values)
    spec_leaves, _ = _flatten(specs)
    sizes = []
    for v, s in zip(leaves, spec_leaves, strict=True):
        if isinstance(s, _Replicate):
            sizes.append(num_chunks)
        elif isinstance(v, Tensor):
            if not isinstance(s, TensorChunkSpec):
                raise AssertionError(f"Expected TensorChunkSpec, got {type(s)}")
            sizes.append(v.size(s.split_dim))
        else:
            raise ValueError(f"Unsupported chunk spec: {s} and value: {v} combination.")
    n = min(*sizes, num_chunks)
    pieces = [[v] * n if isinstance(s, _Replicate) else list(v.tensor_split(n, s.split_dim))
              for v, s in zip(leaves, spec_leaves)]
    return [_unflatten([p[i] for p in pieces], tree) for i in range(n)]


def split_args_kwargs_into_chunks(args: tuple, kwargs: dict | None, chunks: int,
                                  args_chunk_spec=None, kwargs_chunk_spec=None):
    """Split ``args`` and ``kwargs`` into ``chunks`` micro-batches, as torch's.

    Args:
        args: the positional arguments.
        kwargs: the keyword arguments (None: none).
        chunks: the number of micro-batches wanted.
        args_chunk_spec: specs shaped as ``args`` (default: tensors along dim 0, the rest
            replicated).
        kwargs_chunk_spec: specs shaped as ``kwargs``.

    Returns:
        ``(args_split, kwargs_split)``: a list of argument tuples and a list of keyword dicts,
        one per chunk (fewer than ``chunks`` when a tensor is too short).

    Raises:
        ValueError: a non-tensor given a :class:`TensorChunkSpec`.
    """
    kwargs = {} if kwargs is None else kwargs

    def default(v):
        return TensorChunkSpec(DEFAULT_CHUNK_DIM) if isinstance(v, Tensor) else _Replicate()
    if args_chunk_spec is None:
        args_chunk_spec = _map(tuple(args), default)
    if kwargs_chunk_spec is None:
        kwargs_chunk_spec = _map(kwargs, default)
    arg_specs = dict(enumerate(args_chunk_spec))
    args_split = _shard(dict(enumerate(args)), arg_specs, chunks)
    kwargs_split = _shard(kwargs, kwargs_chunk_spec, len(args_split))
    if len(kwargs_split) < len(args_split):
        args_split = _shard(dict(enumerate(args)), arg_specs, len(kwargs_split))
    return [tuple(a[i] for i in range(len(a))) for a in args_split], kwargs_split


def merge_chunks(chunks: list, chunk_spec):
    """Merge micro-batch outputs into one value, as torch's: tensors under a
    :class:`TensorChunkSpec` are concatenated along its dimension, a ``_CustomReducer`` folds
    its values, anything else must be equal in every chunk.

    Args:
        chunks: the outputs, one per micro-batch, each of the same structure.
        chunk_spec: specs shaped as one output (None: every leaf concatenated along dim 0).

    Returns:
        The merged value, shaped as one output.

    Raises:
        ValueError: a chunk whose structure does not match the spec.
    """
    from ..._ops.shape import cat
    if chunk_spec is not None:
        specs, tree = _flatten(chunk_spec)
    else:
        first, tree = _flatten(chunks[0])
        specs = [TensorChunkSpec(DEFAULT_CHUNK_DIM)] * len(first)
    flat = []
    for chunk in chunks:
        leaves, _ = _flatten(chunk)
        if len(leaves) != len(specs):
            raise ValueError(f"Chunk {chunk} did not match chunk spec {chunk_spec}")
        flat.append(leaves)
    out = []
    for k, spec in enumerate(specs):
        values = [leaves[k] for leaves in flat]
        if isinstance(spec, TensorChunkSpec):
            out.append(cat(values, spec.split_dim))
        elif isinstance(spec, _CustomReducer):
            acc = spec.init_value
            for v in values:
                acc = spec.reduce_fn(acc, v)
            out.append(acc)
        else:
            for v in values[1:]:
                if not v == values[0]:
                    raise AssertionError(f"Expected {values[0]}, got {v}")
            out.append(values[0])
    return _unflatten(out, tree)


__all__ = ["TensorChunkSpec", "merge_chunks", "split_args_kwargs_into_chunks"]
