"""The mpi backend's runtime and request machinery (finding MPI: ``_mpi_lib``): non-blocking
requests polled against the group's deadline, so every op honours the group timeout and
``async_op=True`` needs no thread (any thread level MPI granted works; what polling costs:
docs/mpi.md, "Performance"), the fingerprint exchange, and the control channel.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from contextlib import nullcontext
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import numpy as np

from ... import _config
from .. import _mpi_lib, _work
from . import _mpi_exit
from ..errors import DistBackendError, DistTimeoutError
from .base import Backend

# Polling: spin on Test for the first _SPINS polls, then nap between polls (a pure spin was up
# to 2x slower with 4 ranks on 2 cores: ranks steal the cores of the peers they wait for).
_SPINS = 2000
_NAP_S = 2e-5
# Synchronous ops poll this many times before building a polling Work (an 8-byte all_reduce on 2
# ranks completes within a few polls when both ranks arrive together).
_QUICK_POLLS = 64
_QUICK_POLLS_FP = 2 * _QUICK_POLLS  # with a fingerprint to check beside it
_NULL = nullcontext()  # reusable: ``with self._guard or _NULL`` costs no allocation per call
# Persistent fingerprint all-gathers per group, used in turn (see Requests._fp_slot).
_FP_SLOTS = 16
# After a mismatch in inline mode, how long the ranks wait for each other's calls (the error is
# raised either way; this only decides how much it can say).
_FOLLOW_UP_S = 10.0


def world_rank_size() -> tuple[int, int]:
    """``(rank, size)`` of ``MPI_COMM_WORLD``: what ``init_process_group('mpi')`` uses instead of a
    store. A program started without ``mpiexec`` is a world of one (an MPI "singleton"), unless
    another launcher (tbrun, torchrun, srun without PMI) says the job has more processes: then
    every process would silently be alone, so that is an error."""
    world = _mpi_lib.load().COMM_WORLD
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
    that the other ranks wait forever in their next collective (mpi4py's
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
            unlink_mpich_segments()
            MPI.COMM_WORLD.Abort(1)

    sys.excepthook = hook


def unlink_mpich_segments() -> list:
    """Remove the names of the MPICH shared-memory segments this process has mapped
    (``/dev/shm/mpich_shm_*``), just before ``MPI_Abort``: MPICH unlinks them when a job ends
    normally but not on abort, so every aborted job left 2 MiB in /dev/shm. Every rank mapped
    them at ``MPI_Init``; removing a name does not unmap anything. Returns the paths removed."""
    removed: list[str] = []
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split(None, 5)[-1].strip() for line in maps
                     if "/dev/shm/mpich_shm_" in line}
    except OSError:
        return removed
    for path in sorted(paths):
        if path.endswith(" (deleted)"):
            continue
        with contextlib.suppress(OSError):
            os.unlink(path)
            removed.append(path)
    return removed


# ***** requests *****
class _MPIWork(_work.Work):
    """A `Work` completed by polling its MPI requests (from ``wait``/``is_completed``)."""

    __slots__ = ("_backend", "_requests", "_finish", "_deadline", "_status", "_fp")

    def __init__(self, backend, op, seq, requests, finish, status=None, fp=None):
        super().__init__(op, seq, backend.group_name)
        self._backend, self._requests, self._finish = backend, requests, finish
        self._deadline = time.monotonic() + backend.timeout
        self._status = status
        self._fp = fp  # (buffer, rows, request, slot) of the fingerprint, until it is checked

    def wait(self, timeout: Any = None) -> bool:
        """Poll until the op finishes (its error is raised here), the group timeout passes
        (`DistTimeoutError`, the group is then unusable) or ``timeout`` seconds pass
        (`DistTimeoutError`; the op goes on and can be waited for again)."""
        if not self._done:
            if isinstance(timeout, timedelta):
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


class Requests(Backend):
    """Posting and completing MPI requests, and the fingerprints that travel beside them: the
    layer of ``MPIBackend`` on ``Backend`` (whose rank, size, failure state and Verifier it uses)."""

    # ***** required: set by MPIBackend.__init__ *****
    _MPI: Any                    # mpi4py's MPI module
    comm: Any                    # the group's communicator; _ctl, _fpc: private duplicates
    _ctl: Any
    _fpc: Any
    _level: int                  # the thread level MPI granted
    _guard: Any                  # an RLock under THREAD_SERIALIZED, else None
    # ... and by InlineCheck._learn_peers
    _fp_inline: bool             # the group checks collectives inline (_mpi_inline)
    _fp_msgs: list               # inline mode: the check messages' persistent all-reduces
    _peers: np.ndarray           # (pid, host key, detail, inline, minmax) per rank
    #: the fingerprint words the next posted collective carries (MPIBackend.execute)
    _fp_next: Any = None

    if TYPE_CHECKING:  # _mpi_inline.InlineCheck's methods (it subclasses this; declared only)
        def _fp_message(self, words) -> tuple: ...
        def _fp_mismatch(self, op, seq, words) -> None: ...

    def _init_requests(self) -> None:
        """This layer's own state (MPIBackend.__init__ calls it before any MPI call)."""
        self._pending: set = set()  # async Works not completed yet
        self._settle_lock, self._check_lock = threading.Lock(), threading.Lock()
        self._p2p_seq = 0  # point-to-point ops (collectives: MPIBackend.execute)
        self._collectives = 0  # posted on this group (a peer's exit notice is compared to it)
        self._exited: dict = {}  # rank -> (collectives it posted, pid): peers that exited
        self._exit_check_at = 0.0  # when to look for peers' exit notices next (_mpi_exit)
        self._fp_slots: dict = {}  # words length -> persistent all-gathers (_fp_slot)
        self._fp_busy = [False] * _FP_SLOTS  # per slot: started and not yet checked
        self._fp_owner: list = [None] * _FP_SLOTS  # per slot: the Work that checks it
        self._fp_n = 0  # fingerprints posted so far (the next slot: n % _FP_SLOTS)

    # ***** who is who: a timeout names a same-host rank that is stopped or dead *****
    def _silent_peers(self) -> str:
        """'; rank 2 is stopped (...)' for the same-host ranks /proc says are not running."""
        from .._liveness import proc_state
        peers = self._peers
        found = [f"rank {j} {state}" for j in range(self.size)
                 if j != self.rank and peers[j, 1] == peers[self.rank, 1]
                 for state in [proc_state(int(peers[j, 0]))] if state]
        return "".join(f"; {f}" for f in found)

    # ***** plumbing *****
    def _may_post(self, op: str) -> None:
        """Raise unless ``op`` may be posted now: the group is usable, and this thread may call
        MPI at the thread level MPI granted."""
        failure = self._failure
        if failure.first is not None or failure.closed:
            failure.check(op)
        if self._level < 2 and not self._MPI.Is_thread_main():  # 2: THREAD_SERIALIZED
            names = {0: "THREAD_SINGLE", 1: "THREAD_FUNNELED"}
            raise DistBackendError(
                f"MPI granted {names.get(self._level, self._level)}, so only the main thread may "
                f"call MPI, but {threading.current_thread().name!r} called the {self.group_name!r} "
                "group; import mpi4py with mpi4py.rc.thread_level = 'multiple' (the default)")

    def _interrupted(self, op: str, seq: int, why: str = "; MPI cannot cancel it") -> None:
        """Ctrl-C during ``op``: MPI cannot cancel it, so the group is poisoned (the caller
        re-raises the KeyboardInterrupt)."""
        self._failure.record(self._failure.interrupted(f"MPI {op}", seq, why))

    def _fail(self, op: str, seq: int, exc: BaseException) -> BaseException:
        MPI = self._MPI
        if isinstance(exc, MPI.Exception):
            exc = DistBackendError(f"MPI {op} (seq {seq}) of group {self.group_name!r} failed on "
                                   f"rank {self.rank}: {exc.Get_error_string().strip()}")
        return self._failure.record(exc)

    def _start(self, op: str, start, finish=None, async_op: bool = True, status=None,
               args=(), result=None, seq: int | None = None):
        """Post the requests ``start(*args)`` returns; ``finish()`` (copies back) runs once they
        complete, then the Work completes with ``result``. ``seq``: the collective's number
        (``MPIBackend.execute``); None for a point-to-point op (its own counter)."""
        self._may_post(op)
        if seq is None:
            seq = self._p2p_seq
            self._p2p_seq = seq + 1
        else:
            self._collectives += 1  # posted on this group (a peer's exit notice is compared to it)
        MPI = self._MPI
        fp, self._fp_next = self._fp_next, None
        if fp is not None:  # the fingerprint travels beside the collective (a persistent
            fp = self._fp_slot(fp)  # all-gather on its own communicator)
        guard = self._guard or _NULL
        try:
            with guard:
                if fp is not None:
                    fp[2].Start()
                requests = start(*args)
            if not async_op and status is None:
                # The latency path: a small op usually completes within a few polls; finishing it
                # here skips the polling object (measured ~2 us of the ~3 us a call costs us).
                single = type(requests) is not list
                for _ in range(_QUICK_POLLS if fp is None else _QUICK_POLLS_FP):
                    with guard:
                        if fp is not None and fp[2].Test():
                            self._fp_check(op, seq, fp)  # raises on a mismatch
                            fp = None
                        done = fp is None and (requests.Test() if single
                                               else MPI.Request.Testall(requests))
                    if done:
                        if finish is not None:
                            finish()
                        return _work.completed(op, result, None, seq, self.group_name)
        except MPI.Exception as exc:
            raise self._fail(op, seq, exc) from None
        except KeyboardInterrupt:
            self._interrupted(op, seq)
            raise
        return self._track(op, seq, requests, finish, async_op, status, fp, result)

    def _track(self, op, seq, requests, finish, async_op, status=None, fp=None, result=None):
        """The Work of requests that did not finish at once: polled by ``wait`` (async_op) or
        here, against the group deadline."""
        work = _MPIWork(self, op, seq, requests if type(requests) is list else [requests],
                        finish, status, fp)
        if fp is not None:
            self._fp_owner[fp[3]] = work
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
        except KeyboardInterrupt:
            self._interrupted(work.op, work.seq)
            raise

    def _poll_until(self, work: _MPIWork, deadline: float | None) -> None:
        MPI = self._MPI
        requests, spins = work._requests, 0
        limit = work._deadline if deadline is None else min(deadline, work._deadline)
        while True:
            try:
                with self._guard or _NULL:
                    fp = work._fp
                    if fp is not None and fp[2].Test():
                        # checked as soon as it arrives: a mismatched collective may never
                        # finish, and the mismatch is reported now, not at the timeout
                        self._fp_check_once(work, fp)
                    done = work._fp is None and (
                        requests[0].Test(work._status) if len(requests) == 1
                        else MPI.Request.Testall(requests))
            except MPI.Exception as exc:
                self._settle(work, exc=self._fail(work.op, work.seq, exc))
                return
            except DistBackendError as exc:  # the fingerprints differ (recorded by _fp_check)
                self._settle(work, exc=exc)
                return
            if done:
                self._settle(work)
                return
            if self._failure.first is not None:
                # the group failed after this op was posted (a mismatch or timeout seen in
                # another op): MPI cannot cancel it and the peers that raised may never post
                # it; waiting for the group timeout hid the reason and, by delaying this rank,
                # timed out its peers' next collective in another group
                self._settle(work, exc=self._failure.unusable(work.op, work.seq))
                return
            now = time.monotonic()
            if spins > _SPINS and now >= self._exit_check_at:
                self._exit_check_at = now + _mpi_exit.CHECK_S
                with self._guard or _NULL:
                    gone = _mpi_exit.exited_peer(self, work.op, work.seq)
                if gone is not None:
                    self._settle(work, exc=self._failure.record(gone))
                    return
            if now >= limit:
                if now >= work._deadline:
                    self._settle(work, exc=self._fail(work.op, work.seq, DistTimeoutError(
                        f"MPI {work.op} (seq {work.seq}) of group {self.group_name!r} did not "
                        f"finish within the group timeout of {self.timeout:g} s on rank "
                        f"{self.rank}{self._silent_peers()}: a peer never joined it (different "
                        "collectives or order on some rank?); MPI cannot cancel it, so this "
                        "group is unusable")))
                return
            spins += 1
            if spins > _SPINS:
                time.sleep(_NAP_S)

    def _fp_check_once(self, work: _MPIWork, fp) -> None:
        """Check ``work``'s fingerprint once however many threads poll the Work (``wait`` from
        several threads, or a thread's ``wait`` while posting reuses the Work's slot): a second
        check ran a second mismatch follow-up, whose all-gather no peer joins, so that thread
        waited the follow-up limit (10 s) and the peers' next collective could time out. A
        failed check settles the Work before another poller can see the fingerprint cleared
        (it would complete the Work with the unreduced payload)."""
        with self._check_lock:
            if work._fp is not fp:
                return  # checked by another thread: passed, or failed and settled the Work
            try:
                self._fp_check(work.op, work.seq, fp)
            except DistBackendError as exc:
                self._settle(work, exc=exc)
                raise
            finally:
                work._fp = None

    def _settle(self, work: _MPIWork, exc: BaseException | None = None) -> None:
        with self._settle_lock:  # two threads may poll one Work: complete it once
            if not work._requests:
                return
            work._requests = ()
        result = work._result
        if exc is None and work._finish is not None:
            try:
                work._finish()
            except BaseException as err:  # noqa: BLE001 - a failed copy-back is the op's error
                exc = err
        if exc is None and work._status is not None:
            result = work._status.Get_source()
        self._pending.discard(work)
        work._complete(result, exc)

    def monitored_barrier(self, timeout: float, wait_all_ranks: bool = False) -> None:
        """``dist.monitored_barrier`` over MPI: each rank sends a token to rank 0, which answers
        with the verdict (MPI has no shared store to look in), on the private control
        communicator, so it never matches user messages."""
        MPI = self._MPI
        seq = self._mb_seq
        self._mb_seq = seq + 1
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
        if not self._poll(self._ctl.Irecv(verdict, 0, tag), deadline + 5.0):
            raise DistTimeoutError(f"monitored_barrier of group {self.group_name!r}: no verdict "
                                   f"from rank 0 within {timeout + 5.0:g} s")
        if verdict[0]:
            raise DistTimeoutError(
                f"monitored_barrier of group {self.group_name!r} failed: rank 0 reports rank(s) "
                f"{verdict[1:1 + verdict[0]].tolist()} did not arrive")

    # ***** the fingerprint beside each collective (MPIBackend.execute attaches it) *****
    def _fp_slot(self, words):
        """``(buffer, rows or words, request, slot)``: the next persistent all-gather (or, in
        inline mode, all-reduce of a check message), loaded with ``words``. The collective is
        posted right after it, both non-blocking, so the check costs no extra round trip; the
        group's Verifier checks the rows, when they differ, before the collective's Work
        reports success (it raises on a mismatch, failing the Work and the group). MPI never
        writes past a receive buffer (a longer message is a truncation error), so posting a
        mismatched collective before the check is safe; it is left pending in the unusable
        group.

        The all-gathers are persistent requests (MPI 4 ``MPI_Allgather_init``) on a private
        communicator, :data:`_FP_SLOTS` of them used in turn, the same on every rank (the n-th
        fingerprint of a group uses slot n % _FP_SLOTS): starting one costs MPICH about a
        quarter of what posting an ``Iallgather`` does (benchmarks/fingerprint.py)."""
        size = len(words)  # words: a sequence of ints (an int64 array or a tuple)
        if self._fp_inline:
            return self._fp_message(words)
        slots = self._fp_slots.get(size)
        if slots is None:  # made on first use, at the same collective on every rank (the
            slots = []  # MPI_*_init calls are local in MPICH)
            for _ in range(_FP_SLOTS):
                buf = np.zeros(size, np.int64)
                rows = np.empty((self.size, size), np.int64)
                slots.append((buf, rows, self._fpc.Allgather_init(buf, rows), buf.data))
            self._fp_slots[size] = slots
        slot = self._fp_take(slots, words)
        buf, rows, request, view = slots[slot]
        if size == 4:  # the common fingerprint, usually a tuple: 3x faster than buf[:] = words
            view[0], view[1], view[2], view[3] = words
        else:
            buf[:] = words
        return buf, rows, request, slot

    def _fp_take(self, slots, words) -> int:
        """The index of the next slot, free to load (see _fp_slot)."""
        n = self._fp_n
        self._fp_n = n + 1
        slot = n % _FP_SLOTS
        if self._fp_busy[slot]:  # its collective (_FP_SLOTS ago) is still in flight: finish
            owner = self._fp_owner[slot]  # it first (the peers posted it before this one)
            if owner is not None and not owner._done:
                owner.wait()
            if self._fp_busy[slot]:  # no Work owns it (an op that was interrupted): poll it
                seq = int(words[0])  # against the group timeout
                if not self._poll(slots[slot][1 if self._fp_inline else 2],
                                  time.monotonic() + self.timeout):
                    raise self._fail("collective fingerprint", seq, DistTimeoutError(
                        f"MPI collective fingerprint (seq {seq}) of group {self.group_name!r} on "
                        f"rank {self.rank}: an earlier collective's exchange did not finish "
                        f"within the group timeout of {self.timeout:g} s{self._silent_peers()}; "
                        "the group is unusable"))
        self._fp_busy[slot] = True
        self._fp_owner[slot] = None
        return slot

    def _poll(self, request, deadline: float) -> bool:
        """Test ``request`` (under the guard) until it completes (True) or ``deadline`` passes."""
        while True:
            with self._guard or _NULL:
                if request.Test():
                    return True
            if time.monotonic() > deadline:
                return False
            time.sleep(_NAP_S)

    def _fp_check(self, op, seq, fp) -> None:
        words, rows, _, slot = fp
        # the slot is freed only once its buffer has been read: freed first, another thread
        # posting a collective could reload and restart it under this check
        if self._fp_inline:  # words: the reduced message, rows: this rank's fingerprint
            control, balance = int(words[4]), int(words[3])
            self._fp_busy[slot] = False
            if control & 1 or (control & 2 and balance):
                self._fp_mismatch(op, seq, rows)
            return
        same = rows.tobytes() == words.tobytes() * self.size
        gathered = rows if same else rows.copy()
        self._fp_busy[slot] = False
        if same:
            return  # the common case: every rank's words equal this rank's
        try:
            self._verify(gathered)  # a copy: the slot's buffer is reused
        except BaseException as exc:
            raise self._fail(op, seq, exc) from None

    def _check_tag(self, tag: int) -> None:
        upper = self.comm.Get_attr(self._MPI.TAG_UB)
        if not 0 <= tag <= upper:
            raise ValueError(f"MPI tags run from 0 to MPI_TAG_UB={upper}; got tag={tag}")

