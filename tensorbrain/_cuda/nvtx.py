"""``tb.cuda.nvtx`` (``torch.cuda.nvtx``): NVTX ranges and marks for Nsight, through CuPy.

Without a GPU (or a CuPy without NVTX) each call raises, as torch's build without CUDA does;
``range(msg)`` is a context manager that pushes on entry and pops on exit.
"""
from __future__ import annotations

import contextlib

from .. import _xp


def _nvtx():
    cp = _xp.cupy() if _xp.cuda_available() else None
    nvtx = getattr(getattr(cp, "cuda", None), "nvtx", None)
    if nvtx is None or not getattr(nvtx, "available", False):
        raise RuntimeError(f"NVTX functions not installed: they need CuPy with NVTX on a GPU "
                           f"({_xp._CUPY_ERROR or 'this CuPy has no NVTX'})")
    return nvtx


def range_push(msg: str) -> int:
    """Open a nested NVTX range named ``msg``.

    Args:
        msg: the range's name.

    Returns:
        int: 0 (torch returns the depth; CuPy does not report it).
    """
    _nvtx().RangePush(msg)
    return 0


def range_pop() -> int:
    """Close the innermost NVTX range.

    Returns:
        int: 0.
    """
    _nvtx().RangePop()
    return 0


def mark(msg: str) -> None:
    """An instantaneous NVTX marker named ``msg``.

    Args:
        msg: the marker's name.
    """
    _nvtx().Mark(msg)


@contextlib.contextmanager
def range(msg: str, *args, **kwargs):  # noqa: A001  (torch's name)
    """``with tb.cuda.nvtx.range("step"):``: an NVTX range around the block.

    Args:
        msg: the range's name; formatted with ``args``/``kwargs`` when given, as torch's.
        *args: format arguments.
        **kwargs: format arguments.
    """
    range_push(msg.format(*args, **kwargs) if args or kwargs else msg)
    try:
        yield
    finally:
        range_pop()


__all__ = ["mark", "range", "range_pop", "range_push"]
