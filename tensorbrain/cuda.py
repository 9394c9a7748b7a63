"""``tb.cuda``: honest answers about GPUs. Without CuPy or a GPU everything says so clearly."""
from __future__ import annotations

from . import _xp


def is_available() -> bool:
    """True when CuPy imports and sees at least one GPU."""
    return _xp.cuda_available()


def device_count() -> int:
    """The number of usable CUDA GPUs (0 without CuPy or a GPU).

    Returns:
        An int.
    """
    return _xp._cupy_devices if _xp.cuda_available() else 0


def current_device() -> int:
    """The index of the current CUDA device.

    Returns:
        An int.

    Raises:
        RuntimeError: CuPy is not installed or there is no GPU.
    """
    return _xp.cupy().cuda.runtime.getDevice()


def set_device(dev) -> None:
    """Make GPU ``dev`` (an index, 'cuda:N' or a device) current.

    Args:
        dev: an index, ``'cuda:N'`` or a ``tb.device``.

    Raises:
        RuntimeError: no usable GPU (as torch on a machine without CUDA), saying why and what to
            use instead.
    """
    from ._device import device as _device
    if not _xp.cuda_available():
        raise RuntimeError(f"tb.cuda.set_device({dev!r}): CUDA is not available on this machine "
                           f"({why_unavailable()}). Run on the CPU instead: device 'cpu' and "
                           f"the 'gloo' backend")
    if not isinstance(dev, int):
        dev = _device(dev).index or 0
    _xp.cupy().cuda.Device(dev).use()


def synchronize(dev=None) -> None:
    """Wait until every kernel queued on a GPU has finished.

    Args:
        dev: the device (index, 'cuda:N' or device); None for the current one.

    Raises:
        RuntimeError: CuPy is not installed or there is no GPU.
    """
    cp = _xp.cupy()
    if dev is None:
        cp.cuda.Device().synchronize()
    else:
        from ._device import device as _device
        cp.cuda.Device(dev if isinstance(dev, int) else (_device(dev).index or 0)).synchronize()


def why_unavailable() -> str | None:
    """The reason CUDA cannot be used, or None when it can."""
    return None if _xp.cuda_available() else f"{_xp._CUPY_ERROR}; {_xp.CUDA_INSTALL_HINT}"


def manual_seed(seed: int) -> None:
    """Seed the current GPU's generator (CuPy's); a no-op without CUDA, as torch's lazy seeding.

    Args:
        seed: the seed.
    """
    if _xp.cuda_available():
        _xp.cupy().random.seed(int(seed))


def manual_seed_all(seed: int) -> None:
    """Seed every GPU's generator (CuPy keeps one per device); a no-op without CUDA, as torch.

    Args:
        seed: the seed.
    """
    if not _xp.cuda_available():
        return
    cp = _xp.cupy()
    for i in range(device_count()):
        with cp.cuda.Device(i):
            cp.random.seed(int(seed))


def empty_cache() -> None:
    """Free CuPy's cached GPU blocks; a no-op without CUDA."""
    if _xp.cuda_available():
        _xp.cupy().get_default_memory_pool().free_all_blocks()


# `tb.cuda` is this one module, not a package (it predates tb.cuda.amp). Naming a folder as its
# package path lets `import tensorbrain.cuda.amp` / `from tensorbrain.cuda.amp import autocast`
# find tensorbrain/_cuda/amp.py, as `torch.cuda.amp` is imported.
import os as _os  # noqa: E402

__path__ = [_os.path.join(_os.path.dirname(__file__), "_cuda")]


def __getattr__(name):
    if name == "amp":
        import importlib
        return importlib.import_module(".cuda.amp", __package__)
    raise AttributeError(f"module 'tensorbrain.cuda' has no attribute {name!r}")
