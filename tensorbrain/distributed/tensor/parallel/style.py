"""Tensor-parallel styles for ``nn.Linear`` and ``nn.Embedding`` (torch's
``torch.distributed.tensor.parallel.style``), Megatron-LM's column and row splits.

``ColwiseParallel``: the weight's output rows are split (``Shard(0)`` for Linear, the embedding
dimension ``Shard(1)`` for Embedding); the replicated input passes through an operator that is
the identity forward and an all-reduce of its gradient backward (Megatron's ``f``); each rank
returns its slice of the output features.

``RowwiseParallel``: the weight's input columns are split (``Shard(1)`` for Linear, the vocabulary
``Shard(0)`` for Embedding); each rank computes a partial sum from its slice of the input
features, and one all-reduce (Megatron's ``g``, identity backward) gives every rank the whole
output; the bias (replicated) is added once, after the sum.

So an MLP block ``Colwise -> activation -> Rowwise`` costs one all-reduce forward and one
backward, as in Megatron. Parameters become ``DTensor`` parameters (``weight.full_tensor()``
gives the whole matrix); the computation runs on the local shards.
"""
from __future__ import annotations

import types

from ... import distributed_c10d as c10d
from .._api import DTensor
from .._redistribute import all_gather_dim, take_chunk
from ..placement_types import Replicate, Shard

__all__ = ["ParallelStyle", "ColwiseParallel", "RowwiseParallel", "SequenceParallel"]


# ***** the four communication operators (raw autograd nodes) *****
def _wrap(arr):
    from ....tensor import Tensor
    return Tensor._wrap(arr)


def _all_reduce(arr, group):
    out = arr.copy()
    c10d.all_reduce(_wrap(out), group=group)
    return out


def copy_to_region(x, group):
    """Identity forward; all-reduce of the gradient backward (Megatron's ``f``).

    Args:
        x: the tensor.
        group: the tensor-parallel process group.
    """
    from ...._ops.core import make
    out = make(x._data, (x,), lambda g: (_all_reduce(g, group),), "TPCopyToRegionBackward")
    out._version = x._version
    return out


def reduce_from_region(x, group):
    """All-reduce forward; identity backward (Megatron's ``g``).

    Args:
        x: the tensor (this rank's partial result).
        group: the tensor-parallel process group.
    """
    from ...._ops.core import make
    return make(_all_reduce(x._data, group), (x,), lambda g: (g,), "TPReduceFromRegionBackward")


def gather_last(x, group, n, index, full):
    """All-gather the last dimension's chunks; backward keeps this rank's chunk.

    Args:
        x: this rank's chunk.
        group: the tensor-parallel process group.
        n: the group's size.
        index: this rank's index in it.
        full: the size of the gathered last dimension.
    """
    from ...._ops.core import make
    return make(all_gather_dim(x._data, x._data.ndim - 1, full, group, n), (x,),
                lambda g: (take_chunk(g, g.ndim - 1, n, index),), "TPGatherBackward")


def split_last(x, group, n, index):
    """This rank's chunk of the last dimension; backward all-gathers the gradient.

    Args:
        x: the whole tensor.
        group: the tensor-parallel process group.
        n: the group's size.
        index: this rank's index in it.
    """
    from ...._ops.core import make
    full = x._data.shape[-1]
    return make(take_chunk(x._data, x._data.ndim - 1, n, index), (x,),
                lambda g: (all_gather_dim(g, g.ndim - 1, full, group, n),), "TPSplitBackward")


# ***** styles *****
def _kind(module) -> str:
    from ....nn import Embedding, Linear
    if isinstance(module, Linear):
        return "linear"
    if isinstance(module, Embedding):
        return "embedding"
    raise NotImplementedError(f"tensor parallel: {type(module).__name__} is not supported; "
                              f"ColwiseParallel/RowwiseParallel handle nn.Linear and nn.Embedding")


def _distribute(module, name, mesh, placement, src_data_rank):
    from .._api import distribute_tensor
    p = getattr(module, name, None)
    if p is None:
        return
    if isinstance(p, DTensor):
        raise ValueError(f"tensor parallel: this {type(module).__name__}'s {name} is already a "
                         f"DTensor {p.placements}; a module takes one parallel style (check "
                         f"that the plan's patterns do not match it twice)")
    dt = distribute_tensor(p.detach(), mesh, [placement], src_data_rank=src_data_rank)
    setattr(module, name, DTensor._as_parameter(dt, requires_grad=p.requires_grad))


def _layout(value, allowed, what):
    value = value if value is not None else allowed[0]
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise NotImplementedError(f"{what}: one layout per module input/output is supported")
        value = value[0]
    if isinstance(value, Shard) and value.dim != -1:
        raise NotImplementedError(f"{what}: {value} (sequence parallel) is not supported; use "
                                  f"{allowed}")
    if value not in allowed and not (isinstance(value, Shard) and Shard(-1) in allowed):
        raise NotImplementedError(f"{what}: {value} is not supported; use one of {allowed}")
    return value


class ParallelStyle:
    """Base class: a recipe that shards one module over a 1-D mesh."""

    src_data_rank = 0

    def _apply(self, module, device_mesh):
        raise NotImplementedError


class ColwiseParallel(ParallelStyle):
    """Split ``nn.Linear``'s output features (or ``nn.Embedding``'s embedding dimension).

    Args:
        input_layouts: the input's layout, ``Replicate()`` (default; the only one supported).
        output_layouts: ``Shard(-1)`` (default: each rank keeps its slice of the features) or
            ``Replicate()`` (all-gathered).
        use_local_output: return a plain local Tensor (default) instead of a DTensor.

    Example:
        >>> parallelize_module(mlp, tp_mesh, {"w1": ColwiseParallel()})   # doctest: +SKIP
    """

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self.input_layouts = _layout(input_layouts, (Replicate(),), "ColwiseParallel input")
        self.output_layouts = _layout(output_layouts, (Shard(-1), Replicate()),
                                      "ColwiseParallel output")
        self.use_local_output = bool(use_local_output)

    def __repr__(self):
        return (f"ColwiseParallel(input_layouts={self.input_layouts}, output_layouts="
                f"{self.output_layouts}, use_local_output={self.use_local_output})")

    def _apply(self, module, device_mesh):
        kind = _kind(module)
        mesh, group = device_mesh, device_mesh.get_group()
        n, index = device_mesh.size(), device_mesh.get_local_rank()
        if kind == "linear":
            _distribute(module, "weight", mesh, Shard(0), self.src_data_rank)
            _distribute(module, "bias", mesh, Shard(0), self.src_data_rank)
            full = module.weight.shape[0]
        else:
            _distribute(module, "weight", mesh, Shard(1), self.src_data_rank)
            full = module.weight.shape[1]
        inner = type(module).forward
        style = self

        def forward(self_, x, *args, **kwargs):
            x = _to_local(x, "ColwiseParallel", (Replicate(),))
            if kind == "linear":
                x = copy_to_region(x, group)      # the input's gradient is summed over ranks
            out = inner(self_, x, *args, **kwargs)
            if style.output_layouts == Replicate():
                out = gather_last(out, group, n, index, full)
                return out if style.use_local_output else \
                    DTensor.from_local(out, mesh, [Replicate()])
            if style.use_local_output:
                return out
            return DTensor.from_local(out, mesh, [Shard(-1)],
                                      shape=tuple(out.shape[:-1]) + (full,))
        module.forward = types.MethodType(forward, module)
        return module


class RowwiseParallel(ParallelStyle):
    """Split ``nn.Linear``'s input features (or ``nn.Embedding``'s vocabulary); one all-reduce
    gives every rank the whole output.

    Args:
        input_layouts: ``Shard(-1)`` (default for Linear: the input is this rank's slice, e.g.
            a ColwiseParallel output) or ``Replicate()`` (default for Embedding; Linear slices
            it locally).
        output_layouts: ``Replicate()`` (default; the only one supported: the reduce-scatter of
            sequence parallelism is not).
        use_local_output: return a plain Tensor (default) instead of a DTensor.

    Example:
        >>> parallelize_module(mlp, tp_mesh, {"w2": RowwiseParallel()})   # doctest: +SKIP
    """

    def __init__(self, *, input_layouts=None, output_layouts=None, use_local_output=True):
        self._input_given = input_layouts is not None
        self.input_layouts = _layout(input_layouts, (Shard(-1), Replicate()),
                                     "RowwiseParallel input")
        self.output_layouts = _layout(output_layouts, (Replicate(),), "RowwiseParallel output")
        self.use_local_output = bool(use_local_output)

    def __repr__(self):
        return (f"RowwiseParallel(input_layouts={self.input_layouts}, output_layouts="
                f"{self.output_layouts}, use_local_output={self.use_local_output})")

    def _apply(self, module, device_mesh):
        from ....nn import functional as F
        kind = _kind(module)
        mesh, group = device_mesh, device_mesh.get_group()
        n, index = device_mesh.size(), device_mesh.get_local_rank()
        style = self

        def finish(out):
            return out if style.use_local_output else DTensor.from_local(out, mesh, [Replicate()])
        if kind == "linear":
            _distribute(module, "weight", mesh, Shard(1), self.src_data_rank)
            _distribute(module, "bias", mesh, Replicate(), self.src_data_rank)
            in_full = module.weight.shape[1]
            replicated_in = self.input_layouts == Replicate()

            def forward(self_, x):
                x = _to_local(x, "RowwiseParallel", (Shard(-1), Replicate()))
                if replicated_in:
                    x = split_last(x, group, n, index)
                elif x.shape[-1] != self_.weight._data.shape[1]:
                    raise ValueError(
                        f"RowwiseParallel: rank {c10d.get_rank()} got an input with "
                        f"{x.shape[-1]} features but holds {self_.weight._data.shape[1]} of the "
                        f"weight's {in_full} input columns; pass this rank's slice (a "
                        f"ColwiseParallel output) or use input_layouts=Replicate()")
                out = reduce_from_region(F.linear(x, self_.weight), group)
                return finish(out + self_.bias if self_.bias is not None else out)
        else:
            if self._input_given and self.input_layouts != Replicate():
                raise NotImplementedError("RowwiseParallel on nn.Embedding takes replicated ids")
            _distribute(module, "weight", mesh, Shard(0), self.src_data_rank)
            lo, hi = Shard.local_range(module.num_embeddings, n, index)

            def forward(self_, ids):
                ids = _to_local(ids, "RowwiseParallel", (Replicate(),))
                outside = (ids < lo) | (ids >= hi)
                local = (ids - lo) * (~outside).long()
                pad = self_.padding_idx
                pad = pad - lo if pad is not None and lo <= pad < hi else None
                rows = F.embedding(local, self_.weight, padding_idx=pad, max_norm=self_.max_norm,
                                   norm_type=self_.norm_type)
                rows = rows * (~outside).unsqueeze(-1).to(rows.dtype)
                return finish(reduce_from_region(rows, group))
        module.forward = types.MethodType(forward, module)
        return module


class SequenceParallel(ParallelStyle):
    """Not supported yet (torch's sequence-parallel LayerNorm/Dropout style)."""

    def __init__(self, *args, **kwargs):
        raise NotImplementedError("SequenceParallel is not supported by TensorBrain yet; keep "
                                  "norms and dropout replicated (the default)")


def _to_local(x, what, allowed):
    """A DTensor input in an accepted layout becomes its local tensor; plain Tensors pass."""
    if isinstance(x, DTensor):
        def fits(p, a):
            return p == a or (isinstance(p, Shard) and isinstance(a, Shard) and a.dim == -1
                              and p.dim == x.ndim - 1)
        if len(x.placements) != 1 or not any(fits(x.placements[0], a) for a in allowed):
            raise ValueError(f"{what}: got a DTensor input placed {x.placements}; expected one "
                             f"of {allowed}")
        return x.to_local()
    return x
