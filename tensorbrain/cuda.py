"""``tb.cuda``: honest answers about GPUs. Without CuPy or a GPU everything says so clearly."""
from __future__ import annotations

from . import _xp


def is_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    return _xp.cuda_available()


def device_count() -> int:
    return _xp._cupy_devices if _xp.cuda_available() else 0


def current_device() -> int:
    return _xp.cupy().cuda.runtime.getDevice()


def set_device(dev) -> None:
    from ._device import device as _device
    if not isinstance(dev, int):
        dev = _device(dev).index or 0
    _xp.cupy().cuda.Device(dev).use()


def synchronize(dev=None) -> None:
    cp = _xp.cupy()
    if dev is None:
        cp.cuda.Device().synchronize()
    else:
        from ._device import device as _device
        cp.cuda.Device(dev if isinstance(dev, int) else (_device(dev).index or 0)).synchronize()


def why_unavailable() -> str | None:
    """The reason CUDA cannot be used, or None when it can."""
    return None if _xp.cuda_available() else f"{_xp._CUPY_ERROR}; {_xp.CUDA_INSTALL_HINT}"
