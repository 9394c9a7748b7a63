"""``tb.backends.openmp``: TensorBrain's native module is built without OpenMP.

CPU threads come from NumPy's BLAS (``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` still set its
thread count), not from OpenMP in TensorBrain itself.
"""
from __future__ import annotations


def is_available() -> bool:
    """False: tensorbrain._C is compiled without OpenMP."""
    return False
