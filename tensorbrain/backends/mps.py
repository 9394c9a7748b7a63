"""``tb.backends.mps``: Apple's Metal backend does not exist in TensorBrain."""
from __future__ import annotations


def is_available() -> bool:
    """False: TensorBrain runs on NumPy (CPU) and CuPy (NVIDIA GPUs) only."""
    return False


def is_built() -> bool:
    """False: there is no MPS support to build."""
    return False
