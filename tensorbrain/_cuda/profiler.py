"""``tb.cuda.profiler`` (``torch.cuda.profiler``): ``start()``/``stop()`` of the CUDA
profiler (``cudaProfilerStart``/``Stop``, for Nsight's capture range) and ``profile()``, a
context running both, through CuPy. Without a GPU each raises, as torch's build without CUDA.
"""
from __future__ import annotations

import contextlib

from .. import _xp


def start() -> None:
    """Start the CUDA profiler's capture.

    Raises:
        RuntimeError: no usable GPU.
    """
    _xp.cupy().cuda.profiler.start()


def stop() -> None:
    """Stop the CUDA profiler's capture.

    Raises:
        RuntimeError: no usable GPU.
    """
    _xp.cupy().cuda.profiler.stop()


@contextlib.contextmanager
def profile():
    """``with tb.cuda.profiler.profile():`` captures the block."""
    start()
    try:
        yield
    finally:
        stop()


def init(output_file=None, flags=None, output_mode="key_value") -> None:
    """Accepted (the legacy nvprof configuration; Nsight is configured on its command line).

    Args:
        output_file: accepted.
        flags: accepted.
        output_mode: accepted.
    """


__all__ = ["init", "profile", "start", "stop"]
