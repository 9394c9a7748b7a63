"""A worker's uncaught exception, written as JSON for the launcher (torch's ``@record``).

``tbrun`` (and torchrun) give every worker ``TORCHELASTIC_ERROR_FILE``, a path of its own. When
the worker dies of an exception, the file receives torch's format::

    {"message": {"message": "RuntimeError: boom",
                 "extraInfo": {"py_callstack": "Traceback (most recent call last): ...",
                               "timestamp": "1764039600"}}}

and the launcher shows it in its failure summary. TensorBrain writes it in two ways: the
:func:`record` decorator (torch's name and place, for scripts written for torchrun), and a
``sys.excepthook`` installed when ``tensorbrain.distributed`` is imported in a process that has
``TORCHELASTIC_ERROR_FILE`` set, so an undecorated script's uncaught exception is recorded too.
The file is written atomically (temporary file, then rename); an existing file is replaced.
"""
from __future__ import annotations

import functools
import json
import os
import sys
import time
import traceback

__all__ = ["ChildFailedError", "ErrorHandler", "get_error_handler", "install_excepthook",
           "record"]


class ChildFailedError(Exception):
    """Raised by ``tensorbrain.distributed.run.run`` when a worker failed (torch's type).

    Args:
        name: what was run (the worker command).
        failures: ``{global rank: details}`` of the failed workers (the summary tbrun printed
            names them).
    """

    def __init__(self, name: str, failures: dict):
        self.name, self.failures = name, dict(failures)
        super().__init__(f"{name} FAILED: a worker exited with an error (tbrun's summary above "
                         f"names it and its log)")


class ErrorHandler:
    """Writes the current process's uncaught exception to ``TORCHELASTIC_ERROR_FILE``."""

    def _get_error_file_path(self) -> str | None:
        return os.environ.get("TORCHELASTIC_ERROR_FILE") or None

    def initialize(self) -> None:
        """torch's hook for faulthandler setup; nothing is needed here."""

    def record_exception(self, e: BaseException) -> None:
        """Write ``e`` (with its traceback) to the error file, when one is set.

        Args:
            e: the exception that ends this process.
        """
        path = self._get_error_file_path()
        if not path:
            return
        text = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        data = {"message": {"message": f"{type(e).__name__}: {e}",
                            "extraInfo": {"py_callstack": text,
                                          "timestamp": str(int(time.time()))}}}
        write_error_file(path, data)


def write_error_file(path: str, data: dict) -> None:
    """Write ``data`` as JSON to ``path`` atomically (its folder is created)."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def get_error_handler() -> ErrorHandler:
    """The error handler (torch's name)."""
    return ErrorHandler()


def record(fn=None, error_handler: ErrorHandler | None = None):
    """Decorator: an exception escaping ``fn`` is written to the error file, then re-raised.

    Args:
        fn: the worker's entry function (usually ``main``).
        error_handler: a custom handler; default :class:`ErrorHandler`.

    Returns:
        The wrapped function.

    Example::

        from tensorbrain.distributed.elastic.multiprocessing.errors import record

        @record
        def main():
            ...
    """
    handler = error_handler or get_error_handler()

    def wrap(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            try:
                return f(*args, **kwargs)
            except SystemExit as se:
                if se.code in (None, 0):
                    return None
                raise
            except BaseException as e:
                handler.record_exception(e)
                raise
        return wrapper

    return wrap(fn) if fn is not None else wrap


class _RecordingHook:
    """A ``sys.excepthook`` that writes the error file, then runs the hook it replaced."""

    def __init__(self, previous):
        self.previous = previous

    def __call__(self, kind, value, tb):
        if not issubclass(kind, KeyboardInterrupt):
            try:
                if not os.path.exists(ErrorHandler()._get_error_file_path() or ""):
                    ErrorHandler().record_exception(value.with_traceback(tb))
            except OSError:
                pass
        self.previous(kind, value, tb)


def install_excepthook() -> None:
    """Record uncaught exceptions of this process (once; the previous hook still runs)."""
    if not isinstance(sys.excepthook, _RecordingHook):
        sys.excepthook = _RecordingHook(sys.excepthook)
