"""The nccl backend's completion side: the `Work` of an op on the communication stream, and the
watchdog thread that completes finished ops, notices NCCL's asynchronous errors and timeouts,
aborts the communicator and fails every pending op (as torch's ProcessGroupNCCL watchdog)."""
from __future__ import annotations

import sys
import time

from .. import _work
from ..errors import DistBackendError, DistTimeoutError

# Watchdog period. torch's ProcessGroupNCCL watchdog wakes every 100 ms (kWatchdogThreadSleepMillis).
# It bounds how late an asynchronous error or a timeout is noticed and how long a finished op keeps
# its arrays alive; each wake-up costs one cudaEventQuery per pending op and one error query.
_WATCHDOG_PERIOD_S = 0.05


class _NCCLWork(_work.Work):
    """A `Work` whose op runs on the communication stream and ends at ``done`` (a CUDA event)."""

    __slots__ = ("_backend", "_done_event", "_keep", "_deadline")

    def __init__(self, backend, op, seq, done_event, keep, result):
        super().__init__(op, seq, backend.group_name)
        self._backend, self._done_event, self._keep = backend, done_event, keep
        self._deadline = time.monotonic() + backend.timeout
        self._result = result

    def wait(self, timeout: float | None = None) -> bool:
        """Order the caller's current stream after the op; with ``timeout`` also block the host
        until the op finished (`DistTimeoutError` if it has not by then)."""
        if hasattr(timeout, "total_seconds"):
            timeout = timeout.total_seconds()
        if not self._done:
            event = self._done_event
            if event is not None:
                self._backend._cp.cuda.get_current_stream().wait_event(event)
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
            self._backend._poll(self)
        return self._done

    def result(self):
        self.wait()
        return self._result


class Watchdog:
    """Completion and failure of pending ops; a mixin of ``NCCLBackend`` (``self._pending``,
    ``self._lock``, ``self._failure``, ``self.comm``)."""

    def _poll(self, work: _NCCLWork) -> None:
        event = work._done_event
        if event is not None and event.done:
            self._finish(work)

    def _finish(self, work: _NCCLWork, exc: BaseException | None = None) -> None:
        with self._lock:
            if work._done_event is None:
                return
            work._done_event = None
            work._keep = None
            try:
                self._pending.remove(work)
            except ValueError:
                pass
        work._complete(work._result, exc)

    def _fail(self, err: BaseException) -> None:
        """Abort the communicator once and fail every pending Work with ``err``."""
        with self._lock:
            first = self._failure.first is None
            self._failure.record(err)
            pending, self._pending = self._pending, []
        if first:
            sys.stderr.write(f"[tensorbrain nccl] rank {self.rank}: {err}; aborting the NCCL "
                             f"communicator of group {self.group_name!r}\n")
            try:
                self.comm.abort()
            except self._nccl.NcclError:
                pass
        for work in pending:
            work._done_event = None
            work._keep = None
            work._complete(None, err)

    def _watch(self) -> None:
        IN_PROGRESS = self._nccl.IN_PROGRESS
        while not self._stop.wait(_WATCHDOG_PERIOD_S):
            if self._failure.first is not None or not self.comm.alive:
                return
            try:
                code = self.comm.get_async_error()
            except self._nccl.NcclError as exc:
                code, detail = -1, str(exc)
            else:
                detail = ""
            if code not in (0, IN_PROGRESS):
                detail = detail or (self._nccl.get_error_string(code) + (
                    f"; NCCL says: {self.comm.last_error()}" if self.comm.last_error() else ""))
                with self._lock:  # the oldest op not finished yet (a finished one may wait here)
                    last = next((w for w in self._pending if w._done_event is not None
                                 and not w._done_event.done), None)
                where = f" during {last.op} (seq {last.seq})" if last else ""
                self._fail(DistBackendError(f"NCCL reported an asynchronous error on group "
                                            f"{self.group_name!r}, rank {self.rank}{where}: {detail}"))
                return
            with self._lock:
                pending = list(self._pending)
            now = time.monotonic()
            for work in pending:
                if work._done_event is not None and work._done_event.done:
                    self._finish(work)
                elif now > work._deadline:
                    self._fail(DistTimeoutError(
                        f"NCCL {work.op} (seq {work.seq}) of group {self.group_name!r} ran past the "
                        f"group timeout of {self.timeout:g} s on rank {self.rank} (last completed "
                        f"seq {self._last_completed(work.seq)}): a peer is missing or issued "
                        "different collectives; the communicator was aborted"))
                    return

    def _last_completed(self, seq: int) -> int:
        with self._lock:
            running = [w.seq for w in self._pending]
        return (min(running) if running else seq) - 1
