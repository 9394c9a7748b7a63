"""Grad mode: thread-local, as in PyTorch, so threads (DataParallel replicas) do not interfere."""
from __future__ import annotations

import functools
import threading

_state = threading.local()


def is_grad_enabled() -> bool:
    """Whether ops record a graph in this thread (False under ``no_grad``).

    Returns:
        A bool.
    """
    return getattr(_state, "enabled", True)


def _set(enabled: bool) -> None:
    _state.enabled = bool(enabled)


class _Mode:
    _target = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set(self._target)
        return self

    def __exit__(self, *exc):
        _set(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_Mode):
    """Context manager and decorator that disables graph recording.

    >>> import tensorbrain as tb
    >>> x = tb.ones(2, requires_grad=True)
    >>> with tb.no_grad():
    ...     (x * 2).requires_grad
    False
    """
    _target = False


class enable_grad(_Mode):
    """Context manager (and decorator) that turns graph recording on, e.g. inside ``no_grad``.

    Example:
        >>> import tensorbrain as tb
        >>> with tb.no_grad():
        ...     with tb.enable_grad():
        ...         print(tb.is_grad_enabled())
        True
    """
    _target = True


class set_grad_enabled(_Mode):
    """``set_grad_enabled(False)`` as a context manager, decorator or plain call.

    Args:
        mode: True to record graphs, False not to.
    """

    def __init__(self, mode: bool):
        self._target = bool(mode)
        self._prev = is_grad_enabled()
        _set(mode)  # a plain call takes effect at once, as in torch

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self._target
        _set(self._prev)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
