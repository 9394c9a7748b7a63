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
    _bare_decorator = True   # ``@tb.no_grad`` without parentheses works, as in torch 2.x

    def __new__(cls, *args, **kwargs):
        if cls._bare_decorator and len(args) == 1 and not kwargs and callable(args[0]):
            return cls()(args[0])
        return super().__new__(cls)

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

    _bare_decorator = False

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


def is_inference_mode_enabled() -> bool:
    """Whether this thread is inside ``inference_mode()`` (``torch.is_inference_mode_enabled``).

    Returns:
        A bool.
    """
    return getattr(_state, "inference", False)


class inference_mode(_Mode):
    """``torch.inference_mode``: a context manager and decorator (with or without parentheses)
    that turns graph recording off, as :class:`no_grad`.

    torch additionally marks the tensors made inside as "inference tensors" that autograd later
    refuses; TensorBrain does not (they are ordinary tensors without history), so code that is
    correct under torch behaves the same.

    Args:
        mode: True to enter inference mode; ``inference_mode(False)`` changes nothing.

    Example:
        >>> import tensorbrain as tb
        >>> with tb.inference_mode():
        ...     (tb.ones(2, requires_grad=True) * 2).requires_grad
        False
    """

    def __init__(self, mode: bool = True):
        self._mode = bool(mode)

    def __enter__(self):
        self._prev = (is_grad_enabled(), is_inference_mode_enabled())
        if self._mode:
            _set(False)
            _state.inference = True
        return self

    def __exit__(self, *exc):
        _set(self._prev[0])
        _state.inference = self._prev[1]
        return False

    def __call__(self, fn):
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(mode):
                return fn(*args, **kwargs)
        return wrapper
