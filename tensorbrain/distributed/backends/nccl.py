"""The ``nccl`` backend: CuPy arrays reduced by NCCL on a communication stream.

Use it with one GPU per process, chosen before the group is made::

    tb.cuda.set_device(local_rank)
    tb.distributed.init_process_group("nccl")      # under tbrun / torchrun-style env vars

NCCL itself is opened at run time by ``tensorbrain._C.nccl`` (``csrc/nccl/nccl.cpp``), from
``TB_NCCL_LIBRARY``, the ``nvidia-nccl-cu12`` wheel or the system path (see ``_nccl_lib``).

How it works
------------
* Setup (collective): rank 0 makes an NCCL unique id (128 bytes) and puts it in the group's
  store under ``nccl/uid``; every rank reads it and calls ``ncclCommInitRank`` on its current
  device. Each group (``new_group``) has its own store prefix, so its own id and communicator.
* Stream order, as torch's ProcessGroupNCCL: each op records an event on the caller's current
  (compute) stream and makes the backend's communication stream wait for it, so NCCL reads the
  inputs only after the kernels that produce them; it launches on the communication stream and
  records a "done" event there. ``Work.wait()`` makes the caller's current stream wait for that
  event (the host does not block), so later kernels see the result; ``wait(timeout=s)`` also
  blocks the host until the op finishes. The arrays an op uses are kept alive by its Work until
  the done event fires, so CuPy's memory pool cannot hand them out while NCCL still writes.
* all_reduce/broadcast/reduce/all_gather/reduce_scatter are single NCCL calls; all_to_all,
  scatter, gather, batched send/recv are ncclSend/ncclRecv pairs inside ncclGroupStart/End.
  Data-movement ops move int8 bytes (any dtype); reductions use NCCL's types (float16,
  bfloat16, float32/64, int8/32/64, uint8/32/64; ncclAvg for AVG). bool reduces as uint8
  (sum/max = or, prod/min = and). NCCL has no bitwise reductions: band/bor/bxor raise.
* The watchdog thread polls every pending op: a done event completes its Work; an error that
  ``ncclCommGetAsyncError`` reports, or an op still running after the group timeout, aborts the
  communicator (``ncclCommAbort`` makes NCCL's kernels return, so no stream stays blocked) and
  fails every pending Work with `DistBackendError` / `DistTimeoutError`; later ops raise at once.

Without a GPU, ``is_available()`` is False and ``why_unavailable()`` says which part is missing
(the binding, the NCCL library, CuPy or a GPU); creating the backend raises that reason.

>>> from tensorbrain.distributed.backends import nccl
>>> nccl.is_available() == (nccl.why_unavailable() is None)
True
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ... import _xp
from .. import _nccl_lib
from ..errors import DistBackendError, DistStoreError
from . import _validate, base
from ._executor import FailureState
from ._nccl_work import Watchdog, _NCCLWork

_UID_KEY = "nccl/uid"
_INT8 = 0  # ncclInt8: data movement in bytes


def why_unavailable() -> str | None:
    """Why the nccl backend cannot run here (None when it can)."""
    return _nccl_lib.why_unavailable()


def is_available() -> bool:
    """True when the binding, the NCCL library and a CUDA GPU with CuPy are all usable."""
    return _nccl_lib.is_available()


class NCCLBackend(Watchdog, base.Backend):
    """One NCCL communicator on the current CUDA device (see the module docstring).

    Args:
        store: a store private to this group (prefixed).
        rank: this process's rank in the group.
        size: the number of ranks in the group.
        timeout: the group timeout in seconds.
        group_name: the group's name, used in error messages.
        global_ranks: the group's ranks in the world; None for the world group.
    """

    name = "nccl"
    capabilities = base.Capabilities(
        ops=tuple(o for o in _validate.REDUCE_OPS if o not in _validate.BITWISE),
        dtypes=("bool", "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                "bfloat16", "float32", "float64"),
        batched_p2p=True, devices=("cuda",))

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str,
                 global_ranks=None):
        super().__init__(store, rank, size, timeout, group_name)
        self._nccl, self._cp = self._runtime(store)
        cp = self._cp
        self.device = cp.cuda.Device()
        self._seq = 0
        self._failure = FailureState(group_name, rank)
        self._pending: list[_NCCLWork] = []
        self._lock = threading.Lock()
        uid = self._exchange_unique_id(store)
        with self.device:
            self.stream = cp.cuda.Stream(non_blocking=True)
            try:
                self.comm = self._nccl.Communicator(size, uid, rank)
            except self._nccl.NcclError as exc:
                raise DistBackendError(f"creating the NCCL communicator of group {group_name!r} "
                                       f"(rank {rank} of {size}, device {self.device.id}) "
                                       f"failed: {exc}") from None
        self._stop = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, name=f"tb-nccl-watchdog-{group_name}",
                                          daemon=True)
        self._watchdog.start()

    def _runtime(self, store):
        """``(binding, cupy)``: NCCL's binding and the CuPy module, or RuntimeError saying why
        they cannot be used. The one seam a test stand-in replaces (tensorbrain.testing.nccl_standin)."""
        reason = why_unavailable()
        if reason is not None:
            raise RuntimeError(f"the nccl backend cannot be used here: {reason}. Use backend='tcp' "
                               "or 'mpi' for CPU tensors")
        return _nccl_lib.binding(), _xp.cupy()

    def _exchange_unique_id(self, store) -> bytes:
        if self.rank == 0:
            uid = self._nccl.get_unique_id()
            store.set(_UID_KEY, uid)
            return uid
        try:
            uid = store.get(_UID_KEY)
        except DistStoreError as exc:
            raise DistBackendError(f"group {self.group_name!r}: rank {self.rank} did not receive "
                                   f"the NCCL unique id from rank 0 through the store: {exc}") from None
        if len(uid) != self._nccl.UNIQUE_ID_BYTES:
            raise DistBackendError(f"group {self.group_name!r}: the NCCL unique id in the store is "
                                   f"{len(uid)} bytes, expected {self._nccl.UNIQUE_ID_BYTES}")
        return bytes(uid)

    # ***** launching *****
    def _check(self, op: str, *arrays) -> None:
        """Validate, then order the communication stream after the caller's current stream (so
        the staging copies below and NCCL itself read inputs only once they are produced)."""
        self._failure.check(op)
        for a in arrays:
            if a is None:
                continue
            if not isinstance(a, self._cp.ndarray):
                raise ValueError(f"the nccl backend takes CUDA tensors; {op} got a "
                                 f"{type(a).__name__} on the CPU. Move it with .cuda() or use "
                                 "backend='tcp'/'mpi' for CPU tensors")
            if a.device.id != self.device.id:
                raise ValueError(f"{op}: array is on cuda:{a.device.id} but group "
                                 f"{self.group_name!r} communicates on cuda:{self.device.id}; "
                                 "call tb.cuda.set_device(local_rank) before init_process_group")
        cp = self._cp
        with self.device:
            ready = cp.cuda.Event(disable_timing=True)
            ready.record(cp.cuda.get_current_stream())
            self.stream.wait_event(ready)

    def _launch(self, op: str, body, keep, result, async_op: bool, after=None):
        """Run ``body(stream_ptr)`` (NCCL calls) on the communication stream (already ordered after
        the caller's stream by `_check`), then ``after()`` (copy-outs, on the same stream)."""
        cp = self._cp
        seq = self._seq
        self._seq += 1
        with self.device:
            try:
                with self.stream:
                    body(self.stream.ptr)
                    if after is not None:
                        after()
            except self._nccl.NcclError as exc:
                err = DistBackendError(f"NCCL {op} (seq {seq}) of group {self.group_name!r} "
                                       f"failed on rank {self.rank}: {exc}")
                self._fail(err)
                raise err from None
            done = cp.cuda.Event(disable_timing=True)
            done.record(self.stream)
        work = _NCCLWork(self, op, seq, done, keep, result)
        with self._lock:
            self._pending.append(work)
        if not async_op:
            work.wait()
        return work

    # ***** the fingerprint layer's exchange (tensorbrain/distributed/_fingerprint.py) *****
    fingerprint_inband = False

    def fingerprint_exchange(self, words):
        """All-gather this rank's collective fingerprint through NCCL on the communication
        stream, then wait for it (bounded by the group timeout) and compare on the host. NCCL
        hangs or corrupts memory on mismatched counts, so the check must finish before the
        collective is launched. (Not measured here: no multi-GPU machine.)

        Args:
            words: this rank's fingerprint words (int64).

        Returns:
            numpy.ndarray: every rank's words, one row per rank.
        """
        self._failure.check("collective")
        from .._fingerprint import KINDS
        cp = self._cp
        words = np.ascontiguousarray(words, np.int64)
        # launched under the name and sequence number of the collective it guards, so a
        # failure here reads as that collective's ("all_reduce (seq 1)")
        code = int(words[1]) & 0xFF if words.size > 1 else 0
        op = KINDS[code] if code < len(KINDS) else "collective"
        seq = self._seq
        with self.device:
            send = cp.asarray(words)
            recv = cp.empty((self.size, words.size), cp.int64)
            comm = self.comm
            try:
                self._launch(op, lambda s: comm.all_gather(
                    send.data.ptr, recv.data.ptr, send.nbytes, _INT8, s), (send, recv), None,
                    async_op=False)
            finally:
                self._seq = seq
            return cp.asnumpy(recv)

    def _group(self, calls):
        """``calls`` (a list of ``fn(stream)``) inside ncclGroupStart/End, so sends and receives
        to several peers run concurrently instead of deadlocking on each other."""
        nccl = self._nccl

        def body(stream):
            nccl.group_start()
            try:
                for call in calls:
                    call(stream)
            finally:
                nccl.group_end()
        return body

    def _reduce_args(self, dtype, op: str):
        name = np.dtype(dtype).name
        if op in _validate.BITWISE:
            raise ValueError(f"NCCL has no bitwise reductions: ReduceOp.{op.upper()} is not "
                             "supported on the nccl backend (torch's NCCL refuses it too)")
        _validate.check_reduce(op, dtype, tuple(self._nccl.DTYPES) + ("bool",), self.name)
        if name == "bool":
            # bool bytes are 0/1: max is "or", min is "and" (torch reduces bool the same way).
            return self._nccl.DTYPES["uint8"], self._nccl.RED_OPS[
                {"sum": "max", "max": "max", "prod": "min", "min": "min"}[op]]
        # The binding names ncclProd "product" (nccl.h's spelling); ours is "prod".
        return self._nccl.DTYPES[name], self._nccl.RED_OPS["product" if op == "prod" else op]

    def _contiguous(self, array):
        """``(contiguous array, copy_back or None)``; the copy runs on the communication stream."""
        if array.flags.c_contiguous:
            return array, None
        cp = self._cp
        with self.stream:
            tmp = cp.ascontiguousarray(array)

        def copy_back():
            array[...] = tmp
        return tmp, copy_back

    # ***** collectives *****
    def allreduce(self, arrays, op: str = "sum", *, async_op: bool = True):
        """Reduce every array of ``arrays`` across ranks, in place (MPI_Allreduce).

        Args:
            arrays: the arrays to reduce; each is overwritten with the result.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        arrays = list(arrays)
        self._check("all_reduce", *arrays)
        plans = []
        for a in arrays:
            dt, red = self._reduce_args(a.dtype, op)
            buf, back = self._contiguous(a)
            plans.append((buf, back, dt, red))
        comm = self.comm
        calls = [lambda s, b=b, dt=dt, red=red: comm.all_reduce(b.data.ptr, b.data.ptr, b.size,
                                                                 dt, red, s)
                 for b, _, dt, red in plans]
        body = calls[0] if len(calls) == 1 else self._group(calls)
        backs = [back for _, back, _, _ in plans if back is not None]
        return self._launch("all_reduce", body, (arrays, plans), arrays, async_op,
                            after=(lambda: [f() for f in backs]) if backs else None)

    def broadcast(self, array, root: int, *, async_op: bool = True):
        """Copy ``root``'s array into every rank's ``array`` (MPI_Bcast).

        Args:
            array: the root's data on ``root``, overwritten with it elsewhere.
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("broadcast", array)
        buf, back = self._contiguous(array)
        comm = self.comm
        return self._launch("broadcast", lambda s: comm.broadcast(
            buf.data.ptr, buf.data.ptr, buf.nbytes, _INT8, root, s), (array, buf), array,
            async_op, after=back)

    def reduce(self, array, root: int, op: str = "sum", *, async_op: bool = True):
        """Reduce into ``root``'s ``array``; other ranks' arrays are unchanged (MPI_Reduce).

        Args:
            array: this rank's contribution; on ``root`` overwritten with the result.
            root: the group rank that holds (or receives) the data.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("reduce", array)
        dt, red = self._reduce_args(array.dtype, op)
        buf, back = self._contiguous(array)
        comm = self.comm
        return self._launch("reduce", lambda s: comm.reduce(
            buf.data.ptr, buf.data.ptr, buf.size, dt, red, root, s), (array, buf), array,
            async_op, after=back if self.rank == root else None)

    def allgather(self, outputs, input, *, async_op: bool = True):
        """``outputs[j]`` = rank j's ``input`` (MPI_Allgather into a list).

        Args:
            outputs: ``size`` arrays, one per rank, written in rank order.
            input: this rank's contribution (read only).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("all_gather", input, *outputs)
        send, _ = self._contiguous(input)
        cp, comm = self._cp, self.comm
        with self.stream:
            gathered = cp.empty((self.size,) + send.shape, send.dtype)

        def after():
            for out, block in zip(outputs, gathered):
                out[...] = block.reshape(out.shape)
        return self._launch("all_gather", lambda s: comm.all_gather(
            send.data.ptr, gathered.data.ptr, send.nbytes, _INT8, s),
            (input, send, gathered, outputs), outputs, async_op, after=after)

    def allgather_into(self, output, input, *, async_op: bool = True):
        """``output`` (size x input elements) = inputs concatenated in rank order.

        Args:
            output: one array of ``size`` times ``input``'s elements, written.
            input: this rank's contribution (read only).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("all_gather_into_tensor", input, output)
        send, _ = self._contiguous(input)
        recv, back = self._contiguous(output)
        comm = self.comm
        return self._launch("all_gather_into_tensor", lambda s: comm.all_gather(
            send.data.ptr, recv.data.ptr, send.nbytes, _INT8, s), (input, send, output, recv),
            output, async_op, after=back)

    def gather(self, outputs, input, root: int, *, async_op: bool = True):
        """On ``root``, ``outputs[j]`` = rank j's ``input``; ``outputs`` is None elsewhere.

        Args:
            outputs: on ``root``, ``size`` arrays written in rank order; None elsewhere.
            input: this rank's contribution (read only).
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("gather", input, *(outputs or ()))
        send, _ = self._contiguous(input)
        comm = self.comm
        if self.rank != root:
            calls = [lambda s: comm.send(send.data.ptr, send.nbytes, _INT8, root, s)]
            return self._launch("gather", self._group(calls), (input, send), None, async_op)
        recvs = [self._contiguous(o) for o in outputs]
        calls = []
        for peer, (buf, _) in enumerate(recvs):
            if peer == self.rank:
                calls.append(lambda s, buf=buf: buf.__setitem__(Ellipsis, send.reshape(buf.shape)))
                continue
            calls.append(lambda s, buf=buf, peer=peer: comm.recv(buf.data.ptr, buf.nbytes, _INT8,
                                                                 peer, s))
        backs = [b for _, b in recvs if b is not None]
        return self._launch("gather", self._group(calls), (input, send, outputs, recvs), outputs,
                            async_op, after=(lambda: [f() for f in backs]) if backs else None)

    def scatter(self, output, inputs, root: int, *, async_op: bool = True):
        """``output`` = root's ``inputs[rank]``; ``inputs`` is None off the root.

        Args:
            output: the array that receives this rank's piece.
            inputs: on ``root``, ``size`` arrays, one per rank; None elsewhere.
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("scatter", output, *(inputs or ()))
        recv, back = self._contiguous(output)
        comm = self.comm
        if self.rank != root:
            calls = [lambda s: comm.recv(recv.data.ptr, recv.nbytes, _INT8, root, s)]
            return self._launch("scatter", self._group(calls), (output, recv), output, async_op,
                                after=back)
        sends = [self._contiguous(x)[0] for x in inputs]
        calls = []
        for peer, buf in enumerate(sends):
            if peer == self.rank:
                calls.append(lambda s, buf=buf: recv.__setitem__(Ellipsis, buf.reshape(recv.shape)))
                continue
            calls.append(lambda s, buf=buf, peer=peer: comm.send(buf.data.ptr, buf.nbytes, _INT8,
                                                                 peer, s))
        return self._launch("scatter", self._group(calls), (output, recv, inputs, sends), output,
                            async_op, after=back)

    def reduce_scatter(self, output, inputs, op: str = "sum", *, async_op: bool = True):
        """``output`` = reduction over ranks of their ``inputs[rank]``.

        Args:
            output: the array that receives this rank's reduced block.
            inputs: ``size`` arrays; block ``j`` goes, reduced, to rank ``j``.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("reduce_scatter", output, *inputs)
        with self.stream:
            packed = self._cp.stack([x.reshape(output.shape) for x in inputs])
        return self._reduce_scatter("reduce_scatter", output, packed, op, async_op, inputs)

    def reduce_scatter_into(self, output, input, op: str = "sum", *, async_op: bool = True):
        """``output`` = reduction of block ``rank`` of the flat ``input`` (size x output).

        Args:
            output: the array that receives this rank's reduced block.
            input: one flat array of ``size`` times ``output``'s elements.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("reduce_scatter_tensor", output, input)
        packed, _ = self._contiguous(input)
        return self._reduce_scatter("reduce_scatter_tensor", output, packed, op, async_op, input)

    def _reduce_scatter(self, op_name, output, packed, op, async_op, keep):
        dt, red = self._reduce_args(output.dtype, op)
        recv, back = self._contiguous(output)
        comm = self.comm
        return self._launch(op_name, lambda s: comm.reduce_scatter(
            packed.data.ptr, recv.data.ptr, recv.size, dt, red, s),
            (keep, packed, output, recv), output, async_op, after=back)

    def alltoall(self, outputs, inputs, *, async_op: bool = True):
        """``outputs[j]`` on rank i = ``inputs[i]`` of rank j (MPI_Alltoall with lists).

        Args:
            outputs: ``size`` arrays; ``outputs[j]`` receives rank j's ``inputs[rank]``.
            inputs: ``size`` arrays; ``inputs[j]`` is sent to rank j.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("all_to_all", *outputs, *inputs)
        sends = [self._contiguous(x)[0] for x in inputs]
        recvs = [self._contiguous(o) for o in outputs]
        comm = self.comm
        calls = []
        for peer in range(self.size):
            send, (recv, _) = sends[peer], recvs[peer]
            if peer == self.rank:
                calls.append(lambda s, send=send, recv=recv: recv.__setitem__(
                    Ellipsis, send.reshape(recv.shape)))
                continue
            calls.append(lambda s, send=send, peer=peer: comm.send(
                send.data.ptr, send.nbytes, _INT8, peer, s))
            calls.append(lambda s, recv=recv, peer=peer: comm.recv(
                recv.data.ptr, recv.nbytes, _INT8, peer, s))
        backs = [b for _, b in recvs if b is not None]
        return self._launch("all_to_all", self._group(calls), (inputs, sends, outputs, recvs),
                            outputs, async_op,
                            after=(lambda: [f() for f in backs]) if backs else None)

    def alltoall_single(self, output, input, out_splits=None, in_splits=None, *,
                        async_op: bool = True):
        """Flat all-to-all along dim 0; splits are row counts per rank (None = equal).

        Args:
            output: the array that receives the rows from every rank, in rank order.
            input: the rows to send, ``in_splits[j]`` of them to rank j.
            out_splits: rows received from each rank; None for an equal split.
            in_splits: rows sent to each rank; None for an equal split.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("all_to_all_single", output, input)
        send, _ = self._contiguous(input)
        recv, back = self._contiguous(output)
        in_rows = _validate.splits(in_splits, _validate.rows_of(send), self.size,
                                   "input_split_sizes")
        out_rows = _validate.splits(out_splits, _validate.rows_of(recv), self.size,
                                    "output_split_sizes")
        in_row, out_row = _validate.row_bytes(send), _validate.row_bytes(recv)
        comm, calls = self.comm, []
        s_off = r_off = 0
        for peer in range(self.size):
            s_n, r_n = in_rows[peer] * in_row, out_rows[peer] * out_row
            if s_n:
                calls.append(lambda s, p=send.data.ptr + s_off, n=s_n, peer=peer: comm.send(
                    p, n, _INT8, peer, s))
            if r_n:
                calls.append(lambda s, p=recv.data.ptr + r_off, n=r_n, peer=peer: comm.recv(
                    p, n, _INT8, peer, s))
            s_off, r_off = s_off + s_n, r_off + r_n
        return self._launch("all_to_all_single", self._group(calls), (input, send, output, recv),
                            output, async_op, after=back)

    def barrier(self, *, async_op: bool = True):
        """An all_reduce of one int32 on the device (as torch's NCCL barrier); waiting on it
        blocks the host until every rank's barrier finished.

        Args:
            async_op: return without waiting for the peers.

        Returns:
            Work: the handle of the operation.
        """
        self._check("barrier")
        with self.device:
            token = self._cp.zeros(1, self._cp.int32)
        comm = self.comm
        work = self._launch("barrier", lambda s: comm.all_reduce(
            token.data.ptr, token.data.ptr, 1, self._nccl.DTYPES["int32"],
            self._nccl.RED_OPS["sum"], s), token, None, True)
        if not async_op:
            work.wait(timeout=self.timeout)
        return work

    # ***** point to point *****
    def send(self, array, dst: int, tag: int = 0, *, async_op: bool = True):
        """Send ``array`` to group rank ``dst``; matched in order per (peer, tag).

        Args:
            array: the data to send (read only).
            dst: the destination group rank.
            tag: messages are matched in order per (peer, tag).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("send", array)
        buf, _ = self._contiguous(array)
        comm = self.comm
        # NCCL has no tags: messages between two ranks match in issue order (as torch's NCCL).
        return self._launch("send", lambda s: comm.send(buf.data.ptr, buf.nbytes, _INT8, dst, s),
                            (array, buf), None, async_op)

    def recv(self, array, src: int | None, tag: int = 0, *, async_op: bool = True):
        """Receive into ``array`` from ``src`` (None = any rank); ``result()`` is the source.

        Args:
            array: the array that receives the data (shape and dtype must match the send).
            src: the source group rank; None for any rank.
            tag: messages are matched in order per (peer, tag).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        self._check("recv", array)
        if src is None:
            raise ValueError("NCCL cannot receive from any source: pass src (torch's NCCL "
                             "backend refuses recv without a source too)")
        buf, back = self._contiguous(array)
        comm = self.comm
        return self._launch("recv", lambda s: comm.recv(buf.data.ptr, buf.nbytes, _INT8, src, s),
                            (array, buf), src, async_op, after=back)

    def batch_p2p(self, ops, *, async_op: bool = True):
        """``ops``: ``(kind, array, peer, tag)`` with kind "send"/"recv" (what
        ``batch_isend_irecv`` passes), all in one NCCL group so that ranks exchanging in both
        directions do not deadlock. One Work for all; NCCL has no tags (order matches).

        Args:
            ops: ``(kind, array, peer, tag)`` tuples, kind ``"send"`` or ``"recv"``.
            async_op: return without waiting for the peers.

        Returns:
            Work: one handle for the whole batch.
        """
        comm, calls, keep, backs = self.comm, [], [], []
        for kind, array, peer, _tag in ops:
            self._check(f"batch_isend_irecv ({kind})", array)
            buf, back = self._contiguous(array)
            keep.append((array, buf))
            if kind == "send":
                calls.append(lambda s, b=buf, p=peer: comm.send(b.data.ptr, b.nbytes, _INT8, p, s))
            else:
                calls.append(lambda s, b=buf, p=peer: comm.recv(b.data.ptr, b.nbytes, _INT8, p, s))
                if back is not None:
                    backs.append(back)
        return self._launch("batch_isend_irecv", self._group(calls), keep, None, async_op,
                            after=(lambda: [f() for f in backs]) if backs else None)

    # ***** lifetime *****
    def shutdown(self) -> None:
        """Finish queued ops, then release connections and threads."""
        deadline = time.monotonic() + self.timeout
        while self._pending and self._failure.first is None and time.monotonic() < deadline:
            for work in list(self._pending):
                self._poll(work)
            time.sleep(1e-3)
        self._stop.set()
        if self._watchdog.is_alive() and self._watchdog is not threading.current_thread():
            self._watchdog.join(timeout=5)
        if self.comm.alive:
            if self._failure.first is None and not self._pending:
                self.comm.destroy()
            else:
                self.comm.abort()
        self._failure.shut_down()

    def abort(self) -> None:
        """Fail pending ops at once and close everything."""
        self._fail(DistBackendError(f"group {self.group_name!r} was aborted"))
        self._stop.set()
