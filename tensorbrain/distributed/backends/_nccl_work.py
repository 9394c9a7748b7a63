"""The nccl backend's completion side: the `Work` of an op on the communication stream, and the
watchdog (a component of ``NCCLBackend``: its thread completes finished ops, notices NCCL's
asynchronous errors and timeouts, aborts the communicator and fails every pending op, as torch's
ProcessGroupNCCL watchdog)."""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any

from .. import _work
from ..errors import DistBackendError, DistTimeoutError

# Watchdog period. torch's ProcessGroupNCCL watchdog wakes every 100 ms (kWatchdogThreadSleepMillis).
# It bounds how late an asynchronous error or a timeout is noticed and how long a finished op keeps
# its arrays alive; each wake-up costs one cudaEventQuery per pending op and one error query.
_WATCHDOG_PERIOD_S = 0.05


class _NCCLWork(_work.Work):
    """A `Work` whose op runs on the communication stream and ends at ``done`` (a CUDA event)."""

    __slots__ = ("_watchdog", "_cp", "_done_event", "_keep", "_deadline")

    def __init__(self, watchdog: Watchdog, cp: Any, op: str, seq: int, done_event: Any,
                 keep: Any, result: Any) -> None:
        super().__init__(op, seq, watchdog.group_name)
        self._watchdog, self._cp, self._done_event, self._keep = watchdog, cp, done_event, keep
        self._deadline = time.monotonic() + watchdog.timeout
        self._result = result

    def wait(self, timeout: Any = None) -> bool:
        """Order the caller's current stream after the op; with ``timeout`` (seconds or a
        timedelta) also block the host until the op finished (`DistTimeoutError` if it has not
        by then)."""
        if hasattr(timeout, "total_seconds"):
            timeout = timeout.total_seconds()
        if not self._done:
            event = self._done_event
            if event is not None:
                self._cp.cuda.get_current_stream().wait_event(event)
            if timeout is not None:
                deadline = time.monotonic() + timeout
                while not self.is_completed():
                    if time.monotonic() >= deadline:
                        raise DistTimeoutError(
                            f"Work.wait timed out after {timeout} s: NCCL {self.op} (seq "
                            f"{self.seq}) of group {self.group!r} is still running")
                    time.sleep(1e-4)
        if self._exc is not None:
            raise self._exc
        return True

    def is_completed(self) -> bool:
        if not self._done:
            self._watchdog.poll(self)
        return self._done


class Watchdog:
    """Completion and failure of one group's pending ops, and the thread that watches them
    (``comm``: the group's communicator, aborted on a failure; ``failure``: its FailureState)."""

    def __init__(self, nccl: Any, comm: Any, failure: Any, timeout: float) -> None:
        self.nccl, self.comm, self.failure, self.timeout = nccl, comm, failure, timeout
        self.rank, self.group_name = failure.rank, failure.group_name
        self.pending: list[_NCCLWork] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True,
                                        name=f"tb-nccl-watchdog-{self.group_name}")
        self._thread.start()

    def add(self, work: _NCCLWork) -> None:
        """Watch ``work`` until its done event fires."""
        with self.lock:
            self.pending.append(work)

    def stop(self, join: bool = True) -> None:
        """Stop the thread (and wait for it, unless this is the thread itself)."""
        self._stop.set()
        if join and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def poll(self, work: _NCCLWork) -> None:
        """Complete ``work`` when its done event fired."""
        event = work._done_event
        if event is not None and event.done:
            self._finish(work)

    def _finish(self, work: _NCCLWork, exc: BaseException | None = None) -> None:
        with self.lock:
            if work._done_event is None:
                return
            work._done_event = None
            work._keep = None
            with contextlib.suppress(ValueError):
                self.pending.remove(work)
        work._complete(work._result, exc)

    def fail(self, err: BaseException) -> None:
        """Abort the communicator once and fail every pending Work with ``err``."""
        with self.lock:
            first = self.failure.first is None
            self.failure.record(err)
            pending, self.pending = self.pending, []
        if first:
            sys.stderr.write(f"[tensorbrain nccl] rank {self.rank}: {err}; aborting the NCCL "
                             f"communicator of group {self.group_name!r}\n")
            with contextlib.suppress(self.nccl.NcclError):
                self.comm.abort()
        for work in pending:
            self._finish(work, err)

    def _watch(self) -> None:
        IN_PROGRESS = self.nccl.IN_PROGRESS
        while not self._stop.wait(_WATCHDOG_PERIOD_S):
            if self.failure.first is not None or not self.comm.alive:
                return
            try:
                code = self.comm.get_async_error()
            except self.nccl.NcclError as exc:
                code, detail = -1, str(exc)
            else:
                detail = ""
            if code not in (0, IN_PROGRESS):
                detail = detail or (self.nccl.get_error_string(code) + (
                    f"; NCCL says: {self.comm.last_error()}" if self.comm.last_error() else ""))
                with self.lock:  # the oldest op not finished yet (a finished one may wait here)
                    last = next((w for w in self.pending if w._done_event is not None
                                 and not w._done_event.done), None)
                where = f" during {last.op} (seq {last.seq})" if last else ""
                self.fail(DistBackendError(f"NCCL reported an asynchronous error on group "
                                            f"{self.group_name!r}, rank {self.rank}{where}: {detail}"))
                return
            with self.lock:
                pending = list(self.pending)
            now = time.monotonic()
            for work in pending:
                if work._done_event is not None and work._done_event.done:
                    self._finish(work)
                elif now > work._deadline:
                    self.fail(DistTimeoutError(
                        f"NCCL {work.op} (seq {work.seq}) of group {self.group_name!r} ran past the "
                        f"group timeout of {self.timeout:g} s on rank {self.rank} (last completed "
                        f"seq {self._last_completed(work.seq)}): a peer is missing or issued "
                        "different collectives; the communicator was aborted"))
                    return

    def _last_completed(self, seq: int) -> int:
        with self.lock:
            running = [w.seq for w in self.pending]
        return (min(running) if running else seq) - 1
