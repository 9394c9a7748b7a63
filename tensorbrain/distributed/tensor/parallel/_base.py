"""What every tensor-parallel style shares: the ``ParallelStyle`` base class, the communication
operators (raw autograd nodes, Megatron-LM's ``f``/``g`` and their sequence-parallel twins) and
the small helpers that shard a module's parameters and read input layouts.

Gradient convention: a tensor that is replicated over the tensor-parallel group carries the
*whole* gradient on every rank. Operators whose forward hands every rank the same tensor that
each rank then uses for a different slice of the work (``copy_to_region``,
``gather_from_sequence``) therefore sum the ranks' partial gradients in backward; every other
layout change is undone by its plain inverse (a slice undoes a gather and back).
"""
from __future__ import annotations

from ... import distributed_c10d as c10d
from .._api import DTensor
from .._redistribute import all_gather_dim, reduce_scatter_dim, take_chunk
from ..placement_types import Placement, Replicate, Shard

__all__ = ["ParallelStyle", "copy_to_region", "gather_from_sequence", "gather_last",
           "reduce_from_region", "reduce_scatter_to_sequence", "split_last"]


class ParallelStyle:
    """Base class: a recipe that shards one module over a 1-D mesh."""

    src_data_rank = 0

    def _apply(self, module, device_mesh):
        raise NotImplementedError


# ***** communication operators *****
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

    Returns:
        A tensor with ``x``'s data.
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

    Returns:
        The sum over the group.
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

    Returns:
        The whole tensor.
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

    Returns:
        This rank's chunk.
    """
    from ...._ops.core import make
    full = x._data.shape[-1]
    return make(take_chunk(x._data, x._data.ndim - 1, n, index), (x,),
                lambda g: (all_gather_dim(g, g.ndim - 1, full, group, n),), "TPSplitBackward")


def gather_from_sequence(x, dim, full, group, n, index):
    """All-gather the chunks of dimension ``dim`` forward; reduce-scatter the gradient backward
    (Megatron's sequence-parallel ``g``: each rank's gradient of the gathered tensor is a
    partial sum, and each rank keeps the summed gradient of its own chunk).

    Args:
        x: this rank's chunk.
        dim: the gathered dimension (non-negative).
        full: that dimension's gathered size.
        group: the tensor-parallel process group.
        n: the group's size.
        index: this rank's index in it.

    Returns:
        The whole tensor.
    """
    from ...._ops.core import make
    return make(all_gather_dim(x._data, dim, full, group, n), (x,),
                lambda g: (reduce_scatter_dim(g, dim, group, n, index),),
                "TPGatherFromSequenceBackward")


def reduce_scatter_to_sequence(x, dim, group, n, index):
    """Sum over the ranks and keep this rank's chunk of dimension ``dim`` forward (one
    reduce-scatter); all-gather the gradient backward (Megatron's sequence-parallel ``g-bar``).

    Args:
        x: this rank's partial result (the whole dimension ``dim``).
        dim: the scattered dimension (non-negative).
        group: the tensor-parallel process group.
        n: the group's size.
        index: this rank's index in it.

    Returns:
        This rank's chunk of the sum.
    """
    from ...._ops.core import make
    full = x._data.shape[dim]
    return make(reduce_scatter_dim(x._data, dim, group, n, index), (x,),
                lambda g: (all_gather_dim(g, dim, full, group, n),),
                "TPReduceScatterToSequenceBackward")


# ***** helpers *****
def kind_of(module) -> str:
    """``"linear"`` or ``"embedding"``; anything else raises NotImplementedError."""
    from ....nn import Embedding, Linear
    if isinstance(module, Linear):
        return "linear"
    if isinstance(module, Embedding):
        return "embedding"
    raise NotImplementedError(f"tensor parallel: {type(module).__name__} is not supported; "
                              f"ColwiseParallel/RowwiseParallel handle nn.Linear and nn.Embedding "
                              f"(SequenceParallel takes norms, dropout and other modules that "
                              f"work on each position alone)")


def distribute_param(module, name, mesh, placement, src_data_rank):
    """Replace ``module.<name>`` by a DTensor parameter placed ``placement`` on ``mesh``."""
    from .._factories import distribute_tensor
    p = module._parameters.get(name)
    if p is None:
        return
    if isinstance(p, DTensor):
        raise ValueError(f"tensor parallel: this {type(module).__name__}'s {name} is already a "
                         f"DTensor {p.placements}; a module takes one parallel style (check "
                         f"that the plan's patterns do not match it twice)")
    dt = distribute_tensor(p.detach(), mesh, [placement], src_data_rank=src_data_rank)
    setattr(module, name, DTensor._as_parameter(dt, requires_grad=p.requires_grad))


def one_layout(value, default, what):
    """A single Placement from ``value`` (a Placement or a one-element tuple), or ``default``."""
    value = default if value is None else value
    if isinstance(value, (tuple, list)):
        if len(value) != 1:
            raise NotImplementedError(f"{what}: one layout per module input/output is supported, "
                                      f"got {tuple(value)}")
        value = value[0]
    if not isinstance(value, Placement):
        raise TypeError(f"{what}: expected a placement (Shard(d), Replicate()), got {value!r}")
    if value.is_partial():
        raise NotImplementedError(f"{what}: {value} is not supported; use Shard(d) or "
                                  f"Replicate()")
    return value


def local_input(x, layout, mesh, what):
    """``(local tensor, its placement, the global shape or None)`` of a module input: a DTensor
    gives its own placement and shape (as in torch, its placement wins over ``layout``); a plain
    Tensor is taken as this rank's piece under ``layout``."""
    from ....tensor import Tensor
    if isinstance(x, DTensor):
        if len(x.placements) != 1:
            raise ValueError(f"{what}: got a DTensor input on a {len(x.placements)}-D mesh "
                             f"{x.placements}; tensor parallel takes 1-D mesh inputs")
        if x.placements[0].is_partial():
            x = x.redistribute(placements=[Replicate()])
        return x.to_local(), x.placements[0], tuple(x.shape)
    if not isinstance(x, Tensor):
        raise TypeError(f"{what}: expected a Tensor or DTensor input, got {type(x).__name__}")
    if isinstance(layout, Shard):
        layout = Shard(layout.dim % max(x.ndim, 1))
    return x, layout, None


def gathered_size(local, placement, gshape, n):
    """The global size of a sharded dimension: from the DTensor's shape when known, else, as
    torch's ``DTensor.from_local``, local size x mesh size (equal shards)."""
    d = placement.dim
    return gshape[d] if gshape is not None else local.shape[d] * n
