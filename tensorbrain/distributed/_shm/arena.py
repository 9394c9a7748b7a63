"""A DDP gradient arena resident in shared memory (issue 31; the protocol: csrc/shm/shm.h,
"resident arena").

The reducer's flat gradient arena is this rank's slot of a segment made for it, so the hooks'
copies of ``.grad`` land directly where the peers can read them: the end-of-backward all_reduce
needs no copy into the transport's buffers and none back out. Each rank publishes how much of
its slot is final as its buckets fill (:meth:`ResidentArena.publish`, from the hooks); at the end
of backward every rank claims chunks from a shared counter, reduces each from every slot in rank
order (the bits of the shared-memory all_reduce: sum, then ``1/size``) and writes the result into
every slot. A rank that ends backward first thus reduces what the others have published while
they still compute, instead of waiting for them.

Made by ``IntraHost.resident_arena`` (collective); native transport only (the NumPy twin has no
such segment: the reducer keeps its private arena and the fused all_reduce then).
"""
from __future__ import annotations

import numpy as np

#: elements of one claimed chunk, in bytes: small enough that a late rank's published buckets are
#: taken while it computes and a chunk's sources stay in cache, large enough that the claim
#: counter is touched a few dozen times per 2.7 MB
CHUNK_BYTES = 128 << 10

#: how long a rank that waits here for a peer's gradients yields its core (sched_yield) before
#: it sleeps on a futex (``wait_on`` in csrc/shm/shm.cpp). The transport's default, 500 us, was
#: tuned for small collectives under load; here the wait is for the other rank's backward, late
#: by a median 0.2-0.6 ms and a p90 of up to 5 ms on the 2-core VM, so with 500 us many waits
#: ended in a futex sleep and paid the wake-up. Measured, the gain is within the VM's noise:
#: interleaved runs of benchmarks/ddp.py put DDP at a median 0.967 of the no-DDP ceiling with
#: 5 ms (11 runs) and 0.957 with 500 us (9 runs), but one of the two sets reversed the order
#: (docs/ddp.md). On a busy machine a yield hands the core to whoever is waiting for it, so
#: this costs only an idle core's time.
WAIT_YIELD_US = 5000.0


class ResidentArena:
    """One rank's view of a resident gradient arena.

    Args:
        host: the ``IntraHost`` (its ``_run`` words failures with group ranks).
        group: the arena's native ``ShmGroup``.
        dtype: the gradients' dtype (float32 or float64).
        count: elements in the arena.
        submit: ``submit(op, fn)`` runs ``fn`` as the backend's collective ``op`` (it numbers
            it and words its failures).
    """

    def __init__(self, host, group, dtype, count: int, submit):
        self.host, self.group, self._submit = host, group, submit
        self.dtype, self.count = np.dtype(dtype), int(count)
        # read once: NumPy computes dtype.name in Python, and after a step's GEMMs have pushed
        # that code out of cache one read took 36 us (2.9 us when warm; measured on the VM)
        self._dtype_name = self.dtype.name
        self.chunk = max(1, CHUNK_BYTES // self.dtype.itemsize)
        group.yield_us = WAIT_YIELD_US
        #: chunks of the last reduction this rank reduced itself (of ``ceil(count / chunk)``)
        self.reduced = 0
        nbytes = self.count * self.dtype.itemsize
        whole = group.arena_array()
        #: this rank's slot: the reducer's flat arena
        self.array = whole[:nbytes].view(self.dtype)
        #: this rank's region (the segment was made with room for one), or None: where a
        #: reduction reads this rank's inputs and writes its result after :meth:`target` (True)
        buf = group.buf_bytes
        self.region = whole[buf:buf + nbytes].view(self.dtype) if buf >= nbytes else None
        self._region_target = False  # the segment starts with every target word 0 (the slot)

    def publish(self, elems: int) -> None:
        """Tell the peers that the first ``elems`` elements of this rank's slot are final."""
        self.group.arena_publish(elems, self.count, self.chunk)

    def target(self, region: bool) -> None:
        """Where the next reduction reads this rank's inputs and writes its result, in place:
        its region (True) or its slot. Before the first :meth:`publish` of that reduction.
        The word stays set between reductions, so only a change calls into the module (the
        first native call after a step's GEMMs runs cold: ~8 us on the 2-core VM)."""
        if region != self._region_target:
            self.group.arena_target(region, self.count * self.dtype.itemsize)
            self._region_target = region

    def all_reduce(self, avg: bool = True, offsets=(), outputs=()) -> None:
        """Collective: every slot gets the sum (``avg``: the average) of all slots.

        Args:
            avg: average instead of sum.
            offsets: arena offsets (elements) of ``outputs``.
            outputs: contiguous arrays of the arena's dtype that get the result of
                ``[offset, offset + size)`` too (DDP's private ``.grad``), the chunks this rank
                reduces itself while they are still in cache.
        """
        g, host = self.group, self.host
        args = (self.count, self._dtype_name, avg, self.chunk, list(offsets), list(outputs))
        def run():
            self.reduced = g.arena_reduce(*args)
        self._submit("all_reduce", lambda: host._run("all_reduce", run))
