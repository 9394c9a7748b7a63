"""DDP's bucket layout: which parameters share a bucket, the flat arrays that hold them (one
arena per run of buckets of one dtype and device), and ``GradBucket``, what a communication hook
receives; and putting a bucket's reduction on the TB_TIMELINE timeline. The reducer
(``_reducer.py``, ``_resident.py``) fills and reduces them.
"""
from __future__ import annotations

import sys
import time

import numpy as np

from ... import _xp
from ...tensor import Tensor

__all__ = ["GradBucket", "compute_bucket_assignment_by_size"]


def _device_key(array):
    return ("cuda", array.device.id) if _xp.is_cupy_array(array) else ("cpu", None)


def compute_bucket_assignment_by_size(params, order, size_limits):
    """Group parameter indices into buckets.

    ``order`` lists parameter indices in the order their gradients are expected (reverse
    registration order at first, arrival order after the rebuild). Parameters are grouped by
    (dtype, device); a bucket closes once it holds ``size_limits[k]`` bytes or more (the k-th
    bucket of its group; the last limit repeats). Buckets come back sorted by the position of
    their first parameter in ``order``, so bucket 0 is the one that fills first.

    >>> import tensorbrain as tb
    >>> ps = [tb.zeros(256), tb.zeros(256), tb.zeros(300)]   # 1 KiB, 1 KiB, 1.2 KiB
    >>> compute_bucket_assignment_by_size(ps, [2, 1, 0], [1024, 2048])
    [[2], [1, 0]]
    """
    closed, open_ = [], {}
    for i in order:
        a = params[i]._data
        key = (a.dtype.str, _device_key(a))
        cur = open_.get(key)
        if cur is None:
            cur = open_[key] = [[], 0, 0]   # indices, bytes, how many buckets this key closed
        cur[0].append(i)
        cur[1] += a.nbytes
        if cur[1] >= size_limits[min(cur[2], len(size_limits) - 1)]:
            closed.append(cur[0])
            open_[key] = [[], 0, cur[2] + 1]
    closed.extend(c[0] for c in open_.values() if c[0])
    pos = {i: k for k, i in enumerate(order)}
    closed.sort(key=lambda b: pos[b[0]])
    return closed


def _zeros_like_param(a, n):
    """A zeroed flat array of ``n`` elements of ``a``'s dtype, on ``a``'s device."""
    xp = _xp.get_array_module(a)
    if xp is np:
        return np.zeros(n, dtype=a.dtype)
    with xp.cuda.Device(a.device.id):
        return xp.zeros(n, dtype=a.dtype)


class _Arena:
    """One flat array holding, back to back in bucket order, every bucket of one (dtype,
    device): when no bucket overlaps backward, ``_finalize`` reduces the whole arena in one
    all_reduce instead of one per bucket (one call, one first synchronisation, full chunks)."""
    __slots__ = ("buffer", "first", "last")

    def __init__(self, flat, first, last):
        self.buffer, self.first, self.last = Tensor._wrap(flat), first, last


def _arenas(assignment, params, flat_of_one=None):
    """(per bucket: its flat slice, the arenas) for ``assignment`` (bucket -> param indices).
    A (dtype, device) whose buckets are not consecutive in bucket order gets one arena per run
    of consecutive buckets, so that an arena's all_reduce covers buckets in launch order.
    ``flat_of_one``: the array to use when there is a single arena (the resident one)."""
    runs: list[list] = []   # [key, [bucket indices]]
    for k, idx in enumerate(assignment):
        a = params[idx[0]]._data
        key = (a.dtype.str, _device_key(a))
        if runs and runs[-1][0] == key:
            runs[-1][1].append(k)
        else:
            runs.append([key, [k]])
    flats, arenas = [None] * len(assignment), []
    for _, ks in runs:
        sizes = [sum(int(params[i]._data.size) for i in assignment[k]) for k in ks]
        flat = (flat_of_one if flat_of_one is not None and len(runs) == 1
                else _zeros_like_param(params[assignment[ks[0]][0]]._data, sum(sizes)))
        off = 0
        for k, n in zip(ks, sizes):
            flats[k] = flat[off:off + n]
            off += n
        arenas.append(_Arena(flat, ks[0], ks[-1]))
    return flats, arenas


class _Bucket:
    __slots__ = ("index", "indices", "params", "buffer", "views", "view_tensors", "pending",
                 "nbytes", "offsets")

    def __init__(self, index, indices, params, flat):
        sizes = [params[i]._data.size for i in indices]
        self.index = index
        self.indices = list(indices)
        self.params = [params[i] for i in indices]
        self.buffer = Tensor._wrap(flat)
        self.views, self.offsets, off = [], [], 0
        for i, n in zip(indices, sizes):
            self.views.append(flat[off:off + n].reshape(params[i]._data.shape))
            self.offsets.append(off)
            off += n
        self.view_tensors = [Tensor._wrap(v) for v in self.views]
        self.pending = len(indices)
        self.nbytes = flat.nbytes


class GradBucket:
    """What a communication hook receives (``torch.distributed.GradBucket``).

    ``buffer()`` is the flat gradient tensor (not yet divided by the world size when a hook is
    registered); ``gradients()`` are per-parameter views into it; ``parameters()`` the matching
    parameters; ``index()`` the bucket's position (0 reduces first); ``is_last()`` true for the
    bucket reduced last.
    """

    __slots__ = ("_bucket", "_params", "_last")

    def __init__(self, bucket, params, is_last):
        self._bucket, self._params, self._last = bucket, params, is_last

    def index(self) -> int:
        """The bucket's position (0 is reduced first)."""
        return self._bucket.index

    def buffer(self) -> Tensor:
        """The flat tensor of the bucket's gradients (what a comm hook reduces)."""
        return self._bucket.buffer

    def gradients(self) -> list:
        """The per-parameter gradients, as views into ``buffer()``."""
        return list(self._bucket.view_tensors)

    def parameters(self) -> list:
        """The parameters whose gradients the bucket holds, in ``gradients()``' order."""
        return [self._params[i] for i in self._bucket.indices]

    def is_last(self) -> bool:
        """Whether this is the bucket reduced last in the step."""
        return self._last

    def set_buffer(self, tensor) -> None:
        """Replace the bucket's contents (copied into the existing buffer)."""
        self._bucket.buffer._data[...] = tensor._data if isinstance(tensor, Tensor) else tensor

    def __repr__(self):
        return (f"GradBucket(index={self.index()}, numel={self._bucket.buffer._data.size}, "
                f"dtype={self._bucket.buffer.dtype}, params={len(self._bucket.indices)})")


def _timeline():
    """TB_TIMELINE's recorder when one is running (tensorbrain/distributed/_observe.py), else None."""
    observe = sys.modules.get("tensorbrain.distributed._observe")
    return None if observe is None or observe.timeline() is None else observe


def _trace_bucket(observe, bucket, start, work=None):
    """Put the bucket's reduction (start to completion) on the timeline. A comm hook's Future
    completes when ``_finalize`` waits for it: it gets a ``_tb_trace`` callable run then."""
    def done(_w=None):
        observe.bucket_event(bucket.index, bucket.nbytes, len(bucket.indices), start, time.time())
    if work is None:
        done()
    elif hasattr(work, "_on_done"):
        work._on_done(done)
    else:
        return done
    return None
