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
from typing import Sequence

import numpy as np

from .. import _work

REDUCE_OPS = ("sum", "avg", "prod", "min", "max", "band", "bor", "bxor")


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

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str):
        if not 0 <= rank < size:
            raise ValueError(f"rank {rank} is out of range for a group of size {size}")
        self.store, self.rank, self.size = store, rank, size
        self.timeout, self.group_name = float(timeout), group_name

    # ***** collectives *****
    @abc.abstractmethod
    def allreduce(self, arrays: Sequence, op: str = "sum", *, async_op: bool = True) -> _work.Work:
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
    def broadcast(self, array, root: int, *, async_op: bool = True) -> _work.Work:
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
    def reduce(self, array, root: int, op: str = "sum", *, async_op: bool = True) -> _work.Work:
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
    def allgather(self, outputs: Sequence, input, *, async_op: bool = True) -> _work.Work:
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
    def allgather_into(self, output, input, *, async_op: bool = True) -> _work.Work:
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
    def gather(self, outputs, input, root: int, *, async_op: bool = True) -> _work.Work:
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
    def scatter(self, output, inputs, root: int, *, async_op: bool = True) -> _work.Work:
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
    def reduce_scatter(self, output, inputs: Sequence, op: str = "sum", *,
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
    def reduce_scatter_into(self, output, input, op: str = "sum", *,
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
    def alltoall(self, outputs: Sequence, inputs: Sequence, *, async_op: bool = True) -> _work.Work:
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
    def alltoall_single(self, output, input, out_splits=None, in_splits=None, *,
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
    def send(self, array, dst: int, tag: int = 0, *, async_op: bool = True) -> _work.Work:
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
    def recv(self, array, src: int | None, tag: int = 0, *, async_op: bool = True) -> _work.Work:
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
        """A barrier that names the ranks that did not arrive (via the store).

        The default waits through the store; rank 0 checks in on the others and publishes a verdict.

        Args:
            timeout: seconds to wait for the other ranks.
            wait_all_ranks: report every missing rank rather than the first.

        Raises:
            DistTimeoutError: some rank did not arrive within ``timeout``; the message names it.
        """
        from ..errors import DistTimeoutError
        import time
        seq = getattr(self, "_mb_seq", 0)
        self._mb_seq = seq + 1
        key = f"mb/{seq}"
        self.store.set(f"{key}/{self.rank}", b"1")
        if self.rank == 0:
            deadline = time.monotonic() + timeout
            missing = list(range(1, self.size))
            while missing and time.monotonic() < deadline:
                missing = [r for r in missing if not self.store.check([f"{key}/{r}"])]
                if missing:
                    time.sleep(0.005)
            if missing:
                self.store.set(f"{key}/verdict", ",".join(map(str, missing)).encode())
                raise DistTimeoutError(
                    f"monitored_barrier of group {self.group_name!r} timed out after {timeout} s: "
                    f"rank(s) {missing} did not arrive" + ("" if wait_all_ranks else
                                                             " (first missing shown)"))
            self.store.set(f"{key}/verdict", b"ok")
        else:
            from datetime import timedelta
            try:  # rank 0 always answers within ``timeout`` unless it is the one missing
                self.store.wait([f"{key}/verdict"], timedelta(seconds=timeout + 2.0))
            except Exception:  # noqa: BLE001 - the store's own timeout error
                raise DistTimeoutError(
                    f"monitored_barrier of group {self.group_name!r} timed out after {timeout} s "
                    f"on rank {self.rank}: rank 0 did not arrive (it reports the others)") from None
            verdict = self.store.get(f"{key}/verdict")
            if verdict != b"ok":
                raise DistTimeoutError(
                    f"monitored_barrier of group {self.group_name!r} failed: rank 0 reports "
                    f"rank(s) {verdict.decode()} did not arrive")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} group={self.group_name!r} rank={self.rank}/{self.size}>"


# ***** staging helpers (non-contiguous and CUDA arrays) *****
def is_host_contiguous(array) -> bool:
    """True when ``array`` is a C-contiguous NumPy (host) array.

    Args:
        array: a NumPy or CuPy array.
    """
    return isinstance(array, np.ndarray) and array.flags.c_contiguous


def stage(array, copy_in: bool = True):
    """A C-contiguous host array to communicate through, and ``finish()`` copying it back.

    ``host`` is ``array`` itself when it already is a contiguous NumPy array (``finish`` then
    does nothing); otherwise a host copy (CuPy arrays are copied device-to-host after the device
    is synchronised, since CPU transports cannot read device memory), and ``finish()`` writes the
    result back into ``array``.

    Args:
        array: a NumPy or CuPy array, contiguous or not.
        copy_in: copy ``array``'s values into the host buffer (False for outputs only written).

    Returns:
        tuple: ``(host, finish)``.
    """
    if type(array) is np.ndarray and array.flags.c_contiguous:
        return array, _noop
    from ... import _xp
    if _xp.is_cupy_array(array):
        cp = _xp.cupy()
        if copy_in:
            cp.cuda.get_current_stream().synchronize()
            host = cp.asnumpy(array)
            host = np.ascontiguousarray(host)
        else:
            host = np.empty(array.shape, dtype=array.dtype)

        def finish():
            array[...] = cp.asarray(host)
            cp.cuda.get_current_stream().synchronize()
        return host, finish
    host = np.ascontiguousarray(array) if copy_in else np.empty(array.shape, array.dtype)
    if host is array:  # pragma: no cover - ascontiguousarray returned the input
        return host, _noop

    def finish():
        np.copyto(array, host)
    return host, finish


def stage_in(array):
    """A contiguous host view or copy of an input that is only read.

    Args:
        array: a NumPy or CuPy array.

    Returns:
        numpy.ndarray: ``array`` itself when it already is contiguous on the host, else a copy.
    """
    if is_host_contiguous(array):
        return array
    from ... import _xp
    if _xp.is_cupy_array(array):
        _xp.cupy().cuda.get_current_stream().synchronize()
    return np.ascontiguousarray(_xp.to_numpy(array))


def row_bytes(array) -> int:
    """Bytes in one row (dim 0 entry) of ``array``; a 0-d array counts as one row.

    Args:
        array: a NumPy or CuPy array.
    """
    if array.ndim == 0:
        return array.itemsize
    return int(np.prod(array.shape[1:], dtype=np.int64)) * array.itemsize


def row_splits(splits, array, size: int) -> list:
    """all_to_all_single's rows of ``array`` (dim 0) per rank: ``splits`` checked against the
    row count, or an even split over ``size`` ranks when None.

    Args:
        splits: rows per rank, or None for an equal split.
        array: the array whose dim 0 is split.
        size: the number of ranks.

    Returns:
        list[int]: ``size`` row counts summing to dim 0.

    Raises:
        ValueError: the splits do not have ``size`` entries summing to dim 0, or dim 0 does not
            divide evenly when ``splits`` is None.
    """
    rows = array.shape[0] if array.ndim else 0
    if splits is None:
        if rows % size:
            raise ValueError(f"all_to_all_single: dim 0 ({rows} rows) does not divide evenly "
                             f"among {size} ranks; pass the split sizes")
        return [rows // size] * size
    splits = [int(s) for s in splits]
    if len(splits) != size or sum(splits) != rows:
        raise ValueError(f"all_to_all_single: split sizes {splits} must have {size} entries "
                         f"summing to dim 0 ({rows})")
    return splits


def _noop():
    return None
