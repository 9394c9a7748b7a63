"""``spawn`` / ``start_processes``: run ``fn(i, *args)`` in ``nprocs`` child processes, as torch.

When one child fails, the others are terminated (SIGTERM, then SIGKILL after a grace period) and
joined before the error is raised in the parent, so nothing is left running. A child that raised
writes its traceback as text to a private file the parent reads (no pickle); a child that died
without raising (a signal, ``os._exit``) is reported with its exit code or signal name.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import tempfile
import time
import traceback
from typing import Any

_GRACE_S = 5.0


class ProcessException(Exception):
    """A child process failed. ``error_index`` is its index (the ``i`` of ``fn(i, ...)``)."""

    def __init__(self, msg: str, error_index: int, error_pid: int):
        super().__init__(msg)
        self.msg, self.error_index, self.pid = msg, error_index, error_pid

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid)


class ProcessRaisedException(ProcessException):
    """A child raised an exception; the message carries the child's traceback text."""


class ProcessExitedException(ProcessException):
    """A child exited with a non-zero code or was killed by a signal (``signal_name``)."""

    def __init__(self, msg: str, error_index: int, error_pid: int, exit_code: int,
                 signal_name: str | None = None):
        super().__init__(msg, error_index, error_pid)
        self.exit_code, self.signal_name = exit_code, signal_name

    def __reduce__(self):
        return type(self), (self.msg, self.error_index, self.pid, self.exit_code, self.signal_name)


def _wrap(fn, i, args, error_file):
    """Child entry point: run ``fn(i, *args)``; on an exception, leave its traceback for the parent."""
    try:
        fn(i, *args)
    except KeyboardInterrupt:
        pass  # the parent is tearing down; it will report the real cause
    except Exception as exc:
        if os.environ.get("TENSORBRAIN_AS_TORCH") == "1":
            from ..as_torch import annotate
            annotate(exc)  # a name missing from TensorBrain: say so in the parent's error
        tmp = error_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(traceback.format_exc())
        os.replace(tmp, error_file)
        sys.exit(1)


class ProcessContext:
    """The running children of :func:`start_processes`; :meth:`join` waits for them.

    Attributes:
        processes: the ``multiprocessing.Process`` objects, index i running ``fn(i, ...)``.
        error_files: where each child writes its traceback if it raises.
    """

    _keepalive: Any  # start_processes' args: shared tensors must outlive the children's attach

    def __init__(self, processes, error_files):
        self.processes, self.error_files = processes, error_files
        self.sentinels = {p.sentinel: i for i, p in enumerate(processes)}

    def pids(self):
        """The children's process ids."""
        return [int(p.pid) for p in self.processes]

    def join(self, timeout: float | None = None, grace_period: float | None = None) -> bool:
        """Wait for the children; True once all exited cleanly, False on timeout.

        Args:
            timeout: seconds to wait in this call (None: until something happens).
            grace_period: seconds a surviving child gets after SIGTERM before SIGKILL when
                another has failed (default 5).

        Raises:
            ProcessRaisedException: a child raised; the message has its traceback.
            ProcessExitedException: a child exited non-zero or was killed by a signal.
        """
        if not self.sentinels:
            return True
        ready = multiprocessing.connection.wait(list(self.sentinels), timeout=timeout)
        failed = None
        for sentinel in ready:
            i = self.sentinels.pop(sentinel)
            p = self.processes[i]
            p.join()
            if p.exitcode != 0 and failed is None:
                failed = i
        if failed is None:
            return not self.sentinels
        error = self._error(failed)
        self.terminate(grace_period)
        raise error

    def terminate(self, grace_period: float | None = None) -> None:
        """End every child still running: SIGTERM, then SIGKILL after ``grace_period`` seconds.

        Args:
            grace_period: seconds between SIGTERM and SIGKILL (None: a short default).
        """
        alive = [p for p in self.processes if p.is_alive()]
        for p in alive:
            p.terminate()
        deadline = time.monotonic() + (_GRACE_S if grace_period is None else grace_period)
        for p in alive:
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join()
        self.sentinels.clear()
        for f in self.error_files:
            _remove(f)

    def _error(self, i: int) -> ProcessException:
        p, path = self.processes[i], self.error_files[i]
        if os.path.exists(path):
            with open(path) as f:
                text = f.read()
            _remove(path)
            return ProcessRaisedException(f"\n\n-- Process {i} terminated with the following "
                                          f"error:\n{text}", i, p.pid)
        code = p.exitcode
        if code is not None and code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"SIG{-code}"
            return ProcessExitedException(f"process {i} terminated with signal {name}", i, p.pid,
                                          code, name)
        return ProcessExitedException(f"process {i} terminated with exit code {code}", i, p.pid,
                                      code)


def _remove(path):
    for f in (path, path + ".tmp"):
        try:
            os.unlink(f)
        except FileNotFoundError:
            pass


def start_processes(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
                    start_method: str = "spawn"):
    """Start ``nprocs`` processes running ``fn(i, *args)``; join them unless ``join=False``.

    Tensors in ``args`` are moved to shared memory and only their handles are pickled (see
    :mod:`tensorbrain.multiprocessing.reductions`); ``fn`` and the other arguments are pickled
    for the local hand-off to the child, as in torch.

    Args:
        fn: a module-level function (picklable) called as ``fn(i, *args)``.
        args: extra arguments for ``fn``.
        nprocs: how many processes.
        join: wait for all of them (True) or return the :class:`ProcessContext` at once.
        daemon: start daemonic processes.
        start_method: ``"spawn"`` (default), ``"fork"`` or ``"forkserver"``.

    Returns:
        None when ``join`` is True, else the :class:`ProcessContext`.

    Raises:
        ProcessRaisedException, ProcessExitedException: a child failed (the others were ended).
    """
    if nprocs < 1:
        raise ValueError(f"nprocs must be at least 1, got {nprocs}")
    ctx: Any = multiprocessing.get_context(start_method)  # Process is on the concrete contexts
    folder = tempfile.mkdtemp(prefix="tb-spawn-")
    error_files = [os.path.join(folder, f"{i}.err") for i in range(nprocs)]
    processes = []
    try:
        for i in range(nprocs):
            p = ctx.Process(target=_wrap, args=(fn, i, args, error_files[i]), daemon=daemon)
            p.start()
            processes.append(p)
    except BaseException:
        ProcessContext(processes, error_files).terminate(0.5)
        raise
    context = ProcessContext(processes, error_files)
    # Process.start() drops its reference to args; shared tensors among them must outlive the
    # children's attaching to their segments, so the context keeps them.
    context._keepalive = args
    if not join:
        return context
    try:
        while not context.join():
            pass
    except BaseException:
        context.terminate()  # a failed child, or Ctrl-C in the parent: leave nothing running
        raise
    finally:
        try:
            os.rmdir(folder)
        except OSError:
            pass
    return None


def spawn(fn, args=(), nprocs: int = 1, join: bool = True, daemon: bool = False,
          start_method: str = "spawn"):
    """``torch.multiprocessing.spawn``: :func:`start_processes` with the spawn method.

    Args:
        fn: a module-level function called as ``fn(i, *args)`` in child ``i``.
        args: the other arguments.
        nprocs: the number of children.
        join: wait for them (False: return the ``ProcessContext``).
        daemon: start the children as daemons.
        start_method: ``'spawn'`` (default), ``'fork'`` or ``'forkserver'``.

    Example:
        >>> import tensorbrain.multiprocessing as mp                    # doctest: +SKIP
        >>> mp.spawn(train, args=(model,), nprocs=4)                    # doctest: +SKIP
    """
    return start_processes(fn, args=args, nprocs=nprocs, join=join, daemon=daemon,
                           start_method=start_method)
