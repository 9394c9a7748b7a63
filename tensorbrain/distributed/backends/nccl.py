"""The ``nccl`` backend: CuPy arrays reduced by NCCL on a communication stream, one GPU per
process. NCCL is opened at run time by ``tensorbrain._C.nccl`` (``_nccl_lib`` says which file);
use, stream order, the watchdog and which ops are NCCL groups: docs/nccl.md. Without a GPU,
``why_unavailable()`` says which part is missing, and creating the backend raises it.

>>> from tensorbrain.distributed.backends import nccl
>>> nccl.is_available() == (nccl.why_unavailable() is None)
True
"""
from __future__ import annotations

import time
from functools import partial

import numpy as np

from ... import _xp
from .. import _fingerprint as FP
from .. import _nccl_lib
from .._nccl_lib import is_available, why_unavailable  # noqa: F401 - nccl.X (the registry)
from ..errors import DistBackendError, DistError, DistStoreError
from . import _validate, base
from ._nccl_work import Watchdog, _NCCLWork
from ._staging import finisher

_UID_KEY = "nccl/uid"
_INT8 = 0  # ncclInt8: data movement in bytes


class NCCLBackend(base.Backend):
    """One NCCL communicator on the current CUDA device. The fingerprint is exchanged: in a group
    of more than one rank, all-gathered on the host over a tcp mesh of the group's own and
    compared before the collective is launched (NCCL may hang on, or silently reduce, mismatched
    calls). The host then waits for the peers' hosts to reach the same call, not for the GPU.

    Args:
        store, rank, size, timeout, group_name: as for ``base.Backend``.
        global_ranks: the group's ranks in the world; None for the world group.
    """

    name = "nccl"
    fingerprint = "exchanged"
    capabilities = base.Capabilities(
        ops=tuple(o for o in _validate.REDUCE_OPS if o not in _validate.BITWISE),
        dtypes=("bool", "int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                "bfloat16", "float32", "float64"),
        refused="NCCL has no bitwise reductions: ReduceOp.{OP} is not supported on the nccl "
                "backend (torch's NCCL refuses it too)")

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str,
                 global_ranks=None):
        super().__init__(store, rank, size, timeout, group_name)
        self._nccl, self._cp = self._runtime(store)
        cp = self._cp
        self.device = cp.cuda.Device()
        self._p2p_seq = 0  # point-to-point ops (named in their errors)
        uid = self._exchange_unique_id(store)
        self._args: dict = {}   # (dtype, op) -> NCCL's codes (np.dtype(...).name costs us a call)
        with self.device:
            self.stream = cp.cuda.Stream(non_blocking=True)
            # One event orders the stream after the caller's: a wait takes the event's state at
            # the call, so the next record may reuse it (saves creating one per collective).
            self._ready = cp.cuda.Event(disable_timing=True)
            try:
                self.comm = self._nccl.Communicator(size, uid, rank)
            except self._nccl.NcclError as exc:
                raise DistBackendError(f"creating the NCCL communicator of group {group_name!r} "
                                       f"(rank {rank} of {size}, device {self.device.id}) "
                                       f"failed: {exc}") from None
        self.watchdog = Watchdog(self._nccl, self.comm, self._failure, self.timeout)
        #: where the ranks' fingerprints meet before each collective (None in a group of one)
        self._checks = None
        if size > 1:
            from ..store import PrefixStore
            from .tcp import TCPBackend
            try:
                self._checks = TCPBackend(PrefixStore("nccl-checks", store), rank, size,
                                          self.timeout, f"{group_name}-checks")
            except BaseException:
                self.comm.abort()
                self.watchdog.stop()
                raise
        calls = {"all_reduce": self._allreduce, "broadcast": self._broadcast,
                 "reduce": self._broadcast, "all_gather": self._allgather,
                 "all_gather_into_tensor": self._allgather, "gather": self._rooted,
                 "scatter": self._rooted, "reduce_scatter": self._reduce_scatter,
                 "reduce_scatter_tensor": self._reduce_scatter, "all_to_all": self._alltoall,
                 "all_to_all_single": self._alltoall, "barrier": self._barrier}
        self._impls = {kind: [base.Impl("group call", None, run)] for kind, run in calls.items()}

    # ***** the pipeline: the fingerprint exchanged first, then one group call *****
    def execute(self, call, impl):
        """Claim the collective's sequence number, exchange and compare its fingerprint, check
        the arrays' device (:meth:`_check`), then run ``impl``."""
        seq, words = self._claim(call)
        if words is not None:
            self._verify(self._exchange(words, seq, FP.FAMILY.get(call.kind, call.kind)))
        kind, ins, outs = call.kind, call.inputs, call.outputs
        self._check(kind, *(ins if kind in ("all_reduce", "broadcast", "reduce") else
                            [*ins, *outs] if kind in ("all_gather", "all_gather_into_tensor",
                                                      "gather") else [*outs, *ins]),
                    order=call.async_op)
        return impl.run(call, seq)

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
    def _check(self, op: str, *arrays, order: bool = True) -> None:
        """Validate; with ``order`` (an op for the communication stream) order that stream after
        the caller's current stream, so the staging copies below and NCCL itself read inputs
        only once they are produced."""
        self._failure.check(op)
        for a in arrays:
            if not isinstance(a, self._cp.ndarray):
                raise ValueError(f"the nccl backend takes CUDA tensors; {op} got a "
                                 f"{type(a).__name__} on the CPU. Move it with .cuda() or use "
                                 "backend='tcp'/'mpi' for CPU tensors")
            if a.device.id != self.device.id:
                raise ValueError(f"{op}: array is on cuda:{a.device.id} but group "
                                 f"{self.group_name!r} communicates on cuda:{self.device.id}; "
                                 "call tb.cuda.set_device(local_rank) before init_process_group")
        if order:
            with self.device:
                self._ready.record(self._cp.cuda.get_current_stream())
                self.stream.wait_event(self._ready)

    def _on(self, call):
        """The stream ``call`` runs on: the caller's current stream for a synchronous collective
        (as torch's ProcessGroupNCCL since 2.8: stream order is then all the ordering needed, no
        events), else the communication stream (ordered after the caller's by `_check`)."""
        return self.stream if call.async_op else self._cp.cuda.get_current_stream()

    def _launch(self, op: str, body, keep, result, async_op: bool, after=None, seq=None,
                stream=None):
        """Run ``body(stream_ptr)`` (NCCL calls), then ``after()`` (copy-outs), on ``stream`` (the
        communication stream by default, already ordered after the caller's by `_check`) and
        record a done event there for the watchdog. On the communication stream a synchronous op
        makes the caller's stream wait for it. ``seq``: the collective's number; None for a
        point-to-point op (its own counter)."""
        cp = self._cp
        if seq is None:
            seq = self._p2p_seq
            self._p2p_seq = seq + 1
        stream = self.stream if stream is None else stream
        with self.device:
            try:
                with stream:
                    body(stream.ptr)
                    if after is not None:
                        after()
            except self._nccl.NcclError as exc:
                err = DistBackendError(f"NCCL {op} (seq {seq}) of group {self.group_name!r} "
                                       f"failed on rank {self.rank}: {exc}")
                self.watchdog.fail(err)
                raise err from None
            done = cp.cuda.Event(disable_timing=True)
            done.record(stream)
        work = _NCCLWork(self.watchdog, cp, op, seq, done, keep, result)
        self.watchdog.add(work)
        if not async_op and stream is self.stream:
            work.wait()
        return work

    def _exchange(self, words, seq: int, op: str):
        """All-gather this rank's fingerprint ``words`` on the host, over the group's tcp mesh
        (``_checks``), and return every rank's words, one row per rank, before the collective is
        launched (why: docs/reliability.md). That waits for the peers to reach the same call,
        bounded by the group timeout, but not for the GPU: an exchange through NCCL would read
        its result back, which waits for everything queued on the stream before it. A failure
        here (a peer gone or late) is worded as the guarded collective's, ``op`` number ``seq``,
        and fails the group as an NCCL error would."""
        self._failure.check("collective")
        checks = self._checks
        assert checks is not None, "a group of one exchanges no fingerprint (_claim)"
        words = np.ascontiguousarray(words, np.int64).reshape(-1)
        rows = np.empty((self.size, words.size), np.int64)
        try:
            checks.allgather_into(rows.reshape(-1), words, async_op=False)
        except DistError as exc:
            err = type(exc)(f"{op} (seq {seq}) of group {self.group_name!r} on rank "
                            f"{self.rank}: comparing the ranks' calls before NCCL runs failed: "
                            f"{exc}")
            self.watchdog.fail(err)
            raise err from None
        return rows

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
        """NCCL's (dtype, reduce op) codes (the pipeline's check accepted the pair)."""
        args = self._args.get((dtype, op))
        if args is None:
            args = self._args[(dtype, op)] = self._nccl_args(dtype, op)
        return args

    def _nccl_args(self, dtype, op: str):
        name = np.dtype(dtype).name
        if name == "bool":
            # bool bytes are 0/1: max is "or", min is "and" (torch reduces bool the same way).
            return self._nccl.DTYPES["uint8"], self._nccl.RED_OPS[
                {"sum": "max", "max": "max", "prod": "min", "min": "min"}[op]]
        # The binding names ncclProd "product" (nccl.h's spelling); ours is "prod".
        return self._nccl.DTYPES[name], self._nccl.RED_OPS["product" if op == "prod" else op]

    def _contiguous(self, array, stream=None):
        """``(contiguous array, copy_back or None)``; the copy runs on ``stream`` (default: the
        communication stream)."""
        if array.flags.c_contiguous:
            return array, None
        cp = self._cp
        with self.stream if stream is None else stream:
            tmp = cp.ascontiguousarray(array)

        def copy_back():
            array[...] = tmp
        return tmp, copy_back

    # ***** collectives: one group call each (the "group call" implementations) *****
    def _allreduce(self, call, seq):
        arrays, comm, on = call.inputs, self.comm, self._on(call)
        staged = [self._contiguous(a, on) for a in arrays]
        calls = [partial(comm.all_reduce, b.data.ptr, b.data.ptr, b.size,
                         *self._reduce_args(b.dtype, call.op)) for b, _ in staged]
        body = calls[0] if len(calls) == 1 else self._group(calls)
        return self._launch("all_reduce", body, (arrays, staged), call.result, call.async_op,
                            after=finisher(staged), seq=seq, stream=on)

    def _broadcast(self, call, seq):
        """broadcast and reduce: one NCCL call in place on the array (reduce's result is the
        root's only)."""
        array, root, comm, on = call.inputs[0], call.root, self.comm, self._on(call)
        buf, back = self._contiguous(array, on)
        ptr = buf.data.ptr
        if call.kind == "broadcast":
            body = partial(comm.broadcast, ptr, ptr, buf.nbytes, _INT8, root)
        else:
            dt, red = self._reduce_args(array.dtype, call.op)
            body = partial(comm.reduce, ptr, ptr, buf.size, dt, red, root)
            back = back if self.rank == root else None
        return self._launch(call.kind, body, (array, buf), call.result, call.async_op, after=back,
                            seq=seq, stream=on)

    def _allgather(self, call, seq):
        """all_gather_into_tensor: one ncclAllGather into the output; all_gather: into a scratch
        buffer whose blocks are then copied into the list (on the stream)."""
        input, outputs, on = call.inputs[0], call.outputs, self._on(call)
        send, _ = self._contiguous(input, on)
        if call.kind == "all_gather":
            with on:
                recv = self._cp.empty((self.size,) + send.shape, send.dtype)

            def after():
                for out, block in zip(outputs, recv):
                    out[...] = block.reshape(out.shape)
        else:
            recv, after = self._contiguous(outputs[0], on)
        return self._launch(call.kind, lambda s: self.comm.all_gather(
            send.data.ptr, recv.data.ptr, send.nbytes, _INT8, s), (input, send, recv, outputs),
            call.result, call.async_op, after=after, seq=seq, stream=on)

    def _rooted(self, call, seq):
        """gather and scatter, which NCCL lacks: the root receives every rank's block (sends each
        rank its block) in one NCCL group, copying its own; the others send (receive) theirs."""
        gather, root, comm, on = call.kind == "gather", call.root, self.comm, self._on(call)
        mine, back = self._contiguous(call.inputs[0] if gather else call.outputs[0], on)
        blocks: list = []
        if self.rank != root:
            calls = [partial(comm.send if gather else comm.recv, mine.data.ptr, mine.nbytes,
                             _INT8, root)]
        else:
            blocks = [self._contiguous(a, on) for a in (call.outputs if gather else call.inputs)]
            calls = [partial(_copy, *((buf, mine) if gather else (mine, buf))) if peer == root
                     else partial(comm.recv if gather else comm.send, buf.data.ptr, buf.nbytes,
                                  _INT8, peer)
                     for peer, (buf, _) in enumerate(blocks)]
        return self._launch(call.kind, self._group(calls), (call.inputs, call.outputs, mine,
                                                             blocks), call.result, call.async_op,
                            after=finisher(blocks) if gather else back, seq=seq, stream=on)

    def _reduce_scatter(self, call, seq):
        output, inputs, on = call.outputs[0], call.inputs, self._on(call)
        if call.kind == "reduce_scatter":
            with on:
                packed = self._cp.stack([x.reshape(output.shape) for x in inputs])
        else:  # reduce_scatter_tensor: one flat input
            packed, _ = self._contiguous(inputs[0], on)
        dt, red = self._reduce_args(output.dtype, call.op)
        recv, back = self._contiguous(output, on)
        return self._launch(call.kind, lambda s: self.comm.reduce_scatter(
            packed.data.ptr, recv.data.ptr, recv.size, dt, red, s),
            (inputs, packed, output, recv), call.result, call.async_op, after=back, seq=seq,
            stream=on)

    def _alltoall(self, call, seq):
        """all_to_all (a block per peer, this rank's own copied) and all_to_all_single (rows of
        one array per peer, as the checked splits say): a send and a receive per peer in one
        NCCL group."""
        on = self._on(call)
        if call.kind == "all_to_all":
            sends = [self._contiguous(x, on)[0] for x in call.inputs]
            recvs = [self._contiguous(o, on) for o in call.outputs]
            blocks = [(s.data.ptr, s.nbytes, r.data.ptr, r.nbytes) for s, (r, _) in zip(sends, recvs)]
            keep, after = (sends, recvs), finisher(recvs)
        else:
            send, _ = self._contiguous(call.inputs[0], on)
            recv, after = self._contiguous(call.outputs[0], on)
            out_rows, in_rows = call.rows
            s_n = [k * _validate.row_bytes(send) for k in in_rows]
            r_n = [k * _validate.row_bytes(recv) for k in out_rows]
            s_off, r_off = np.cumsum([0] + s_n[:-1]), np.cumsum([0] + r_n[:-1])
            blocks = [(send.data.ptr + int(s_off[j]), s_n[j], recv.data.ptr + int(r_off[j]), r_n[j])
                      for j in range(self.size)]
            keep = (send, recv)
        comm, calls = self.comm, []
        for peer, (s_ptr, s_bytes, r_ptr, r_bytes) in enumerate(blocks):
            if peer == self.rank and call.kind == "all_to_all":
                calls.append(partial(_copy, recvs[peer][0], sends[peer]))
                continue
            if s_bytes:
                calls.append(partial(comm.send, s_ptr, s_bytes, _INT8, peer))
            if r_bytes:
                calls.append(partial(comm.recv, r_ptr, r_bytes, _INT8, peer))
        return self._launch(call.kind, self._group(calls), (call.inputs, call.outputs, keep),
                            call.result, call.async_op, after=after, seq=seq, stream=on)

    def _barrier(self, call, seq):
        """An all_reduce of one int32 on the device (as torch's NCCL barrier); waiting on it
        blocks the host until every rank's barrier finished."""
        with self.device:
            token = self._cp.zeros(1, self._cp.int32)
        work = self._launch("barrier", lambda s: self.comm.all_reduce(
            token.data.ptr, token.data.ptr, 1, self._nccl.DTYPES["int32"],
            self._nccl.RED_OPS["sum"], s), token, None, True, seq=seq, stream=self._on(call))
        if not call.async_op:
            work.wait(timeout=self.timeout)
        return work

    # ***** point to point *****
    def recv(self, array, src: int | None, tag: int = 0, *, async_op: bool = True):
        """``ncclRecv``; ``src=None`` is refused (NCCL has no any-source receive)."""
        return self._p2p("recv", [("recv", array, src)], src, async_op)

    def batch_p2p(self, ops, *, async_op: bool = True, op: str = "batch_isend_irecv"):
        """``ncclSend``/``ncclRecv`` in one NCCL group (one call for a single send); NCCL has no
        tags (messages between two ranks match in issue order)."""
        return self._p2p(op, [p[:3] for p in ops], None, async_op)

    def _p2p(self, op: str, ops, result, async_op: bool):
        """Launch ``(kind, array, peer)`` sends and receives as point-to-point op ``op``: one
        NCCL call, or several in one NCCL group."""
        comm, calls, keep, backs = self.comm, [], [], []
        single = op in ("send", "recv")
        for kind, array, peer in ops:
            self._check(op if single else f"{op} ({kind})", array)
            if peer is None:
                raise ValueError("NCCL cannot receive from any source: pass src (torch's NCCL "
                                 "backend refuses recv without a source too)")
            buf, back = self._contiguous(array)
            keep.append((array, buf))
            calls.append(partial(comm.send if kind == "send" else comm.recv, buf.data.ptr,
                                 buf.nbytes, _INT8, peer))
            if kind == "recv":
                backs.append((buf, back))
        return self._launch(op, calls[0] if single else self._group(calls),
                            keep, result, async_op, after=finisher(backs))

    # ***** lifetime *****
    def shutdown(self) -> None:
        """Let the watchdog finish pending work (up to the timeout); destroy, or abort, the comm."""
        watchdog = self.watchdog
        deadline = time.monotonic() + self.timeout
        while watchdog.pending and self._failure.first is None and time.monotonic() < deadline:
            for work in list(watchdog.pending):
                watchdog.poll(work)
            time.sleep(1e-3)
        watchdog.stop()
        if self._checks is not None:
            self._checks.shutdown()
        if self.comm.alive:
            if self._failure.first is None and not watchdog.pending:
                self.comm.destroy()
            else:
                self.comm.abort()
        self._failure.closed = True

    def abort(self) -> None:
        """Fail every pending Work at once and stop the watchdog without joining it."""
        self.watchdog.fail(DistBackendError(f"group {self.group_name!r} was aborted"))
        self.watchdog.stop(join=False)
        if self._checks is not None:
            self._checks.abort()


def _copy(dst, src, stream=None) -> None:
    """This rank's own block of a gather/scatter/all_to_all (a call of its NCCL group)."""
    dst[...] = src.reshape(dst.shape)
