"""The abstract backend: collectives named after the MPI operations, on raw arrays.

A backend moves bytes for ONE process group. The process-group layer
(``tensorbrain/distributed/distributed_c10d.py``) unwraps Tensors to their arrays (``numpy`` or
``cupy``), checks arguments, and calls these methods; backends never see a Tensor.

Contract (every backend: tcp, mpi, nccl, ...)
---------------------------------------------
* Construction: ``Backend(store, rank, size, timeout, group_name)``. ``store`` is a (prefixed)
  store private to this group, ``timeout`` the group timeout in seconds. The constructor is
  collective: every rank of the group calls it, and it returns once the group can communicate
  (or raises `DistBackendError`/`DistTimeoutError` naming the ranks that did not show up).
* Every operation returns a `Work` (``tensorbrain.distributed._work``): ``wait(timeout=None)``,
  ``is_completed()``, ``exception()``, ``result()``. With ``async_op=False`` a backend may run the
  op in the calling thread and return a completed Work (the latency path); with
  ``async_op=True`` it must return without waiting for peers.
* In place where torch is: ``allreduce`` and ``broadcast`` overwrite their arrays; ``reduce``
  writes the root's array only (other ranks' arrays are left unchanged); outputs are written,
  inputs are not (except where an input *is* the output).
* Sequence numbers and ordering: each group numbers its collectives 0, 1, 2, ... in issue order;
  every rank must issue the same collectives in the same order (as in MPI and torch). Ops of one
  group run one at a time, in issue order, whether sync or async. Point-to-point ops have their
  own per-peer counters and never take a collective sequence number. Different groups are
  independent (their own connections or communicators).
* Errors: a collective that cannot finish raises `DistBackendError` within the group timeout
  (`DistTimeoutError`, a subclass, when it is the timeout), and the message names the op, the
  group, the sequence number and, where known, the peer rank and host. Size/dtype/op mismatches
  between ranks raise on every rank. After a failure the group is *poisoned*: every later op
  raises at once (`DistBackendError`, naming the first failure); make a new group to go on.
* ``op`` is one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"`` (the names of
  ``tensorbrain._kernels.reduce_into`` plus "avg"). Backends reduce float16 so that a result
  that fits in float16 does not overflow on the way (see each backend for how).
* Arrays may be non-contiguous or on a CUDA device; a backend that cannot use them directly
  stages them through contiguous host buffers with :func:`stage` (results copied back when the
  Work completes, before ``wait()`` returns).
* ``shutdown()`` waits for queued ops and releases resources; ``abort()`` fails pending ops at
  once and closes everything (used on errors and by the launcher's teardown).
"""
from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import _work
from ._validate import REDUCE_OPS

if TYPE_CHECKING:
    from ..store import Store

#: a NumPy or CuPy array (CuPy ships no type information, so to mypy this is Any)
Array = Any


class Capabilities(NamedTuple):
    """What a backend can do; the process-group layer and the shared checks read it.

    Attributes:
        ops: the reduce ops it supports (a subset of ``REDUCE_OPS``).
        dtypes: the dtype names it reduces (data movement takes any dtype).
        batched_p2p: ``batch_p2p`` posts a list of sends and receives as one operation.
        devices: the device types it takes (``"cpu"``, ``"cuda"``).
    """

    ops: tuple = REDUCE_OPS
    dtypes: tuple = ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32",
                     "float64")
    batched_p2p: bool = False
    devices: tuple = ("cpu",)


class Backend(abc.ABC):
    """Base of all backends. Subclasses implement the operations below.

    Args:
        store: a store private to this group (prefixed).
        rank: this process's rank in the group.
        size: the number of ranks in the group.
        timeout: the group timeout in seconds.
        group_name: the group's name, used in error messages.

    Raises:
        ValueError: ``rank`` is not in ``[0, size)``.
    """

    #: registry name ("tcp", "mpi", "nccl"); set by subclasses
    name = "base"
    #: what the backend supports; each backend declares its own
    capabilities = Capabilities()
    #: True when the backend compares collective fingerprints itself (in its frames); False to
    #: be wrapped by the fingerprint layer (``_fingerprint.FingerprintLayer``)
    fingerprint_inband = True

    #: how many store-based monitored_barriers ran (``_store_barrier``; set on first use)
    _mb_seq: int

    def __init__(self, store: Store, rank: int, size: int, timeout: float,
                 group_name: str) -> None:
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is out of range for a group of size {size}")
        self.store, self.rank, self.size = store, rank, size
        self.timeout, self.group_name = float(timeout), group_name

    # ***** collectives *****
    @abc.abstractmethod
    def allreduce(self, arrays: Sequence[Array], op: str = "sum", *,
                  async_op: bool = True) -> _work.Work:
        """Reduce every array of ``arrays`` across ranks, in place (MPI_Allreduce).

        Args:
            arrays: the arrays to reduce; each is overwritten with the result.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def broadcast(self, array: Array, root: int, *, async_op: bool = True) -> _work.Work:
        """Copy ``root``'s array into every rank's ``array`` (MPI_Bcast).

        Args:
            array: the root's data on ``root``, overwritten with it elsewhere.
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def reduce(self, array: Array, root: int, op: str = "sum", *,
               async_op: bool = True) -> _work.Work:
        """Reduce into ``root``'s ``array``; other ranks' arrays are unchanged (MPI_Reduce).

        Args:
            array: this rank's contribution; on ``root`` overwritten with the result.
            root: the group rank that holds (or receives) the data.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def allgather(self, outputs: Sequence[Array], input: Array, *,
                  async_op: bool = True) -> _work.Work:
        """``outputs[j]`` = rank j's ``input`` (MPI_Allgather into a list).

        Args:
            outputs: ``size`` arrays, one per rank, written in rank order.
            input: this rank's contribution (read only).
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def allgather_into(self, output: Array, input: Array, *, async_op: bool = True) -> _work.Work:
        """``output`` (size x input elements) = inputs concatenated in rank order.

        Args:
            output: one array of ``size`` times ``input``'s elements, written.
            input: this rank's contribution (read only).
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def gather(self, outputs: Sequence[Array] | None, input: Array, root: int, *,
               async_op: bool = True) -> _work.Work:
        """On ``root``, ``outputs[j]`` = rank j's ``input``; ``outputs`` is None elsewhere.

        Args:
            outputs: on ``root``, ``size`` arrays written in rank order; None elsewhere.
            input: this rank's contribution (read only).
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def scatter(self, output: Array, inputs: Sequence[Array] | None, root: int, *,
                async_op: bool = True) -> _work.Work:
        """``output`` = root's ``inputs[rank]``; ``inputs`` is None off the root.

        Args:
            output: the array that receives this rank's piece.
            inputs: on ``root``, ``size`` arrays, one per rank; None elsewhere.
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def reduce_scatter(self, output: Array, inputs: Sequence[Array], op: str = "sum", *,
                       async_op: bool = True) -> _work.Work:
        """``output`` = reduction over ranks of their ``inputs[rank]``.

        Args:
            output: the array that receives this rank's reduced block.
            inputs: ``size`` arrays; block ``j`` goes, reduced, to rank ``j``.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def reduce_scatter_into(self, output: Array, input: Array, op: str = "sum", *,
                            async_op: bool = True) -> _work.Work:
        """``output`` = reduction of block ``rank`` of the flat ``input`` (size x output).

        Args:
            output: the array that receives this rank's reduced block.
            input: one flat array of ``size`` times ``output``'s elements.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def alltoall(self, outputs: Sequence[Array], inputs: Sequence[Array], *,
                 async_op: bool = True) -> _work.Work:
        """``outputs[j]`` on rank i = ``inputs[i]`` of rank j (MPI_Alltoall with lists).

        Args:
            outputs: ``size`` arrays; ``outputs[j]`` receives rank j's ``inputs[rank]``.
            inputs: ``size`` arrays; ``inputs[j]`` is sent to rank j.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def alltoall_single(self, output: Array, input: Array, out_splits: Sequence[int] | None = None,
                        in_splits: Sequence[int] | None = None, *,
                        async_op: bool = True) -> _work.Work:
        """Flat all-to-all along dim 0; splits are row counts per rank (None = equal).

        Args:
            output: the array that receives the rows from every rank, in rank order.
            input: the rows to send, ``in_splits[j]`` of them to rank j.
            out_splits: rows received from each rank; None for an equal split.
            in_splits: rows sent to each rank; None for an equal split.
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def barrier(self, *, async_op: bool = True) -> _work.Work:
        """Return once every rank has entered the barrier.

        Args:
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    # ***** point to point *****
    @abc.abstractmethod
    def send(self, array: Array, dst: int, tag: int = 0, *, async_op: bool = True) -> _work.Work:
        """Send ``array`` to group rank ``dst``; matched in order per (peer, tag).

        Args:
            array: the data to send (read only).
            dst: the destination group rank.
            tag: messages are matched in order per (peer, tag).
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    @abc.abstractmethod
    def recv(self, array: Array, src: int | None, tag: int = 0, *,
             async_op: bool = True) -> _work.Work:
        """Receive into ``array`` from ``src`` (None = any rank); ``result()`` is the source.

        Args:
            array: the array that receives the data (shape and dtype must match the send).
            src: the source group rank; None for any rank.
            tag: messages are matched in order per (peer, tag).
            async_op: return without waiting for the peers (else the returned Work is complete).

        Returns:
            _work.Work: the handle of the operation.

        Raises:
            DistBackendError: a peer failed, sizes/dtypes differ between ranks, or the group
                timeout passed (DistTimeoutError).
        """

    # ***** lifetime *****
    @abc.abstractmethod
    def shutdown(self) -> None:
        """Finish queued ops, then release connections and threads."""

    @abc.abstractmethod
    def abort(self) -> None:
        """Fail pending ops at once and close everything."""

    # ***** optional hooks with defaults *****
    def monitored_barrier(self, timeout: float, wait_all_ranks: bool = False) -> None:
        """A barrier that names the ranks that did not arrive.

        The default checks in through the group's store (rank 0 publishes a verdict); backends
        with a channel of their own (mpi) override it.

        Args:
            timeout: seconds to wait for the other ranks.
            wait_all_ranks: report every missing rank rather than the first.

        Raises:
            DistTimeoutError: some rank did not arrive within ``timeout``; the message names it.
        """
        from ._store_barrier import monitored_barrier
        monitored_barrier(self, timeout, wait_all_ranks)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} group={self.group_name!r} rank={self.rank}/{self.size}>"
