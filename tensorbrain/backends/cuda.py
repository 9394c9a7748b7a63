"""``tb.backends.cuda``: ``matmul.allow_tf32`` and friends.

TensorBrain's GPU matmuls are CuPy's, which run in full float32 unless CuPy itself was told
otherwise (the ``CUPY_TF32=1`` environment variable, read when CuPy starts). The flags here are
stored so programs that set them run; they do not change TensorBrain's numerics.
"""
from __future__ import annotations

from .. import _xp


class _Matmul:
    """``tb.backends.cuda.matmul``: ``allow_tf32`` (default False, as torch), stored only."""

    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _Matmul()


def is_built() -> bool:
    """True when CuPy (TensorBrain's CUDA path) can be used."""
    return _xp.cuda_available()


def preferred_linalg_library(backend=None):
    """Accepted for compatibility; CuPy chooses its own linear-algebra library."""
    return "default"
