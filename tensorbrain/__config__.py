"""``tb.__config__`` (``torch.__config__``): how this TensorBrain was built: ``show()`` and
``parallel_info()`` describe the native module, NumPy's BLAS and the thread settings."""
from __future__ import annotations


def show() -> str:
    """The build configuration, as text.

    Returns:
        str: one line per item.
    """
    import numpy as np

    from . import __version__, _native
    native = "yes" if _native.is_available() else f"no ({_native.why_unavailable()})"
    return (f"TensorBrain {__version__} built with:\n"
            f"  - native module tensorbrain._C: {native}\n"
            f"  - NumPy {np.__version__} (BLAS: NumPy's)\n"
            f"  - GPU: CuPy when installed; NCCL through tensorbrain's own binding\n")


def parallel_info() -> str:
    """The thread settings, as text.

    Returns:
        str: the text.
    """
    from . import get_num_interop_threads, get_num_threads
    return (f"TensorBrain parallel settings:\n  at::get_num_threads() : {get_num_threads()}\n"
            f"  at::get_num_interop_threads() : {get_num_interop_threads()}\n")
