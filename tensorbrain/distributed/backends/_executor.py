"""What every backend does around an operation: one failure state (:class:`FailureState`, for
tcp, mpi, nccl and the fingerprint layer), and, for a backend whose operations are Python bodies
(tcp), running them in order (:class:`OpQueue`); mpi and nccl queue theirs in their library.
"""
from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from .. import _work
from ..errors import DistBackendError


class FailureState:
    """The first failure of one group (``group_name``, this ``rank``); later operations raise
    :meth:`unusable`, the one wording of "this group is unusable" of every backend."""

    __slots__ = ("group_name", "rank", "first", "closed")

    def __init__(self, group_name: str, rank: int):
        self.group_name, self.rank = group_name, rank
        self.first: BaseException | None = None
        self.closed = False  # shut down: new operations are refused, queued ones still run

    def record(self, exc: BaseException) -> BaseException:
        """Remember ``exc`` if it is the group's first failure; return it."""
        if self.first is None:
            self.first = exc
        return exc

    def abort(self) -> DistBackendError:
        """Refuse new operations and fail the pending ones (``abort``); returns the failure."""
        self.closed = True
        err = DistBackendError(f"group {self.group_name!r} was aborted")
        self.record(err)
        return err

    def check(self, op: str) -> None:
        """Raise before ``op`` starts when the group failed (:meth:`unusable`) or was shut down."""
        if self.first is not None:
            raise self.unusable(op)
        if self.closed:
            raise DistBackendError(f"{op}: group {self.group_name!r} was shut down "
                                   "(destroy_process_group); create a new group to go on")

    def unusable(self, op: str, seq: int | None = None) -> DistBackendError:
        """The error every operation ``op`` (number ``seq``, if any) after the first failure
        raises."""
        what = op if seq is None else f"{op} (seq {seq})"
        return DistBackendError(
            f"{what} on group {self.group_name!r} (rank {self.rank}): the group failed earlier "
            f"and is unusable ({self.first}); create a new group to go on")

    def interrupted(self, op: str, seq: int, why: str = "") -> DistBackendError:
        """The failure a Ctrl-C during ``op`` leaves behind (the caller records it); ``why``:
        what else to say (e.g. that MPI cannot cancel it)."""
        return DistBackendError(
            f"{op} (seq {seq}) of group {self.group_name!r} on rank {self.rank} was interrupted "
            f"by KeyboardInterrupt (Ctrl-C){why}; the group is unusable: create a new one")


class OpQueue:
    """Runs one group's operations one at a time, in issue order: it numbers collectives 0, 1,
    2, ..., runs a synchronous op in the calling thread when nothing is queued (the latency path)
    and everything else on one worker thread, and completes each op's `Work` exactly once.

    ``begin(op, seq, timeout, tag)`` runs just before an op's body (it arms the deadline);
    ``on_failure(work, exc) -> exc`` runs once per failed op, KeyboardInterrupt included (it
    poisons the group and returns the error the Work completes with; a KeyboardInterrupt stays
    one for the caller).
    """

    def __init__(self, name: str, failure: FailureState,
                 begin: Callable[[str, int, float, int], object],
                 on_failure: Callable[[_work.Work, BaseException], BaseException],
                 timeout: float) -> None:
        self.name, self.failure, self.timeout = name, failure, timeout
        self._begin, self._on_failure = begin, on_failure
        self.seq = 0
        self._submit_lock = threading.Lock()
        self._exec_lock = threading.Lock()
        self._pending = 0
        self._queue: queue.Queue = queue.Queue()
        self._worker: threading.Thread | None = None

    def submit(self, op: str, body: Callable[[], Any], async_op: bool,
               finish: Callable[[], None] | None = None, result: Any = None,
               collective: bool = True, tag: int = 0) -> _work.Work:
        """Run ``body()`` as operation ``op``, then ``finish()`` (copies staged results back),
        and complete its Work with ``result`` (default: what ``body`` returned). ``collective``
        ops take a sequence number; ``tag`` goes to ``begin`` (tcp's in-band fingerprint tag).
        A synchronous op's error, or Ctrl-C (the group is then poisoned), is raised here."""
        with self._submit_lock:
            failure = self.failure
            if failure.first is not None or failure.closed:
                failure.check(op)
            seq = self.seq
            if collective:
                self.seq += 1
            work = _QueuedWork(op, seq, self.failure.group_name)
            work._queue = self
            inline = not async_op and self._pending == 0
            if inline:
                self._exec_lock.acquire()
            else:
                self._pending += 1
                if self._worker is None or not self._worker.is_alive():
                    self._worker = threading.Thread(target=self._loop, daemon=True, name=self.name)
                    self._worker.start()
                self._queue.put((work, body, finish, result, tag))
        if inline:
            try:
                self._execute(work, body, finish, result, tag)
            finally:
                self._exec_lock.release()
            if work._exc is not None:
                raise work._exc
            return work
        if not async_op:
            work.wait()
        return work

    def run_inline(self, op: str, fn: Callable[..., Any], *args: Any) -> Any:
        """The latency path without a `Work` (``TCPBackend.fast_all_reduce``): ``fn(*args)`` in
        this thread as collective ``op``, returning what it returns.

        Taken only when the group is usable and nothing is queued (False without calling
        ``fn``: :meth:`submit` then runs it or raises the group's error); it claims the number
        :meth:`submit` would. ``fn`` returns a false value to decline before doing anything
        (the number is given back); its failures go through ``on_failure`` as a submitted op's.
        """
        with self._submit_lock:
            failure = self.failure
            if self._pending or failure.first is not None or failure.closed:
                return False
            seq = self.seq
            self.seq = seq + 1
            try:
                try:
                    done = fn(*args)
                except BaseException as exc:  # noqa: BLE001 - worded and raised below
                    work = _work.Work(op, seq, failure.group_name)
                    err = self._on_failure(work, exc)
                    raise (exc if isinstance(exc, KeyboardInterrupt) else err) from None
            except KeyboardInterrupt:  # Python's SIGINT handler may raise it anywhere above
                if failure.first is None:
                    self._on_failure(_work.Work(op, seq, failure.group_name), KeyboardInterrupt())
                raise
            if not done:
                self.seq = seq
            return done

    def _execute(self, work: _work.Work, body: Callable[[], Any],
                 finish: Callable[[], None] | None, result: Any, tag: int) -> None:
        if self.failure.first is not None:
            work._complete(exc=self.failure.unusable(work.op, work.seq))
            return
        self._begin(work.op, work.seq, self.timeout, tag)
        try:
            out = body()
            if finish is not None:
                finish()
            work._complete(result=out if result is None else result)
        except BaseException as exc:  # noqa: BLE001 - every failure poisons the group
            err = self._on_failure(work, exc)
            work._complete(exc=exc if isinstance(exc, KeyboardInterrupt) else err)

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            with self._exec_lock:
                self._execute(*item)
            with self._submit_lock:
                self._pending -= 1

    def close(self, timeout: float) -> bool:
        """Stop taking ops, let the queued ones finish (up to ``timeout`` s); True when no op
        can still be running."""
        with self._submit_lock:
            worker = self._worker
        if worker is not None and worker.is_alive():
            self._queue.put(None)
            worker.join(timeout)
            return not worker.is_alive()
        return True

    def fail_queued(self) -> None:
        """Complete every queued op with the group's failure and stop the worker (abort)."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                item[0]._complete(exc=self.failure.first)
        self._queue.put(None)


class _QueuedWork(_work.Work):
    """A Work of an :class:`OpQueue`: Ctrl-C in ``wait()`` poisons the group (the op may be
    running on the worker thread, mid-way with the peers) and stays a KeyboardInterrupt."""

    __slots__ = ("_queue",)
    _queue: OpQueue

    def wait(self, timeout: float | timedelta | None = None) -> bool:
        """``Work.wait``; a Ctrl-C while waiting leaves the group unusable."""
        if self._done:
            return _work.Work.wait(self)
        try:
            return _work.Work.wait(self, timeout)
        except KeyboardInterrupt:  # Ctrl-C while queued or running on the worker: stop all
            self._queue._on_failure(self, KeyboardInterrupt())
            raise
