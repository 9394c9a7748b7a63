"""The common ``all_reduce`` in one native call: the process-group layer's fast path.

A synchronous SUM or AVG of one contiguous host tensor on the default group, when every rank
of that group shares this host, is a single shared-memory collective. The general path
(``distributed_c10d.all_reduce`` -> ``TCPBackend.allreduce`` -> ``IntraHost.allreduce``) spends
about 7 us of Python per call on that (argument checks, a ``Work``, closures, the op queue's
locks, the Ctrl-C registration), 20x the transport's own 0.3 us on a quiet 2-core machine. Here:

* the checks that must stay run in ``ShmGroup.all_reduce_inplace`` (C++: a NumPy array,
  C-contiguous, writable, a dtype the op takes); when one fails it returns False before doing
  anything and the general path runs, with its errors;
* the group's state stays authoritative: the backend's op queue runs it
  (``OpQueue.run_inline``) only when the group is usable and no asynchronous op is queued
  (ordering), with the sequence number the general path would claim;
* the shared-memory transport's always-on collective fingerprint (csrc/shm/shm.cpp ``begin``)
  runs inside the native call, so mismatched calls across ranks still raise on every rank;
* a failure gets the transport's wording (``IntraHost._run``) and then goes through the
  backend's own failure path (``on_failure``): the same error text, and the group is poisoned
  exactly as after a failure on the general path;
* Ctrl-C: the group is registered once with the SIGINT watcher (``_shm/_interrupt.py``) through
  a guard that aborts it only while a fast-path collective runs (``abort_if_busy``). One
  difference from the general path: a Ctrl-C (delivered to the main thread) also aborts a
  fast-path collective that another thread of the process is waiting in.

The general path stays the twin: ``TB_FASTPATH=0`` turns this off, and
tests/distributed/test_fastpath.py checks both give the same bits and the same errors.
Not taken: ``async_op=True``, another group, other ops, a group spanning hosts, the twin
transport (no native module), ``TB_DISTRIBUTED_DEBUG=DETAIL`` or ``INFO``, ``TB_TIMELINE``.

The mpi backend has a lighter one (``_mpi_path``): with its inline collective check, the
fingerprint layer's own latency path is called directly.
"""
from __future__ import annotations

from .. import _config


class _SigintGuard:
    """What the SIGINT watcher aborts: the group, but only while a fast-path call runs in it."""

    def __init__(self, group):
        self.group, self.fired = group, False

    def abort(self) -> None:
        if self.group.abort_if_busy():
            self.fired = True


def for_group(pg, backend):
    """The fast ``all_reduce(tensor, op) -> bool`` for process group ``pg``, or None.

    Args:
        pg: the default ProcessGroup.
        backend: the backend as created (``pg.backend`` is another object when an observer
            wraps it: then no fast path, so that every call is observed).

    Returns:
        A function returning True when it ran the op, False when the general path must; or
        None when this group never takes the fast path.
    """
    from .backends.tcp import TCPBackend
    if not _config.get("TB_FASTPATH") or pg.backend is not backend:
        return None
    if not isinstance(backend, TCPBackend):
        return _mpi_path(backend)
    if backend._debug:
        return None
    intra = backend._shm
    native = getattr(getattr(intra, "group", None), "all_reduce_inplace", None)
    if intra is None or not intra.whole or native is None:  # the twin transport has none
        return None
    group = intra.group
    from ..tensor import Tensor
    from ._groups import ReduceOp
    from ._shm import _interrupt
    guard = _SigintGuard(group)
    watched = _interrupt.watch(guard)  # False off the main thread: Ctrl-C then waits, as before
    avg_of = {ReduceOp.SUM: False, ReduceOp.AVG: True, "sum": False, "avg": True}
    run_inline = backend._ops.run_inline

    def call(arr, avg) -> bool:
        try:
            return native(arr, avg)
        except BaseException as exc:  # noqa: BLE001 - worded as the general path words it
            _reword(intra, guard, exc)
            raise

    def all_reduce(tensor, op) -> bool:
        avg = avg_of.get(op)
        if avg is None or type(tensor) is not Tensor:
            return False
        return run_inline("all_reduce", call, tensor._data, avg)

    def close() -> None:
        if watched:
            _interrupt.unwatch(guard)

    all_reduce.close = close  # type: ignore[attr-defined]
    return all_reduce


def _mpi_path(backend):
    """The mpi backend's fast ``all_reduce`` (inline check mode): straight to the fingerprint
    layer's latency path (``FingerprintLayer.allreduce`` -> ``MPIBackend.fingerprint_allreduce``),
    past the argument plumbing of ``_collectives.all_reduce`` (measured: about a third of what
    an 8-byte call cost through ``dist.all_reduce``). Every check, the sequence numbers, the
    collective check and the errors are the layer's and the backend's, as on the general path;
    any op by name or ``ReduceOp`` member, one Tensor, synchronous, the default group."""
    inner = getattr(backend, "_inner", None)
    if not getattr(inner, "_fp_lean", False) or getattr(backend, "_fp_allreduce", None) is None:
        return None
    from ..tensor import Tensor
    from ._collectives import _OP_NAMES
    names: dict[object, str] = {name: name for name in _OP_NAMES.values()}
    names.update(_OP_NAMES.items())
    layer_allreduce = backend.allreduce

    def all_reduce(tensor, op) -> bool:
        name = names.get(op)
        if name is None or type(tensor) is not Tensor:
            return False
        layer_allreduce([tensor._data], name, async_op=False)
        return True

    all_reduce.close = lambda: None  # type: ignore[attr-defined]
    return all_reduce


def _reword(intra, guard, exc) -> None:
    """Raise ``exc`` as the general path's transport would (``IntraHost._run``): a Ctrl-C that
    aborted the call as KeyboardInterrupt, a peer's failure naming its group rank."""
    if guard.fired or isinstance(exc, KeyboardInterrupt):
        guard.fired = False
        raise KeyboardInterrupt("all_reduce over shared memory was interrupted") from None
    intra._run("all_reduce", _raise, exc)


def _raise(exc):
    raise exc
