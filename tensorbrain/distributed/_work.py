"""`Work`: the handle an operation returns (``async_op=True``), as ``torch.distributed.Work``.

A backend creates one `Work` per operation and completes it exactly once, with a result or with
an exception; ``wait()`` raises that exception in the caller. Completion callbacks
(``_on_done``) run in the completing thread, in registration order, before waiters wake: the
process-group layer uses them to copy staged results back into the user's tensor, so that after
``wait()`` returns the tensor holds the result.

>>> w = Work("all_reduce", seq=3, group="default")
>>> w.is_completed()
False
>>> w._complete(result=None)
>>> w.wait(), w.is_completed(), w.exception()
(True, True, None)
"""
from __future__ import annotations

import threading
import time
from datetime import timedelta
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .errors import DistTimeoutError

if TYPE_CHECKING:
    import concurrent.futures


class Work:
    """Handle of one (possibly still running) operation."""

    __slots__ = ("op", "seq", "group", "_event", "_exc", "_result", "_callbacks", "_lock",
                 "_done", "__weakref__")

    def __init__(self, op: str, seq: int = -1, group: str = "") -> None:
        self.op, self.seq, self.group = op, seq, group
        self._event: threading.Event | None = None  # created on demand: synchronous ops never need one
        self._exc: BaseException | None = None
        self._result: Any = None
        self._callbacks: list[Callable[[Work], object]] | None = None
        self._lock = threading.Lock()
        self._done = False

    # ***** user side *****
    def wait(self, timeout: float | timedelta | None = None) -> bool:
        """Block until the op finishes; raise its error. ``timeout`` (seconds or timedelta)
        raises `DistTimeoutError` if the op is still running then (the op itself keeps its own,
        group-level deadline)."""
        if not self._done:
            with self._lock:
                if not self._done and self._event is None:
                    self._event = threading.Event()
                event = self._event
            if event is not None:
                if isinstance(timeout, timedelta):
                    timeout = timeout.total_seconds()
                if not event.wait(timeout):
                    raise DistTimeoutError(
                        f"Work.wait timed out after {timeout} s: {self.op} (seq {self.seq}) of "
                        f"group {self.group!r} is still running")
        if self._exc is not None:
            raise self._exc
        return True

    def is_completed(self) -> bool:
        """Whether the op has finished (successfully or not), without waiting.

        Returns:
            bool: True once finished.
        """
        return self._done

    def is_success(self) -> bool:
        """Whether the op has finished without an error, without waiting.

        Returns:
            bool: True once finished successfully.
        """
        return self._done and self._exc is None

    def exception(self) -> BaseException | None:
        """The op's error, without waiting.

        Returns:
            The exception it failed with, or None (running, or finished successfully).
        """
        return self._exc

    def result(self) -> Any:
        """Wait, then return the op's result (the output arrays for collectives)."""
        self.wait()
        return self._result

    def get_future(self) -> concurrent.futures.Future:
        """A `concurrent.futures.Future` completed with this work (for ``.then`` chains)."""
        import concurrent.futures
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def done(w: Work) -> None:
            if w._exc is not None:
                fut.set_exception(w._exc)
            else:
                fut.set_result(w._result)
        self._on_done(done)
        return fut

    def __repr__(self) -> str:
        state = "done" if self._done else "running"
        if self._exc is not None:
            state = f"failed: {type(self._exc).__name__}"
        return f"Work({self.op}, seq={self.seq}, group={self.group!r}, {state})"

    # ***** backend side *****
    def _on_done(self, fn: Callable[[Work], object]) -> None:
        """Run ``fn(work)`` when the op completes (at once if it already has)."""
        with self._lock:
            if not self._done:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        fn(self)

    def _complete(self, result: Any = None, exc: BaseException | None = None) -> None:
        self._result, self._exc = result, exc
        with self._lock:
            callbacks, self._callbacks = self._callbacks, None
        for fn in callbacks or ():
            try:
                fn(self)
            except BaseException as cb_exc:  # a failing copy-back is the op's error
                if self._exc is None:
                    self._exc = cb_exc
        with self._lock:
            self._done = True
            event = self._event
        if event is not None:
            event.set()


def completed(op: str, result: Any = None, exc: BaseException | None = None, seq: int = -1,
              group: str = "") -> Work:
    """A `Work` that is already finished (synchronous ops, world size 1)."""
    w = Work(op, seq, group)
    # what _complete does, less its locks: nothing can hold this new object yet (an 8-byte
    # collective's latency path pays every line of Python here)
    w._result, w._exc, w._done = result, exc, True
    return w


def wait_all(works: Iterable[Work], timeout: float | None = None) -> None:
    """Wait for every work; raise the first error after all finished (or the deadline)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    first = None
    for w in works:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            w.wait(left)
        except BaseException as exc:  # noqa: BLE001 - reported after the others finished
            first = first or exc
    if first is not None:
        raise first
