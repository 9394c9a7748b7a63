"""The ``mpi`` backend: every collective is one non-blocking mpi4py buffer call, polled against
the group deadline (``_mpi_requests``). Use, the op mapping and failures: docs/mpi.md. mpi4py is
imported only when a group first uses this backend, never at ``import tensorbrain``.

>>> from tensorbrain.distributed.backends import mpi
>>> mpi.is_available() == (mpi.why_unavailable() is None)   # does not start MPI
True
"""
from __future__ import annotations

import contextlib
import itertools
import threading

import numpy as np

from ... import _xp
from .. import _mpi_lib
from .._mpi_lib import cuda_aware, is_available, why_unavailable  # noqa: F401 - mpi.X (registry)
from ..errors import DistBackendError
from . import _mpi_exit, _mpi_inline, _staging, _validate, base
from ._mpi_inline import InlineCheck
from ._mpi_requests import _install_abort_hook, world_rank_size  # noqa: F401 - the registry


class MPIBackend(InlineCheck):
    """One MPI communicator per process group (a ``Dup`` of ``COMM_WORLD`` for the world group,
    ``Create_group`` for ``new_group``). The fingerprint is attached: all-gathered, or in inline
    mode all-reduced as one check message, beside the collective (``Requests._start``).

    Args:
        store, rank, size, timeout, group_name: as for ``base.Backend``.
        global_ranks: the group's ranks in COMM_WORLD; None for 0 .. size-1 (the world group).
    """

    name = "mpi"
    fingerprint = "attached"
    #: float16 is reduced in float32; the others natively, through mpi4py's NumPy mapping
    capabilities = base.Capabilities(dtypes=(
        "float16", "bool", "float32", "float64", "int16", "int32", "int64", "int8", "uint16",
        "uint32", "uint64", "uint8"))

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str,
                 global_ranks=None):
        MPI = self._MPI = _mpi_lib.load()
        super().__init__(store, rank, size, timeout, group_name)
        world = MPI.COMM_WORLD
        self.global_ranks = list(range(size) if global_ranks is None else global_ranks)
        self._level = MPI.Query_thread()
        # SERIALIZED: one MPI call at a time from any thread, reentrant (a mismatch's follow-up
        # polls under the guard its poll holds: a Lock hung it); FUNNELED/SINGLE: main thread only.
        self._guard = threading.RLock() if self._level == MPI.THREAD_SERIALIZED else None
        # (dtype, op) -> (MPI op, dtype reduced in, post-scale, inline control word or 0)
        self._plans: dict = {}
        self._IN_PLACE = MPI.IN_PLACE
        self._init_requests()
        try:
            if self.global_ranks == list(range(world.Get_size())):
                # Our own copy of COMM_WORLD, so our messages never match the user's own MPI calls.
                self.comm = world.Dup()
            else:
                self.comm = world.Create_group(world.Get_group().Incl(self.global_ranks))
        except MPI.Exception as exc:
            raise DistBackendError(f"creating the MPI communicator of group {group_name!r} "
                                   f"(ranks {self.global_ranks}) failed: {exc.Get_error_string()}") from None
        # A private duplicate for control messages (monitored_barrier), made here because Dup is
        # collective: made later, a late rank would hold the others inside Dup past the timeout.
        self._ctl = self.comm.Dup()
        # ... and one for the collective fingerprints' persistent all-gathers (_fp_slot)
        self._fpc = self.comm.Dup()
        self._learn_peers()  # every rank's pid and host, and the group's check mode (_mpi_inline)
        if (self.comm.Get_rank(), self.comm.Get_size()) != (rank, size):
            raise DistBackendError(
                f"group {group_name!r}: MPI says this process is rank {self.comm.Get_rank()} of "
                f"{self.comm.Get_size()}, but the process group expects rank {rank} of {size}; "
                "under mpiexec let init_process_group('mpi') take rank and size from MPI")
        if world.Get_size() > 1:
            _install_abort_hook(MPI)
            _mpi_exit.watch(self)
        posts = {"all_reduce": self._allreduce, "broadcast": self._broadcast,
                 "reduce": self._reduce, "all_gather": self._gather,
                 "all_gather_into_tensor": self._gather, "gather": self._gather,
                 "scatter": self._scatter, "reduce_scatter": self._reduce_scatter,
                 "reduce_scatter_tensor": self._reduce_scatter, "all_to_all": self._alltoall,
                 "all_to_all_single": self._alltoall, "barrier": self._barrier}
        self._impls = {kind: [base.Impl("requests", None, post)] for kind, post in posts.items()}
        self._impls["all_reduce"].insert(0, base.Impl("inline", self._inline_takes,
                                                      self._allreduce_inline))

    # ***** the pipeline: kind -> [inline, requests]; the fingerprint attached to the post *****
    def execute(self, call, impl):
        """Claim the collective's sequence number, attach its fingerprint (to the next request
        posted, ``Requests._start``) and run ``impl``."""
        seq, words = self._claim(call)
        if words is not None:
            self._fp_next = words
        try:
            return impl.run(call, seq)
        except BaseException:
            self._fp_next = None  # not consumed: it raised before posting
            raise

    def _buffer(self, array, copy_in: bool = True):
        """``(buffer MPI can use, finish)``: CuPy arrays directly when MPI is CUDA-aware (after a
        stream sync, since MPI knows nothing of CUDA streams), else staged through host memory."""
        if _xp.is_cupy_array(array) and array.flags.c_contiguous and cuda_aware():
            _xp.cupy().cuda.get_current_stream().synchronize()
            return array, _staging._noop
        return _staging.stage(array, copy_in=copy_in)

    def _input(self, array):
        """The buffer MPI reads an input from (``_buffer`` without the copy-back)."""
        return self._buffer(array)[0]

    def _reduction(self, dtype, op: str):
        """``(MPI op, dtype MPI reduces in, post-scale, control word)`` for a reduction of
        ``dtype`` by ``op``; the control word carries it inside a check message, 0 when the
        check's C kernel does not reduce the pair (``_mpi_inline``). Cached: the latency path
        must not rebuild it per call."""
        plan = self._plans.get((dtype, op))
        if plan is not None:
            return plan
        MPI = self._MPI
        name = np.dtype(dtype).name
        _validate.check_reduce(op, dtype, self.capabilities.dtypes, self.name)
        if name == "bool":
            mpi_op = {"sum": MPI.LOR, "max": MPI.LOR, "bor": MPI.LOR, "prod": MPI.LAND,
                      "min": MPI.LAND, "band": MPI.LAND, "bxor": MPI.LXOR}[op]
        else:
            mpi_op = {"sum": MPI.SUM, "avg": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN,
                      "max": MPI.MAX, "band": MPI.BAND, "bor": MPI.BOR, "bxor": MPI.BXOR}[op]
            # floats: MIN/MAX with NumPy's NaN semantics when the group has them (_mpi_inline)
            reduced = "float32" if name == "float16" else name
            if self._minmax is not None and (reduced, op) in self._minmax:
                mpi_op = self._minmax[(reduced, op)]
        # float16: MPI has no portable float16 sum; a float32 copy is reduced and rounded once,
        # correctly whatever MPI's order and without overflow on the way (docs/mpi.md, "float16")
        work_dtype = np.float32 if name == "float16" else None
        plan = self._plans[(dtype, op)] = (mpi_op, work_dtype, 1.0 / self.size if op == "avg"
                                           else None, _mpi_inline.control_word(dtype, op))
        return plan

    def _reduce_buffer(self, array, op: str, copy_in: bool = True):
        """``(buffer, MPI op, finish)`` for reducing ``array`` in place."""
        mpi_op, work_dtype, scale, _ = self._reduction(array.dtype, op)
        host, write_back = self._buffer(array, copy_in=copy_in)
        if work_dtype is None and scale is None:
            return host, mpi_op, write_back
        xp = _xp.get_array_module(host)
        buf = host.astype(work_dtype) if work_dtype is not None else host

        def finish():
            if scale is not None:
                xp.multiply(buf, buf.dtype.type(scale), out=buf)
            if buf is not host:
                host[...] = buf.astype(host.dtype)
            write_back()
        return buf, mpi_op, finish

    # ***** collectives: one post each (the "requests" implementations) *****
    def _allreduce(self, call, seq):
        arrays, op, async_op = call.inputs, call.op, call.async_op
        if len(arrays) == 1:
            a = arrays[0]
            if type(a) is np.ndarray and a.flags.c_contiguous:
                mpi_op, work_dtype, scale, _ = self._reduction(a.dtype, op)
                if work_dtype is None and scale is None:  # reduce the user's array as it is
                    return self._start("all_reduce", self.comm.Iallreduce, None, async_op,
                                       args=(self._IN_PLACE, a, mpi_op), result=arrays, seq=seq)
        plans = [self._reduce_buffer(a, op) for a in arrays]

        def start():
            return [self.comm.Iallreduce(self._IN_PLACE, buf, mpi_op) for buf, mpi_op, _ in plans]
        return self._start("all_reduce", start, _staging.finisher((b, f) for b, _, f in plans),
                           async_op, result=arrays, seq=seq)

    def _broadcast(self, call, seq):
        array, root = call.inputs[0], call.root
        host, finish = self._buffer(array, copy_in=self.rank == root)
        return self._start("broadcast", lambda: self.comm.Ibcast(_raw(host), root), finish,
                           call.async_op, result=call.result, seq=seq)

    def _reduce(self, call, seq):
        """The root reduces into its array; the others send theirs and leave it as it is."""
        root, MPI = call.root, self._MPI
        buf, mpi_op, finish = self._reduce_buffer(call.inputs[0], call.op)
        if self.rank != root:
            return self._start("reduce", lambda: self.comm.Ireduce(buf, None, mpi_op, root),
                               None, call.async_op, seq=seq)
        return self._start("reduce", lambda: self.comm.Ireduce(MPI.IN_PLACE, buf, mpi_op, root),
                           finish, call.async_op, result=call.result, seq=seq)

    def _apart(self, call):
        """``(send, recv, finish)`` of a one-input, one-output call: the input as MPI can send
        it (copied when it shares memory with the output: MPI forbids aliased buffers) and the
        output's receive buffer."""
        output, send = call.outputs[0], self._input(call.inputs[0])
        if _shares_memory(send, output):
            send = send.copy()
        return (send, *self._buffer(output, copy_in=False))

    def _gather_buffer(self, send, outputs):
        """One (size, *send.shape) receive buffer on ``send``'s device, and the finish that
        copies its blocks into ``outputs``."""
        xp = _xp.get_array_module(send)
        gathered = xp.empty((self.size,) + send.shape, send.dtype)

        def finish():
            for out, block in zip(outputs, gathered):
                _copy_into(out, block)
        return gathered, finish

    def _gather(self, call, seq):
        """all_gather_into_tensor (into the output), all_gather and gather (into a
        :meth:`_gather_buffer`; gather's non-roots receive nothing)."""
        kind, root = call.kind, call.root
        if kind == "all_gather_into_tensor":
            send, recv, finish = self._apart(call)
        else:
            send, recv, finish = self._input(call.inputs[0]), None, None
            if kind == "all_gather" or self.rank == root:
                recv, finish = self._gather_buffer(send, call.outputs)

        def post():
            if kind == "gather":
                return self.comm.Igather(_raw(send), None if recv is None else _raw(recv), root)
            return self.comm.Iallgather(_raw(send), _raw(recv))
        return self._start(kind, post, finish, call.async_op, result=call.result, seq=seq)

    def _scatter(self, call, seq):
        output, inputs, root = call.outputs[0], call.inputs, call.root
        recv, finish = self._buffer(output, copy_in=False)
        packed = None
        if self.rank == root:
            direct = all(_xp.is_cupy_array(a) and a.flags.c_contiguous for a in inputs) \
                and cuda_aware()
            packed = _xp.cupy().stack(list(inputs)) if direct else \
                np.stack([_staging.stage_in(x) for x in inputs])
        return self._start("scatter", lambda: self.comm.Iscatter(
            None if packed is None else _raw(packed), _raw(recv), root), finish, call.async_op,
            result=call.result, seq=seq)

    def _reduce_scatter(self, call, seq):
        output = call.outputs[0]
        if call.kind == "reduce_scatter":
            packed = np.stack([_staging.stage_in(x) for x in call.inputs])
        else:  # reduce_scatter_tensor (the output may be the input's own block: MPI forbids it)
            packed = self._input(call.inputs[0])
            if _shares_memory(packed, output):
                packed = packed.copy()
        recv, mpi_op, finish = self._reduce_buffer(output, call.op, copy_in=False)
        if recv.dtype != packed.dtype:  # float16, reduced in float32
            packed = packed.astype(recv.dtype)
        return self._start(call.kind, lambda: self.comm.Ireduce_scatter_block(packed, recv, mpi_op),
                           finish, call.async_op, result=call.result, seq=seq)

    def _alltoall(self, call, seq):
        """all_to_all and all_to_all_single: one Ialltoallv of bytes (all_to_all's blocks packed
        into one buffer each way; all_to_all_single's rows as the checked splits say)."""
        if call.kind == "all_to_all":
            outputs = call.outputs
            sends = [_staging.stage_in(x) for x in call.inputs]
            send = np.concatenate([s.reshape(-1).view(np.uint8) for s in sends])
            s_counts, r_counts = [s.nbytes for s in sends], [o.nbytes for o in outputs]
            recv = np.empty(sum(r_counts), np.uint8)

            def finish():
                for out, offset, n in zip(outputs, _displs(r_counts), r_counts):
                    _copy_into(out, recv[offset:offset + n].view(out.dtype))
        else:
            send, recv, finish = self._apart(call)
            out_rows, in_rows = call.rows
            s_counts = [n * _validate.row_bytes(send) for n in in_rows]
            r_counts = [n * _validate.row_bytes(recv) for n in out_rows]
        byte = self._MPI.BYTE
        return self._start(call.kind, lambda: self.comm.Ialltoallv(
            [send, (s_counts, _displs(s_counts)), byte],
            [recv, (r_counts, _displs(r_counts)), byte]), finish, call.async_op,
            result=call.result, seq=seq)

    def _barrier(self, call, seq):
        return self._start("barrier", lambda: self.comm.Ibarrier(), None, call.async_op, seq=seq)

    # ***** point to point *****
    def recv(self, array, src: int | None, tag: int = 0, *, async_op: bool = True):
        """``Irecv`` (``src=None``: ``MPI.ANY_SOURCE``); see ``Backend.recv``."""
        MPI = self._MPI
        recv, finish = self._buffer(array, copy_in=False)
        self._check_tag(tag)
        source = MPI.ANY_SOURCE if src is None else src
        status = MPI.Status()

        def check_and_finish():
            # MPI fills a longer buffer silently (a shorter one is a truncation error): a
            # message of another size than the buffer is a mismatched send/recv pair
            got = status.Get_count(MPI.BYTE)
            if got != recv.nbytes:
                raise DistBackendError(
                    f"MPI recv of group {self.group_name!r} on rank {self.rank}: rank "
                    f"{status.Get_source()} sent {got} bytes (tag {tag}) but the receive buffer "
                    f"holds {recv.nbytes} ({recv.dtype} x {recv.size}); send and recv must use "
                    "the same shape and dtype")
            finish()
        return self._start("recv", lambda: self.comm.Irecv(_raw(recv), source, tag),
                           check_and_finish, async_op, status=status)

    def batch_p2p(self, ops, *, async_op: bool = True, op: str = "batch_isend_irecv"):
        """Every Isend/Irecv posted at once, one Work for all (as torch's coalesced batch); mpi4py
        keeps each request's buffer alive until it completes."""
        MPI, posts, staged = self._MPI, [], []
        for kind, array, peer, tag in ops:
            self._check_tag(tag)
            if kind == "send":
                buf = self._input(array)
                posts.append(lambda b=buf, p=peer, t=tag: self.comm.Isend(_raw(b), p, t))
            else:
                buf, fin = self._buffer(array, copy_in=False)
                staged.append((buf, fin))
                src = MPI.ANY_SOURCE if peer is None else peer
                posts.append(lambda b=buf, p=src, t=tag: self.comm.Irecv(_raw(b), p, t))
        return self._start(op, lambda: [post() for post in posts], _staging.finisher(staged),
                            async_op)

    # ***** lifetime *****
    def shutdown(self) -> None:
        """Wait for pending requests, then free the communicator unless the group failed."""
        for work in list(self._pending):
            with contextlib.suppress(Exception):  # already reported to whoever waits on it
                work.wait()
        comm, self.comm = getattr(self, "comm", None), None
        if comm is not None and self._failure.first is None and not self._failure.closed:
            self._failure.closed = True
            for slots in self._fp_slots.values():
                for _, _, request, _ in slots:
                    request.Free()  # idle: every collective above has finished
            for _, request, _, _ in self._fp_msgs:
                request.Free()
            comm.Free()
            self._ctl.Free()
            self._fpc.Free()

    def abort(self) -> None:
        """Fail pending ops at once. MPI cannot cancel a started collective or free a
        communicator with operations in flight, so the communicator is left to MPI_Finalize."""
        err = self._failure.abort()
        for work in list(self._pending):
            self._settle(work, exc=err)


# ***** helpers *****
def _raw(array):
    """A byte-typed buffer spec: data movement needs no MPI datatype for the dtype (float16 and
    bool go too). No count: mpi4py derives it, per rank for gather/scatter-style buffers."""
    return [array, _mpi_lib.load().BYTE]


def _copy_into(out, block) -> None:
    xp = _xp.get_array_module(out)
    if xp is np:
        np.copyto(out, _xp.to_numpy(block).reshape(out.shape))
    else:
        out[...] = xp.asarray(block).reshape(out.shape)


def _shares_memory(a, b) -> bool:
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.may_share_memory(a, b)


def _displs(counts) -> list:
    """Each block's offset: the sum of the counts before it."""
    return [0, *itertools.accumulate(counts)][:-1]
