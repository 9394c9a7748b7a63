"""A small ``torch.futures.Future`` look-alike for communication hooks.

A comm hook returns "something that finishes later with the reduced bucket". PyTorch uses
``torch.futures.Future`` (``wait()``, ``value()``, ``then(fn)``); our process group returns a
`Work` (``wait()``, ``result()``). `Future` accepts either: ``Future.from_work(work, value)``
finishes with ``value`` once ``work`` has, and ``then`` chains run lazily, in the waiting thread,
so a hook may launch its next collective from a ``then`` callback exactly as in torch
(every rank waits its buckets in the same order, so collectives stay in the same order).

>>> f = Future.completed(3).then(lambda fut: fut.value() * 2)
>>> f.wait()
6
"""
from __future__ import annotations

__all__ = ["Future"]


class Future:
    """A value that is ready after ``wait()``; ``then(fn)`` makes ``fn(self)``'s result the next."""

    __slots__ = ("_wait", "_value", "_done", "_exc")

    def __init__(self, wait_fn=None):
        self._wait, self._value, self._done, self._exc = wait_fn, None, False, None

    @classmethod
    def completed(cls, value) -> Future:
        """A Future already finished with ``value``.

        Args:
            value: the result.

        Returns:
            Future: the finished Future.
        """
        f = cls()
        f.set_result(value)
        return f

    @classmethod
    def from_work(cls, work, value) -> Future:
        """Finishes with ``value`` once ``work`` (anything with ``wait()``) has finished."""
        def run():
            work.wait()
            return value
        return cls(run)

    def set_result(self, value) -> None:
        """Finish this Future with ``value`` (``wait()`` returns it).

        Args:
            value: the result.
        """
        self._value, self._done, self._wait = value, True, None

    def done(self) -> bool:
        """Whether the Future has finished, without running what is left.

        Returns:
            bool: True once finished.
        """
        return self._done

    def wait(self):
        """Run whatever is left to do; return the value (raise the hook's error)."""
        if not self._done:
            fn, self._wait = self._wait, None
            try:
                self._value = fn() if fn is not None else None
            except BaseException as exc:  # kept so a second wait() raises it again
                self._exc = exc
            self._done = True
        if self._exc is not None:
            raise self._exc
        return self._value

    def value(self):
        """``wait()``: the result (torch's ``Future.value``)."""
        return self.wait()

    def then(self, callback) -> Future:
        """A Future for ``callback(self)``, run after this one finishes."""
        return Future(lambda: (self.wait(), callback(self))[1])
