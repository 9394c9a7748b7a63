"""``tensorbrain.multiprocessing``: Python's multiprocessing plus tensors in shared memory.

As ``torch.multiprocessing``: everything in :mod:`multiprocessing` is re-exported (``Process``,
``Queue``, ``set_start_method``, ``get_context``, ``cpu_count``...), and tensors sent to another
process (a child's arguments, ``Queue.put``) travel as shared-memory handles, never as pickled
data: both processes then see the same storage. :func:`spawn` and :func:`start_processes` run
``fn(i, *args)`` in ``nprocs`` children and, when one fails, end the others and raise
:class:`ProcessRaisedException` (with the child's traceback) or :class:`ProcessExitedException`.

Pickle is used here only for the local hand-off between a parent and the children it starts
(functions and small arguments), as Python's multiprocessing does; never on a network.

Example (hogwild):
    >>> import tensorbrain as tb, tensorbrain.multiprocessing as mp    # doctest: +SKIP
    >>> model = tb.nn.Linear(4, 1); model.share_memory()                # doctest: +SKIP
    >>> mp.spawn(train, args=(model,), nprocs=2)                        # doctest: +SKIP
"""
from __future__ import annotations

import multiprocessing as _mp
from multiprocessing import *  # noqa: F401,F403  (torch.multiprocessing re-exports it too)

from .spawn import (ProcessContext, ProcessException, ProcessExitedException,  # noqa: F401
                    ProcessRaisedException, spawn, start_processes)

__all__ = _mp.__all__ + ["spawn", "start_processes", "ProcessContext", "ProcessException",
                         "ProcessRaisedException", "ProcessExitedException",
                         "get_sharing_strategy", "set_sharing_strategy",
                         "get_all_sharing_strategies"]

_reductions_ready = False


def _ensure_reductions() -> None:
    global _reductions_ready
    if not _reductions_ready:
        from .reductions import init_reductions
        init_reductions()
        _reductions_ready = True


def get_all_sharing_strategies():
    """The ways tensors can be shared: only ``'file_system'`` (named POSIX shared memory)."""
    return {"file_system"}


def get_sharing_strategy() -> str:
    """Always ``'file_system'``: segments are named files under /dev/shm."""
    return "file_system"


def set_sharing_strategy(new_strategy: str) -> None:
    """Accepts ``'file_system'``; torch's ``'file_descriptor'`` is not supported here.

    Args:
        new_strategy: ``'file_system'`` (the only one supported).
    """
    if new_strategy != "file_system":
        raise ValueError(f"sharing strategy {new_strategy!r} is not supported by TensorBrain; "
                         f"only 'file_system' (named /dev/shm segments) is")


_ensure_reductions()
