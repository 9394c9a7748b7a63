"""The reducer's shared-memory job: the gradient arena resident in shared memory, the average
lent to ``.grad`` in place, and the fused end-of-backward reduction (docs/ddp.md, "Towards 0.97
of the ceiling"; the protocol: ``tensorbrain/distributed/_shm/arena.py``).

A mixin of :class:`tensorbrain.nn.parallel._reducer.Reducer`, split from it by job. It reads and
sets the reducer's bucket state: ``params``, ``buckets``, ``_arenas``, ``_loc``, ``_ready``,
``_next``, ``_ends`` and ``_build()``; its options ``as_view``, ``resident``, ``fuse``,
``inline_last``, ``overlap``, ``comm_hook``, ``world_size``, ``group``; and owns ``_resident``,
``_at``, ``_lent``, ``_sets`` and ``_lending`` (set to their empty values by the reducer's
``__init__``).
"""
from __future__ import annotations

import ctypes
import sys
import time

import numpy as np

from ._buckets import _arenas, _Bucket, _timeline, _trace_bucket


def _refs(arrays, i) -> int:
    """``sys.getrefcount`` of ``arrays[i]`` read through one local name."""
    a = arrays[i]
    return sys.getrefcount(a)


#: what :func:`_refs` reads for an array nothing else refers to (measured: the count differs
#: between Python versions)
_UNHELD = _refs([np.empty(1)], 0)


def _data_only_in(t) -> bool:
    """Nothing but tensor ``t`` refers to its array, which owns its memory (so no view of it
    hides behind another base)."""
    a = t._data
    return type(a) is np.ndarray and a.base is None and sys.getrefcount(a) == _UNHELD


class ResidentArenaMixin:
    """Makes and runs the resident arena (see the module docstring for what it needs)."""

    def _make_resident(self, order):
        """Collective, after the rebuild: move the gradient arena into shared memory where
        every rank can (``ResidentArena``: the fused all_reduce then needs no copy in or out,
        and the first rank done with backward reduces what the others have published)."""
        from ...distributed._groups import _pg
        make = getattr(_pg(self.group, "DistributedDataParallel"), "backend", None)
        make = getattr(make, "resident_arena", None)
        if make is None or self.world_size == 1:
            return
        a = self._arenas[0].buffer._data if len(self._arenas) == 1 else None
        want = (self.resident and self.fuse and self.inline_last and not self.overlap
                and self.comm_hook is None and type(a) is np.ndarray)
        arena = make(a.dtype if a is not None else np.float32, a.size if a is not None else 0,
                     bool(want), region=not self.as_view)
        if arena is not None:
            self._resident = arena
            self._build(order, arena.array)
            self._at = [0] * len(self.params)
            for b in self.buckets:
                for k, i in enumerate(b.indices):
                    self._at[i] = self._ends[b.index] - b.buffer._data.size + b.offsets[k]
            if arena.region is not None and not self.as_view:
                self._lent = [None] * len(self.params)
                for i, p in enumerate(self.params):
                    # an array whose base is not an array (a ctypes view that keeps the region
                    # alive): NumPy then makes every view of it point at it, so its reference
                    # count says whether anything still holds a gradient lent from here
                    # (_lendable)
                    part = arena.region[self._at[i]:self._at[i] + p._data.size]
                    self._lent[i] = np.ndarray(p._data.shape, part.dtype, (
                        ctypes.c_char * part.nbytes).from_buffer(part))
                # A step that lends reduces in place in the region (the GEMMs and the hooks
                # write the gradients there, as the bucket view writes them into the slot):
                # the same buckets over the region, each parameter's view its lent array.
                flats, arenas = _arenas(self.bucket_indices(), self.params, arena.region)
                region = [_Bucket(k, b.indices, self.params, flats[k])
                          for k, b in enumerate(self.buckets)]
                for b in region:
                    b.views = [self._lent[i] for i in b.indices]
                    b.view_tensors = []   # only the bucket view (as_view) uses them
                self._sets = ((self.buckets, self._arenas), (region, arenas))

    def _lendable(self):
        """Nothing but ``.grad`` itself refers to the region: no earlier gradient lent
        from it is still held (as ``old = p.grad``, ``.numpy()`` or a view), so this backward's
        average may be written there."""
        for i, p in enumerate(self.params):
            g = p.grad
            # held by self._lent and its bucket's views, and maybe by .grad
            if _refs(self._lent, i) > _UNHELD + 1 + (g is not None and g._data is self._lent[i]):
                return False
        return True

    def _reduce_arenas(self):
        """The fused end of backward: one all_reduce (AVG) per arena, in bucket order. Returns
        the parameters whose ``.grad`` the resident arena wrote the average into."""
        written: set = set()
        for arena in self._arenas:
            observe = _timeline()
            t_wall = time.time() if observe is not None else None
            t0 = time.perf_counter() if self.timings is not None else None
            if self._resident is not None:
                # in the shared-memory slots, no copies; the private .grad arrays get the
                # chunks this rank reduces while they are still in cache
                offs, outs = [], []
                for b in self.buckets:
                    for k, i in enumerate(b.indices):
                        g = self.params[i].grad
                        if g is None or (self.as_view and g is b.view_tensors[k]):
                            continue
                        a = g._data
                        if self._lending and (
                                a is self._lent[i]
                                or (a.dtype == b.views[k].dtype and _data_only_in(g))):
                            # .grad is lent the average's place in the region (reduced there in
                            # place, no copy): backward wrote it there (offer_grad_dests) or
                            # accumulated into it, or .grad is an array nothing else refers to
                            # (so nothing could see the copy into it)
                            g._data = self._lent[i]
                            written.add(i)
                            continue
                        if a is b.views[k]:
                            # backward wrote it into the slot (offer_grad_dests): .grad gets an
                            # array of its own, as torch's default (no bucket view) has
                            a = g._data = np.empty_like(a)
                        if (type(a) is np.ndarray and a.dtype == b.views[k].dtype
                                and a.shape == b.views[k].shape and a.flags.c_contiguous
                                and a.flags.writeable):
                            offs.append(self._at[i])
                            outs.append(a)
                            written.add(i)
                self._resident.all_reduce(offsets=offs, outputs=outs)
            else:
                self.dist.all_reduce(arena.buffer, op=self.dist.ReduceOp.AVG, group=self.group)
            if observe is not None:
                for b in self.buckets[arena.first:arena.last + 1]:
                    _trace_bucket(observe, b, t_wall)
            if self.timings is not None:
                self.timings.append([t0, time.perf_counter()])
        return written
