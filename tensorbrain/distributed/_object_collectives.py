"""Collectives on Python objects (plain data through the safe codec ``_codec``, never pickle):
broadcast_object_list, all_gather_object, gather_object, scatter_object_list.
"""
from __future__ import annotations

import numpy as np

from . import _codec
from ._groups import _pg, _root


def _u8(n: int):
    from ..tensor import Tensor
    return Tensor._wrap(np.zeros(n, dtype=np.uint8))


def _wrap(arr):
    from ..tensor import Tensor
    return Tensor._wrap(arr)


class _ObjBuffers:
    """Where an object collective's byte buffers live. NCCL moves device memory only, so for an
    NCCL group the buffers go to the group's GPU and come back to the host after the call (as
    torch stages objects on ``torch.cuda.current_device()``); every other backend works on the
    host arrays directly."""

    def __init__(self, pg):
        self.device = getattr(pg.backend, "device", None) if pg.backend_name == "nccl" else None

    def put(self, arr):
        if self.device is None or arr is None:
            return arr
        from .. import _xp
        with self.device:
            return _xp.cupy().asarray(arr)

    def get(self, arr):
        if self.device is None:
            return arr
        from .. import _xp
        return _xp.to_numpy(arr)


def broadcast_object_list(object_list, src=None, group=None, device=None, group_src=None):
    """Broadcast ``src``'s picklable-in-torch objects (here: data only, see ``_codec``) into
    every rank's ``object_list``, in place.

    Args:
        object_list: the objects on ``src``; replaced in place by them on the other ranks.
        src: the global rank that sends.
        group: the process group; None for the default group.
        device: accepted for torch compatibility.
        group_src: the sender as a rank within ``group`` (instead of ``src``).

    Raises:
        TypeError: an object is not plain data the codec can encode.
    """
    pg = _pg(group, "broadcast_object_list")
    if pg is None:
        return
    root = _root(pg, src, group_src, "src")
    if pg.rank() == root:
        blobs = [_codec.encode(o) for o in object_list]
        sizes = np.array([len(b) for b in blobs], dtype=np.int64)
    else:
        sizes = np.zeros(len(object_list), dtype=np.int64)
    buf = _ObjBuffers(pg)
    sizes_d = buf.put(sizes)
    pg.backend.broadcast(sizes_d, root, async_op=False)
    sizes = buf.get(sizes_d)
    payload = (np.frombuffer(b"".join(blobs), dtype=np.uint8).copy() if pg.rank() == root
               else np.empty(int(sizes.sum()), dtype=np.uint8))
    payload_d = buf.put(payload)
    pg.backend.broadcast(payload_d, root, async_op=False)
    payload = buf.get(payload_d)
    if pg.rank() != root:
        off = 0
        for i, n in enumerate(sizes.tolist()):
            object_list[i] = _codec.decode(payload[off:off + n].tobytes())
            off += n


def _gather_sizes(pg, n: int) -> list:
    buf = _ObjBuffers(pg)
    mine = buf.put(np.array([n], dtype=np.int64))
    allsz = buf.put(np.zeros(pg.size(), dtype=np.int64))
    pg.backend.allgather_into(allsz, mine, async_op=False)
    return buf.get(allsz).tolist()


def all_gather_object(object_list, obj, group=None):
    """``object_list[j]`` = rank j's ``obj`` (data only; TypeError for other objects).

    Args:
        object_list: a list of world_size entries, filled in rank order.
        obj: this rank's object (plain data).
        group: the process group; None for the default group.

    Raises:
        ValueError: ``object_list`` does not have world_size entries.
        TypeError: ``obj`` is not plain data the codec can encode.
    """
    pg = _pg(group, "all_gather_object")
    if pg is None:
        return
    if len(object_list) != pg.size():
        raise ValueError(f"all_gather_object: object_list must have world_size={pg.size()} "
                         f"entries, got {len(object_list)}")
    blob = _codec.encode(obj)
    sizes = _gather_sizes(pg, len(blob))
    width = max(sizes)
    mine = np.zeros(width, dtype=np.uint8)
    mine[:len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    buf = _ObjBuffers(pg)
    out = buf.put(np.empty(width * pg.size(), dtype=np.uint8))
    pg.backend.allgather_into(out, buf.put(mine), async_op=False)
    out = buf.get(out)
    for j, n in enumerate(sizes):
        object_list[j] = _codec.decode(out[j * width:j * width + n].tobytes())


def gather_object(obj, object_gather_list=None, dst=None, group=None, group_dst=None):
    """On ``dst``, ``object_gather_list[j]`` = rank j's ``obj``.

    Args:
        obj: this rank's object (plain data).
        object_gather_list: on ``dst``, a list of world_size entries filled in rank order; None
            elsewhere.
        dst: the global rank that receives.
        group: the process group; None for the default group.
        group_dst: the destination as a rank within ``group`` (instead of ``dst``).

    Raises:
        ValueError: ``object_gather_list`` on ``dst`` does not have world_size entries.
    """
    pg = _pg(group, "gather_object")
    if pg is None:
        return
    root = _root(pg, dst, group_dst, "dst")
    if pg.rank() == root and (object_gather_list is None or
                              len(object_gather_list) != pg.size()):
        raise ValueError(f"gather_object: object_gather_list on the destination must have "
                         f"world_size={pg.size()} entries")
    blob = _codec.encode(obj)
    sizes = _gather_sizes(pg, len(blob))
    width = max(sizes)
    mine = np.zeros(width, dtype=np.uint8)
    mine[:len(blob)] = np.frombuffer(blob, dtype=np.uint8)
    buf = _ObjBuffers(pg)
    outs = [buf.put(np.empty(width, dtype=np.uint8)) for _ in range(pg.size())] \
        if pg.rank() == root else None
    pg.backend.gather(outs, buf.put(mine), root, async_op=False)
    outs = [buf.get(o) for o in outs] if outs is not None else None
    if outs is not None:  # the destination
        for j, n in enumerate(sizes):
            object_gather_list[j] = _codec.decode(outs[j][:n].tobytes())


def scatter_object_list(scatter_object_output_list, scatter_object_input_list=None, src=None,
                        group=None, group_src=None):
    """``scatter_object_output_list[0]`` = ``src``'s ``scatter_object_input_list[rank]``.

    Args:
        scatter_object_output_list: a non-empty list; entry 0 receives this rank's object.
        scatter_object_input_list: on ``src``, world_size objects; None elsewhere.
        src: the global rank that sends.
        group: the process group; None for the default group.
        group_src: the sender as a rank within ``group`` (instead of ``src``).

    Raises:
        ValueError: the output list is empty, or the input list on ``src`` does not have
            world_size entries.
    """
    pg = _pg(group, "scatter_object_list")
    if pg is None:
        return
    root = _root(pg, src, group_src, "src")
    if not isinstance(scatter_object_output_list, list) or not scatter_object_output_list:
        raise ValueError("scatter_object_list: scatter_object_output_list must be a non-empty "
                         "list (element 0 receives the object)")
    if pg.rank() == root:
        if scatter_object_input_list is None or len(scatter_object_input_list) != pg.size():
            raise ValueError(f"scatter_object_list: the source needs world_size={pg.size()} "
                             f"input objects")
        blobs = [_codec.encode(o) for o in scatter_object_input_list]
        sizes = np.array([len(b) for b in blobs], dtype=np.int64)
    else:
        sizes = np.zeros(pg.size(), dtype=np.int64)
    buf = _ObjBuffers(pg)
    sizes_d = buf.put(sizes)
    pg.backend.broadcast(sizes_d, root, async_op=False)
    sizes = buf.get(sizes_d)
    width = int(sizes.max())
    ins = None
    if pg.rank() == root:
        ins = []
        for b in blobs:
            a = np.zeros(width, dtype=np.uint8)
            a[:len(b)] = np.frombuffer(b, dtype=np.uint8)
            ins.append(a)
    out = buf.put(np.empty(width, dtype=np.uint8))
    pg.backend.scatter(out, [buf.put(a) for a in ins] if ins is not None else None, root,
                       async_op=False)
    out = buf.get(out)
    scatter_object_output_list[0] = _codec.decode(out[:int(sizes[pg.rank()])].tobytes())
