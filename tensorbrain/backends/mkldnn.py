"""``tb.backends.mkldnn``: TensorBrain does not use oneDNN; CPU math is NumPy's BLAS.

``enabled`` is stored so programs that set it run; it has no effect.
"""
from __future__ import annotations

enabled = True


def is_available() -> bool:
    """False: TensorBrain never calls oneDNN (mkldnn)."""
    return False
