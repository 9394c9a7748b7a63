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
from .placement_types import Partial, Shard, _StridedShard


def _order(placements) -> list:
    """Mesh dimensions in the order their shards are cut: plain ``Shard``s in mesh order, then
    ``_StridedShard``s (which cut what the later mesh dimensions left)."""
    plain = [i for i, p in enumerate(placements) if isinstance(p, Shard)
             and not isinstance(p, _StridedShard)]
    return plain + [i for i, p in enumerate(placements) if isinstance(p, _StridedShard)]


def local_shape(global_shape, mesh, placements, coord=None) -> tuple:
    """The shape of this rank's (or ``coord``'s) shard under ``placements``."""
    shape = list(global_shape)
    coord = mesh.get_coordinate() if coord is None else coord
    for i in _order(placements):
        p = placements[i]
        start, stop = Shard.local_range(shape[p.dim], mesh.size(i), coord[i])
        shape[p.dim] = stop - start
    return tuple(shape)


def local_offset(global_shape, mesh, placements, coord=None) -> tuple:
    """The global index of this rank's shard's first element, per tensor dimension (a shard
    of shards is one contiguous block, whatever the order)."""
    shape, offset = list(global_shape), [0] * len(global_shape)
    coord = mesh.get_coordinate() if coord is None else coord
    for i in _order(placements):
        p = placements[i]
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


def reduce_scatter_dim(arr, dim: int, group, n: int, index: int):
    """Sum ``arr`` over the ranks and keep chunk ``index`` of ``n`` along ``dim`` (torch.chunk
    rule): one ``reduce_scatter_tensor`` on the dimension moved first and padded to ``n`` equal
    chunks (trimmed back afterwards), the counterpart of :func:`all_gather_dim`."""
    if n == 1:
        return arr
    xp = _xp.get_array_module(arr)
    full = arr.shape[dim]
    c = Shard.chunk_size(full, n)
    start, stop = Shard.local_range(full, n, index)
    moved = xp.moveaxis(arr, dim, 0)
    rest = moved.shape[1:]
    if c == 0:
        return xp.ascontiguousarray(xp.moveaxis(moved[:0], 0, dim))
    buf = xp.zeros((n * c,) + rest, dtype=arr.dtype)
    buf[:full] = moved
    out = xp.empty((c,) + rest, dtype=arr.dtype)
    c10d.reduce_scatter_tensor(_wrap(out), _wrap(buf), group=group)
    return xp.ascontiguousarray(xp.moveaxis(out[:stop - start], 0, dim))


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
    if any(isinstance(p, _StridedShard) for p in src + dst):
        return _via_full(arr, mesh, src, dst, global_shape)
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


def _via_full(arr, mesh, src, dst, global_shape):
    """Any layout change by way of the whole tensor: reduce partials, all-gather every shard
    block along each sharded mesh dimension in turn and paste the blocks at their offsets, then
    cut this rank's block under ``dst``. Used for ``_StridedShard`` layouts (FSDP over tensor
    parallel), where the per-dimension gathers of ``redistribute_array`` do not apply."""
    xp = _xp.get_array_module(arr)
    coord = tuple(mesh.get_coordinate())
    for i, p in enumerate(src):
        if isinstance(p, Partial):
            arr = arr.copy()
            c10d.all_reduce(_wrap(arr), op=p.reduce_op, group=mesh.get_group(i))
    pieces = {coord: xp.ascontiguousarray(arr)}
    for i, p in enumerate(src):
        if not isinstance(p, Shard) or mesh.size(i) == 1:
            continue
        n = mesh.size(i)

        held = sorted(pieces)

        def keys_for(j, i=i, held=held):   # the blocks rank j along mesh dim i holds
            return [tuple(j if d == i else k[d] for d in range(len(k))) for k in held]

        def numel(k):
            size = 1
            for s in local_shape(global_shape, mesh, src, k):
                size *= s
            return size
        width = max(sum(numel(k) for k in keys_for(j)) for j in range(n))
        buf = xp.zeros(width, dtype=arr.dtype)
        at = 0
        for k in held:
            flat = pieces[k].reshape(-1)
            buf[at:at + flat.size] = flat
            at += flat.size
        out = xp.empty(n * width, dtype=arr.dtype)
        c10d.all_gather_into_tensor(_wrap(out), _wrap(buf), group=mesh.get_group(i))
        pieces = {}
        for j in range(n):
            at = j * width
            for k in keys_for(j):
                shape = local_shape(global_shape, mesh, src, k)
                size = numel(k)
                pieces[k] = out[at:at + size].reshape(shape)
                at += size
    full = xp.empty(tuple(global_shape), dtype=arr.dtype)
    for k, block in pieces.items():
        off = local_offset(global_shape, mesh, src, k)
        full[tuple(slice(o, o + s) for o, s in zip(off, block.shape, strict=True))] = block
    off = local_offset(global_shape, mesh, dst, list(coord))
    shape = local_shape(global_shape, mesh, dst, list(coord))
    out = xp.ascontiguousarray(full[tuple(slice(o, o + s) for o, s in zip(off, shape,
                                                                           strict=True))])
    for i, p in enumerate(dst):
        if isinstance(p, Partial) and p.reduce_op == "sum" and coord[i] != 0:
            out = xp.zeros_like(out)
    return out
