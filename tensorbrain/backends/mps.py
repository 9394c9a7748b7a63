"""``tb.backends.mps``: Apple's Metal backend does not exist in TensorBrain."""
from __future__ import annotations


def is_available() -> bool:
    """False: TensorBrain runs on NumPy (CPU) and CuPy (NVIDIA GPUs) only."""
    return False


def is_built() -> bool:
    """False: there is no MPS support to build."""
    return False


def is_macos_or_newer(major: int, minor: int) -> bool:
    """Raises RuntimeError, as torch built without MPS does (there is no MPS backend to ask).

    Raises:
        RuntimeError: always.
    """
    raise RuntimeError("Cannot execute isOnMacOSorNewer() without MPS backend.")
