"""Making DTensors: ``distribute_tensor`` and the factories (``zeros``, ``ones``, ``empty``,
``full``), as torch.distributed.tensor's; and the global norm of sharded gradients, which
``nn.utils.clip_grad_norm_`` reaches through the hook this module registers when it is imported
(``tensorbrain.distributed.tensor`` imports it)."""
from __future__ import annotations

from ... import _xp
from ...tensor import Tensor
from ...nn.utils import clip_grad as _clip_grad
from . import _redistribute as R
from ._api import DTensor
from ._dtensor_spec import DTensorSpec, _check_mesh, _placements
from .placement_types import Replicate

__all__ = ["distribute_tensor", "empty", "full", "ones", "zeros"]


def distribute_tensor(tensor, device_mesh=None, placements=None, *, src_data_rank=0) -> DTensor:
    """Split a full tensor over ``device_mesh`` by ``placements``.

    Args:
        tensor: the full tensor (same shape and dtype on every rank).
        device_mesh: the mesh.
        placements: one per mesh dimension (None: all Replicate). Shards follow torch.chunk.
        src_data_rank: the rank, along every mesh dimension, whose values are used (broadcast to
            the others first, as in torch: 0 is the mesh's first rank); None uses each rank's
            own ``tensor`` without communication.

    Returns:
        A leaf DTensor with ``tensor.requires_grad``.

    Raises:
        TypeError, ValueError: not a Tensor, not a DeviceMesh, bad placements.
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"distribute_tensor: expected a Tensor, got {type(tensor).__name__}")
    if isinstance(tensor, DTensor):
        raise ValueError("distribute_tensor: the tensor is already a DTensor; use redistribute")
    mesh = _check_mesh(device_mesh, "distribute_tensor")
    pl = _placements(mesh, placements, tensor.ndim, "distribute_tensor")
    return DTensor._from_full(tensor, mesh, pl, src_data_rank)


def _factory(name: str):
    def build(*size, device_mesh=None, placements=None, dtype=None, requires_grad=False):
        import importlib
        make_local = getattr(importlib.import_module("tensorbrain.tensor"), name)
        shape = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
        mesh = _check_mesh(device_mesh, name)
        pl = _placements(mesh, placements, len(shape), name)
        local = make_local(*R.local_shape(shape, mesh, pl), dtype=dtype, device=mesh.device_type)
        return DTensor._make(local._data, DTensorSpec(mesh, pl, shape),
                             requires_grad=requires_grad)
    build.__name__ = name
    build.__doc__ = (f"A DTensor of global shape ``size`` whose shards are tb.{name}'s "
                     f"(torch.distributed.tensor.{name}).")
    return build


zeros, ones, empty = _factory("zeros"), _factory("ones"), _factory("empty")


def full(size, fill_value, *, device_mesh=None, placements=None, dtype=None,
         requires_grad=False) -> DTensor:
    """A DTensor of global shape ``size`` filled with ``fill_value``."""
    out = zeros(tuple(size), device_mesh=device_mesh, placements=placements, dtype=dtype,
                requires_grad=requires_grad)
    out._data[...] = fill_value
    return out


def _total_norm(tensors, norm_type: float = 2.0):
    """The ``norm_type`` norm of all ``tensors`` together, each counted once globally.

    An item is a Tensor, a DTensor, or a pair ``(tensor, parts)`` where ``parts`` lists
    ``(start, stop, groups)`` slices of the flattened local array, each slice being one shard
    of a tensor split over the ranks of ``groups`` (what FSDP marks its flat and original
    parameters with, ``_grad_norm_parts``). A DTensor's local p-sum (or max) is reduced over the
    mesh dimensions it is sharded on (``Replicate`` dimensions hold copies and are not summed; a
    ``Partial`` tensor is reduced to its full value first); a plain Tensor counts as replicated.
    Collective: every rank of the groups must call it with the same layouts in the same order.
    Returns a Python float."""
    import math

    import numpy as np

    from .. import distributed_c10d as c10d
    p = float(norm_type)
    inf = p == math.inf
    groups: dict = {}   # ids of the groups to reduce over -> (groups, running value)

    def add(groups_, a):
        part = (float(a.max()) if a.size else 0.0) if inf else float((a ** p).sum())
        key = tuple(id(g) for g in groups_)
        gs, acc = groups.get(key, (groups_, 0.0))
        groups[key] = (gs, max(acc, part) if inf else acc + part)

    for t in tensors:
        parts = None
        if isinstance(t, tuple):
            t, parts = t
        if isinstance(t, DTensor) and any(pl.is_partial() for pl in t.placements):
            t = t.redistribute(placements=[Replicate() if pl.is_partial() else pl
                                           for pl in t.placements])
        a = np.abs(_xp.to_numpy(t.data).astype(np.float64))
        if parts is not None:
            flat = a.reshape(-1)
            for lo, hi, gs in parts:
                add(tuple(gs), flat[lo:hi])
        elif isinstance(t, DTensor):
            mesh = t.device_mesh
            add(tuple(mesh.get_group(i) for i, pl in enumerate(t.placements) if pl.is_shard()
                      and mesh.size(i) > 1), a)
        else:
            add((), a)
    total = 0.0
    for gs, acc in groups.values():
        buf = Tensor._wrap(np.array([acc]))
        for g in gs:
            c10d.all_reduce(buf, op="max" if inf else "sum", group=g)
        total = max(total, float(buf.data[0])) if inf else total + float(buf.data[0])
    return total if inf else total ** (1.0 / p)


# clip_grad_norm_ (in nn, a lower layer that never imports distributed) computes sharded norms
# through this hook.
_clip_grad._register_sharded_total_norm(_total_norm)
