"""Array-level layout changes between placements, on the mesh's process groups.

Every function here takes and returns raw arrays (NumPy or CuPy): the DTensor class wraps them and
records autograd. A layout change undoes the source placements from the last mesh dimension back
to the first one that differs (all-gather for ``Shard``, all-reduce for ``Partial``), then applies
the target's placements forward (a local slice for ``Shard``, zeros off the first rank for a
``Partial`` sum), so nested shardings of one tensor dimension compose as torch's do.
"""
from __future__ import annotations

from ... import _xp
from .. import distributed_c10d as c10d
from .placement_types import Partial, Shard


def local_shape(global_shape, mesh, placements, coord=None) -> tuple:
    """The shape of this rank's (or ``coord``'s) shard under ``placements``."""
    shape = list(global_shape)
    coord = mesh.get_coordinate() if coord is None else coord
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            start, stop = Shard.local_range(shape[p.dim], mesh.size(i), coord[i])
            shape[p.dim] = stop - start
    return tuple(shape)


def local_offset(global_shape, mesh, placements, coord=None) -> tuple:
    """The global index of this rank's shard's first element, per tensor dimension."""
    shape, offset = list(global_shape), [0] * len(global_shape)
    coord = mesh.get_coordinate() if coord is None else coord
    for i, p in enumerate(placements):
        if isinstance(p, Shard):
            start, stop = Shard.local_range(shape[p.dim], mesh.size(i), coord[i])
            offset[p.dim] += start
            shape[p.dim] = stop - start
    return tuple(offset)


def _wrap(arr):
    from ...tensor import Tensor
    return Tensor._wrap(arr)


def all_gather_dim(arr, dim: int, full_size: int, group, n: int):
    """Concatenate the ranks' chunks of ``arr`` along ``dim`` (chunks padded to equal size for
    the collective, then trimmed back to ``full_size``)."""
    if n == 1:
        return arr
    xp = _xp.get_array_module(arr)
    c = Shard.chunk_size(full_size, n)
    moved = xp.moveaxis(arr, dim, 0)
    rest = moved.shape[1:]
    if c == 0:
        return arr
    buf = xp.zeros((c,) + rest, dtype=arr.dtype)
    buf[:moved.shape[0]] = moved
    out = xp.empty((n * c,) + rest, dtype=arr.dtype)
    c10d.all_gather_into_tensor(_wrap(out), _wrap(buf), group=group)
    return xp.ascontiguousarray(xp.moveaxis(out[:full_size], 0, dim))


def take_chunk(arr, dim: int, n: int, index: int):
    """Chunk ``index`` of ``n`` along ``dim`` (torch.chunk rule), as a contiguous copy."""
    xp = _xp.get_array_module(arr)
    start, stop = Shard.local_range(arr.shape[dim], n, index)
    sl = [slice(None)] * arr.ndim
    sl[dim] = slice(start, stop)
    return xp.ascontiguousarray(arr[tuple(sl)])


def redistribute_array(arr, mesh, src, dst, global_shape):
    """This rank's local array under placements ``dst``, from its local array under ``src``."""
    src, dst = tuple(src), tuple(dst)
    if src == dst:
        return arr
    k = next(i for i in range(len(src)) if src[i] != dst[i])
    coord = mesh.get_coordinate()
    for i in reversed(range(k, len(src))):
        p = src[i]
        if isinstance(p, Shard):
            full = local_shape(global_shape, mesh, src[:i], coord)[p.dim]
            arr = all_gather_dim(arr, p.dim, full, mesh.get_group(i), mesh.size(i))
        elif isinstance(p, Partial):
            arr = arr.copy()
            c10d.all_reduce(_wrap(arr), op=p.reduce_op, group=mesh.get_group(i))
    for i in range(k, len(dst)):
        p = dst[i]
        if isinstance(p, Shard):
            arr = take_chunk(arr, p.dim, mesh.size(i), coord[i])
        elif isinstance(p, Partial) and p.reduce_op == "sum" and coord[i] != 0:
            arr = _xp.get_array_module(arr).zeros_like(arr)
    return arr
