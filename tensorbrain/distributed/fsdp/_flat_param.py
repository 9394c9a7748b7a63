"""One FSDP unit's parameters as one flat, sharded buffer (torch's ``FlatParamHandle``).

Two layouts share the machinery:

* ``"flat"`` (FSDP1): the unit's parameters are concatenated, padded to a multiple of the shard
  group's size and cut into equal contiguous shards; rank r keeps shard r (``flat_param``). The
  all-gather output *is* the unsharded flat buffer, and each parameter is a view of it.
* ``"dim0"`` (FSDP2): each parameter is split along dim 0 by the torch.chunk rule and kept as a
  DTensor ``Shard(0)``; the all-gather input is the concatenation of this rank's (padded) row
  chunks, and the gathered rows are copied out into each parameter's unsharded view.

The unsharded buffer lives in a private anonymous ``mmap`` on the CPU, so that resharding can give
its pages away while autograd still holds views of it -- NumPy's equivalent of torch freeing a
storage under its tensors; the next all-gather writes into the same addresses again before
backward reads them. The pages go to a small cache that moves them into the next unit of the same
size, or back to the OS (``_pages.py`` says why and what it costs). On CUDA the buffer stays
allocated (documented).

Private, not shared: ``MADV_DONTNEED`` on a shared anonymous mapping (Python's ``mmap(-1, n)``
default) only unmaps the pages from this process -- they stay allocated in shmem with their data,
so resident memory drops while nothing is freed (measured: /proc/meminfo's Shmem kept all 256 MiB
of a released buffer). A released buffer is also made read-only (``mprotect``): the kernel then
stops counting it as data (``VmData``, the ``RLIMIT_DATA`` limit), so that limit sees what FSDP
really holds, and the views refuse writes (ValueError: read-only) while they hold no parameters.
"""
from __future__ import annotations

import mmap
import os

import numpy as np

from ... import _xp
from ...tensor import Tensor
from .. import distributed_c10d as c10d
from ._pages import PAGES, alloc, data_limit, populate, protect


class _GradPool:
    """Reuses unsharded gradient buffers across units and steps: a fresh 4 MiB array costs page
    faults on first write (see ``_pages.populate``), a reused one does not. A buffer comes back when
    its reduce-scatter has finished (from the communication thread); at most ``keep`` free
    buffers per (size, dtype) are kept, the rest are dropped."""

    def __init__(self, keep: int = 2):
        self.keep = keep
        self.free: dict[tuple, list] = {}

    def take(self, n: int, dtype, like):
        key = (int(n), np.dtype(dtype).str, _xp.get_array_module(like).__name__)
        free = self.free.get(key)
        if free:
            try:
                return free.pop()   # not zeroed: the handle zeroes what no gradient fills
            except IndexError:
                pass
        return _xp.get_array_module(like).empty(n, dtype=dtype)

    def give(self, buf, like):
        key = (int(buf.size), buf.dtype.str, _xp.get_array_module(like).__name__)
        free = self.free.setdefault(key, [])
        if len(free) < self.keep:
            free.append(buf)


_GRADS = _GradPool()


class ParamEntry:
    """Where one original parameter lives: its module, attribute, name and unsharded view."""

    __slots__ = ("module", "attr", "fqn", "shape", "numel", "offset", "requires_grad", "orig",
                 "view", "rows", "row_numel", "chunk_rows", "shard_offset", "local_rows",
                 "tp_spec")

    def __init__(self, module, attr, fqn, param):
        self.module, self.attr, self.fqn = module, attr, fqn
        self.shape = tuple(param._data.shape)
        self.numel = int(param._data.size)
        self.requires_grad = bool(param.requires_grad)
        self.orig = param     # the registered Parameter (use_orig_params / FSDP2), else None later
        self.view = None      # leaf Tensor over the unsharded buffer
        self.offset = 0       # offset in the unsharded buffer
        self.tp_spec = None   # a tensor-parallel DTensor's spec: shape above is its local shard


class FlatParamHandle:
    """The flat parameter of one unit: shard, all-gather (unshard), free (reshard), and reduce
    gradients back to the shard.

    Args:
        unit_name: the unit's module name, for errors.
        entries: the unit's :class:`ParamEntry` list, in registration order.
        shard_group / replicate_group: process groups (None = size 1).
        layout: ``"flat"`` or ``"dim0"``.
        param_dtype / reduce_dtype: mixed precision dtypes (None: the parameters' dtype).
        offload: keep the shard and its gradient on the CPU.
    """

    tp_specs: dict  # id(entry) -> DTensorSpec of a tensor-parallel parameter (_tp.attach)

    def __init__(self, unit_name, entries, shard_group, replicate_group, layout="flat",
                 param_dtype=None, reduce_dtype=None, offload=False, mesh=None):
        self.unit_name, self.entries, self.layout = unit_name, list(entries), layout
        self.shard_group, self.replicate_group, self.mesh = shard_group, replicate_group, mesh
        self.W = c10d.get_world_size(shard_group) if shard_group is not None else 1
        self.rank = c10d.get_rank(shard_group) if shard_group is not None else 0
        self.R = c10d.get_world_size(replicate_group) if replicate_group is not None else 1
        first = self.entries[0].orig._data
        dtypes = {str(e.orig._data.dtype) for e in self.entries}
        if len(dtypes) > 1:
            raise ValueError(f"FSDP unit '{unit_name}': its parameters have dtypes "
                             f"{sorted(dtypes)}; one flat parameter needs one dtype (wrap the "
                             f"modules of other dtypes as their own units)")
        grads = {e.requires_grad for e in self.entries}
        if len(grads) > 1 and layout == "flat":
            frozen = [e.fqn for e in self.entries if not e.requires_grad]
            raise ValueError(f"FSDP unit '{unit_name}': parameters {frozen} are frozen but others "
                             f"require grad; one flat parameter needs one requires_grad (wrap "
                             f"the frozen modules as their own units, or use fully_shard)")
        self.dtype = first.dtype
        self.param_dtype = np.dtype(param_dtype) if param_dtype is not None else self.dtype
        self.reduce_dtype = np.dtype(reduce_dtype) if reduce_dtype is not None else \
            self.param_dtype
        self.offload = bool(offload)
        self.requires_grad = any(grads)
        # an empty array on the right device: holding ``first`` would keep a full parameter alive
        self._like = (_xp.get_array_module(first).empty(0, dtype=self.dtype)
                      if not self.offload else np.empty(0, dtype=self.dtype))
        self._layout_sizes()
        self.full, self._mm = alloc(self.padded, self.param_dtype, first)
        self.unsharded = False
        self._released = False       # pages given back: map writable and populate before a fill
        self._writable = False       # the mapping is read-write now (it is created read-only)
        self._work = None            # pending all-gather
        self._gathered = None        # dim0 layout: all-gather output awaiting copy-out
        self.grad_buffer = None      # unsharded gradients of this backward
        self.grads_ready = 0
        self.accum = None            # no_sync(): unsharded gradients kept across backwards
        self._build_shard()
        self._make_views()
        self._release()

    # ***** layout *****
    def _layout_sizes(self):
        W = self.W
        if self.layout == "flat":
            off = 0
            for e in self.entries:
                e.offset = off
                off += e.numel
            self.total = off
            self.padded = -(-off // W) * W if off else 0
            self.shard_numel = self.padded // W
        else:
            off, soff = 0, 0
            for e in self.entries:
                e.offset = off
                off += e.numel
                e.rows = e.shape[0] if e.shape else 1
                e.row_numel = e.numel // e.rows if e.rows else 0
                e.chunk_rows = -(-e.rows // W)
                start = min(self.rank * e.chunk_rows, e.rows)
                e.local_rows = min(start + e.chunk_rows, e.rows) - start
                e.shard_offset = soff
                soff += e.chunk_rows * e.row_numel
            self.total = self.padded = off
            self.shard_numel = soff

    def _build_shard(self):
        """Cut this rank's shard out of the (identical on every rank) full parameters."""
        xp = _xp.get_array_module(self._like)
        shard = xp.zeros(self.shard_numel, dtype=self.dtype)
        for e in self.entries:
            src = _xp.to_numpy(e.orig._data) if self.offload else e.orig._data
            flat = src.reshape(-1)
            if self.layout == "flat":
                lo, hi = self.rank * self.shard_numel, (self.rank + 1) * self.shard_numel
                a, b = max(lo, e.offset), min(hi, e.offset + e.numel)
                if a < b:
                    shard[a - lo:b - lo] = flat[a - e.offset:b - e.offset]
            else:
                start = self.rank * e.chunk_rows * e.row_numel
                n = e.local_rows * e.row_numel
                shard[e.shard_offset:e.shard_offset + n] = flat[start:start + n]
        self.shard = shard

    def local_slice(self, e):
        """``(start, stop)`` of entry ``e``'s part within this rank's shard."""
        if self.layout == "flat":
            lo = self.rank * self.shard_numel
            a = min(max(lo, e.offset), lo + self.shard_numel)
            b = max(min(lo + self.shard_numel, e.offset + e.numel), a)
            return a - lo, b - lo
        return e.shard_offset, e.shard_offset + e.local_rows * e.row_numel

    def _make_views(self):
        for e in self.entries:
            arr = self.full[e.offset:e.offset + e.numel].reshape(e.shape)
            e.view = Tensor._wrap(arr, requires_grad=e.requires_grad)

    # ***** unshard / reshard *****
    def unshard(self, async_op=False):
        """Start (or finish, unless ``async_op``) the all-gather of the full parameters."""
        if self.unsharded:
            return
        if self._work is None:
            xp = _xp.get_array_module(self.full)
            if self._released:
                self._take_back()
            src = self.shard
            if src.dtype != self.param_dtype or _xp.get_array_module(src) is not xp:
                src = xp.asarray(src).astype(self.param_dtype)
            if self.W == 1:
                self._store_gathered(src)
                self.unsharded = True
                return
            out = self.full if self.layout == "flat" else xp.empty(
                self.W * self.shard_numel, dtype=self.param_dtype)
            self._gathered = out
            self._work = c10d.all_gather_into_tensor(Tensor._wrap(out), Tensor._wrap(src),
                                                     group=self.shard_group, async_op=True)
        if not async_op:
            self.wait_unshard()

    def wait_unshard(self):
        if self._work is not None:
            work, self._work = self._work, None
            work.wait()
            if self.layout == "dim0":
                self._store_gathered(self._gathered)
            self._gathered = None
            self.unsharded = True

    def _store_gathered(self, gathered):
        if self.layout == "flat":
            if gathered is not self.full:
                self.full[:self.total] = gathered[:self.total]
            return
        S = self.shard_numel
        for e in self.entries:
            dst = self.full[e.offset:e.offset + e.numel].reshape(e.rows, e.row_numel)
            for r in range(self.W):
                a = min(r * e.chunk_rows, e.rows)
                b = min(a + e.chunk_rows, e.rows)
                if b > a:
                    src = gathered[r * S + e.shard_offset:r * S + e.shard_offset + (b - a) *
                                   e.row_numel]
                    dst[a:b] = src.reshape(b - a, e.row_numel)

    def reshard(self):
        """Free the unsharded buffer (its pages go back to the OS; views stay valid)."""
        if self._work is not None:
            self.wait_unshard()
        if not self.unsharded:
            return
        self.unsharded = False   # the next unshard copies the (maybe updated) shard in again
        if self.W == 1:
            return   # a size-1 shard group keeps the full buffer: freeing would save nothing
        self._release()

    def _release(self):
        """Give the unsharded buffer's pages away -- to the page cache for the next unit of the
        same size, else back to the OS -- and make it read-only: no longer resident, no longer
        counted as data (``RLIMIT_DATA``); the views refuse writes."""
        if self._mm is None:
            return
        nbytes = len(self._mm)
        # only a read-write block may go to the cache: a read-only one moved onto the next
        # unit would make its all-gather fault (SIGSEGV)
        if not (self._writable and PAGES.stash(self.full.ctypes.data, nbytes)):
            self._mm.madvise(mmap.MADV_DONTNEED)
        protect(self.full, nbytes, writable=False)
        self._writable = False
        for e in self.entries:
            e.view._data.flags.writeable = False
        self._released = True

    def _take_back(self):
        """Map a released buffer writable again: cached pages moved in where the page cache has
        a block of this size, else fresh pages (where the kernel enforces ``RLIMIT_DATA``)
        faulted in.

        Raises:
            MemoryError: the data limit leaves no room for this unit's unsharded parameters.
        """
        assert self._mm is not None   # only CPU buffers are released
        nbytes = len(self._mm)
        if not PAGES.restore(self.full.ctypes.data, nbytes):
            err = protect(self.full, nbytes, writable=True)
            if err:
                raise MemoryError(
                    f"cannot map the unsharded parameters ({nbytes / 2**20:.1f} MiB) "
                    f"writable: {os.strerror(err)}{data_limit()}")
            populate(self._mm)
        self._writable = True
        for e in self.entries:
            e.view._data.flags.writeable = True
        self._released = False

    # ***** gradients *****
    def take_grad(self, e):
        """Move ``e.view.grad`` into this backward's unsharded gradient buffer; True once every
        parameter that needs a gradient has delivered one."""
        if self.grad_buffer is None:
            self.grad_buffer = _GRADS.take(self.padded, self.param_dtype, self.full)
            self.grad_buffer[self.total:] = 0
            self.grads_ready = 0
            self._filled = set()
        self.grad_buffer[e.offset:e.offset + e.numel] = e.view.grad._data.reshape(-1)
        e.view.grad = None
        self._filled.add(id(e))
        self.grads_ready += 1
        return self.grads_ready == sum(1 for x in self.entries if x.requires_grad)

    def reduce_grad(self, sync: bool, divide: float):
        """Start reducing this backward's gradient; returns a callable that waits and yields
        this rank's shard of the averaged gradient (None under no_sync)."""
        xp = _xp.get_array_module(self.full)
        g = self.grad_buffer if self.grad_buffer is not None else \
            xp.zeros(self.padded, dtype=self.param_dtype)
        if self.grad_buffer is not None and len(self._filled) < len(self.entries):
            for e in self.entries:    # parameters that got no gradient (unused, frozen)
                if id(e) not in self._filled:
                    g[e.offset:e.offset + e.numel] = 0
        taken, self.grad_buffer = self.grad_buffer, None   # no reference kept: it is pooled
        if self.accum is not None:
            g = g.astype(self.reduce_dtype) + self.accum
        if not sync:
            self.accum = g.astype(self.reduce_dtype, copy=g.dtype != self.reduce_dtype)
            return None
        self.accum = None
        g = g.astype(self.reduce_dtype, copy=False)   # g is this handle's own buffer
        if divide != 1:
            g *= g.dtype.type(1.0 / divide)
        pooled = g if g is taken else None
        g = self._rs_input(g)
        if self.W == 1:
            out, work = g, None
        else:
            out = xp.empty(self.shard_numel, dtype=self.reduce_dtype)
            work = c10d.reduce_scatter_tensor(Tensor._wrap(out), Tensor._wrap(g),
                                              group=self.shard_group, async_op=True)
            if pooled is not None and g is pooled:   # back to the pool once sent
                full = self.full
                work._on_done(lambda w, b=pooled: _GRADS.give(b, full) if w.is_success()
                              else None)
        state = {"work": work, "out": out}

        def finish_shard():
            if state["work"] is not None:
                state["work"].wait()
                state["work"] = None
            return state["out"]
        return finish_shard

    def _rs_input(self, g):
        """Arrange the unsharded gradient as the reduce-scatter input (dim0: rank-major)."""
        if self.layout == "flat" or self.W == 1 and self.shard_numel == self.padded:
            return g
        xp = _xp.get_array_module(g)
        S = self.shard_numel
        out = xp.zeros(self.W * S, dtype=g.dtype)
        for e in self.entries:
            src = g[e.offset:e.offset + e.numel].reshape(e.rows, e.row_numel)
            for r in range(self.W):
                a = min(r * e.chunk_rows, e.rows)
                b = min(a + e.chunk_rows, e.rows)
                if b > a:
                    out[r * S + e.shard_offset:r * S + e.shard_offset + (b - a) * e.row_numel] = \
                        src[a:b].reshape(-1)
        return out

    def gather_full_flat(self, shard_array):
        """All-gather any shard-shaped array (an optimizer state, say) into the unsharded
        layout (``padded`` elements, parameters at their offsets)."""
        xp = _xp.get_array_module(self.full)
        src = xp.asarray(shard_array)
        if self.W == 1:
            gathered = src
        else:
            gathered = xp.empty(self.W * self.shard_numel, dtype=src.dtype)
            c10d.all_gather_into_tensor(Tensor._wrap(gathered), Tensor._wrap(
                xp.ascontiguousarray(src)), group=self.shard_group)
        if self.layout == "flat":
            return gathered
        out = xp.zeros(self.padded, dtype=src.dtype)
        S = self.shard_numel
        for e in self.entries:
            dst = out[e.offset:e.offset + e.numel].reshape(e.rows, e.row_numel)
            for r in range(self.W):
                a = min(r * e.chunk_rows, e.rows)
                b = min(a + e.chunk_rows, e.rows)
                if b > a:
                    dst[a:b] = gathered[r * S + e.shard_offset:r * S + e.shard_offset +
                                        (b - a) * e.row_numel].reshape(b - a, e.row_numel)
        return out

    def shard_of_full(self, full_flat):
        """This rank's shard of an unsharded-layout array (inverse of gather_full_flat)."""
        xp = _xp.get_array_module(full_flat)
        if self.layout == "flat":
            lo = self.rank * self.shard_numel
            out = xp.zeros(self.shard_numel, dtype=full_flat.dtype)
            n = max(0, min(self.total - lo, self.shard_numel))
            out[:n] = full_flat[lo:lo + n]
            return out
        return self._rs_input(full_flat)[self.rank * self.shard_numel:
                                         (self.rank + 1) * self.shard_numel].copy()
