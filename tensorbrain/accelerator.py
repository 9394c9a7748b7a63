"""``tb.accelerator``: the device-agnostic accelerator API of torch 2.6+, on TensorBrain.

The only accelerator TensorBrain knows is CUDA (through CuPy). Without a GPU,
``current_accelerator()`` is None and ``is_available()`` is False, as in torch.

>>> import tensorbrain as tb
>>> dev = tb.accelerator.current_accelerator() if tb.accelerator.is_available() else tb.device("cpu")
>>> dev.type in ("cpu", "cuda")
True
"""
from __future__ import annotations

from . import _xp
from ._device import device


def is_available() -> bool:
    """True when a CUDA GPU can be used."""
    return _xp.cuda_available()


def current_accelerator(check_available: bool = False):
    """``device('cuda')`` when a GPU is usable, else None.

    Args:
        check_available: return None unless the accelerator is usable (always checked here).
    """
    return device("cuda") if _xp.cuda_available() else None


def device_count() -> int:
    """How many GPUs (0 without CUDA)."""
    from . import cuda
    return cuda.device_count()


def current_device_index() -> int:
    """The current GPU's index; raises a clear error without CUDA."""
    from . import cuda
    return cuda.current_device()


def set_device_index(index) -> None:
    """Make GPU ``index`` current; raises a clear error without CUDA.

    Args:
        index: the GPU index.
    """
    from . import cuda
    cuda.set_device(index)


def synchronize(index=None) -> None:
    """Wait for the GPU's queued work (raises without CUDA).

    Args:
        index: the GPU index (None: the current one).
    """
    from . import cuda
    cuda.synchronize(index)
