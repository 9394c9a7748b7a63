"""Shared-memory collectives between the ranks of one group on one host (docs/shm.md).

Two implementations of one protocol on one segment layout:

* ``tensorbrain._C.ShmGroup`` (csrc/shm/): futex synchronisation, GIL released for the whole
  collective, cache-sized chunks; the fast path;
* :class:`_twin.ShmGroup`: the NumPy twin over ``multiprocessing.shared_memory``, used when the
  native module is missing (or ``TB_NATIVE=0``), and held to the native one bit for bit.

:func:`connect` is what a backend calls: it is collective over the ranks passed in, exchanges
the segment name through the store and returns a group object with ``barrier``, ``all_reduce``,
``broadcast``, ``all_gather``, ``reduce_scatter`` and ``all_to_all`` on contiguous NumPy arrays.

>>> from tensorbrain.distributed.store import HashStore
>>> import numpy as np
>>> g = connect(HashStore(), rank=0, size=1, timeout=5.0)   # a one-rank group
>>> x = np.arange(4, dtype=np.float32)
>>> all_reduce(g, x, x, "avg"); x
array([0., 1., 2., 3.], dtype=float32)
>>> close(g)
"""
from __future__ import annotations

import atexit
import weakref

import numpy as np

from ... import _native
from .. import errors
from ._layout import DEFAULT_BUF_BYTES, flat_max_bytes, segment_name
from ._reduce import reduce_ranks
from ._twin import ShmGroup as TwinGroup

__all__ = ["connect", "open_group", "close", "all_reduce", "native_available", "reduce_ranks",
           "segment_name", "DEFAULT_BUF_BYTES", "flat_max_bytes", "TwinGroup"]

_live: weakref.WeakSet = weakref.WeakSet()


def native_available() -> bool:
    """True when ``tensorbrain._C`` has the shm transport and ``TB_NATIVE`` does not disable it."""
    return _native.is_available() and hasattr(_native.module(), "ShmGroup")


def open_group(name: str, rank: int, size: int, create: bool, *, timeout: float,
               buf_bytes: int = DEFAULT_BUF_BYTES, native: bool | None = None):
    """Create (``create=True``, one rank) or attach to the segment ``name``. Call
    ``wait_attached()`` on the result (every rank) before the first collective. ``native=None``
    picks the C++ transport when available, else the twin."""
    use_native = native_available() if native is None else native
    if use_native:
        if not native_available():
            raise RuntimeError("shm: the native transport is unavailable: "
                               f"{_native.why_unavailable() or 'tensorbrain._C has no ShmGroup'}")
        g = _native.module().ShmGroup(name, rank, size, create, buf_bytes, float(timeout))
    else:
        g = TwinGroup(name, rank, size, create, buf_bytes, float(timeout))
    g.flat_max_bytes = min(flat_max_bytes(size), g.buf_bytes)
    _live.add(g)
    return g


def connect(store, rank: int, size: int, timeout: float, *, key: str = "shm/segment",
            buf_bytes: int = DEFAULT_BUF_BYTES, native: bool | None = None,
            deadline: float | None = None):
    """Collective over ``size`` ranks on this host: rank 0 creates a segment and publishes its
    name under ``key`` in ``store``, the others attach; returns once everyone is attached (and
    the name already unlinked). Failures raise DistBackendError/DistTimeoutError on every rank.
    ``timeout`` is the group's timeout for its collectives; ``deadline`` (monotonic) bounds the
    attach itself, so that a set-up inside init_process_group never outlives the init's own
    deadline (None: ``timeout`` from now)."""
    import time
    attach = timeout if deadline is None else max(0.05, deadline - time.monotonic())
    if rank == 0:
        try:
            g = open_group(segment_name(), 0, size, True, timeout=attach, buf_bytes=buf_bytes,
                           native=native)
        except BaseException as exc:
            store.set(key, "!" + str(exc))  # the peers fail at once instead of at their timeout
            raise
        store.set(key, g.name)
    else:
        if deadline is not None:
            from datetime import timedelta
            try:
                store.wait([key], timedelta(seconds=attach))
            except Exception as exc:  # noqa: BLE001 - the store's timeout, named here
                raise errors.DistTimeoutError(
                    f"shm: rank 0 of this host did not publish the segment within the set-up "
                    f"deadline ({attach:.1f} s left): {exc}") from None
        name = bytes(store.get(key)).decode()
        if name.startswith("!"):
            raise errors.DistBackendError(f"shm: rank 0 could not create the segment: {name[1:]}")
        g = open_group(name, rank, size, False, timeout=attach, native=native)
    try:
        g.wait_attached()
    except BaseException:
        close(g)
        raise
    g.timeout_s = float(timeout)  # collectives: the group timeout again
    return g


def close(group) -> None:
    """Unmap the segment (and unlink its name if still there). Idempotent."""
    if group is not None and not group.closed:
        if group.rank == 0:  # the creator (connect); a no-op once everyone attached
            group.unlink()
        group.close()


def all_reduce(group, input: np.ndarray, output: np.ndarray, op: str) -> None:
    """``output = op(input over ranks)``; ``op`` may also be "avg" (the tcp backend's meaning:
    float16 divided by the size in float32 first, float32/64 summed then scaled)."""
    if op == "avg":
        if input.dtype.kind != "f":
            raise ValueError(f"shm: op 'avg' needs a floating dtype, got {input.dtype}")
        from ... import _kernels
        if input.dtype == np.float16:
            group.all_reduce((input.astype(np.float32) * np.float32(1.0 / group.size))
                             .astype(np.float16), output, "sum")
            return
        group.all_reduce(input, output, "sum")
        _kernels.scale_into(output, 1.0 / group.size)
        return
    group.all_reduce(input, output, op)


@atexit.register
def _unlink_all() -> None:
    """At exit, unlink the names this process created and that are still there (a group whose
    peers never attached). The mappings go with the process: unmapping here could pull memory
    from under a daemon thread still inside a collective."""
    for g in list(_live):
        try:
            if g.rank == 0 and not g.closed:
                g.unlink()
        except Exception:
            pass
