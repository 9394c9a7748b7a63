"""``tb.accelerator``: the device-agnostic accelerator API of torch 2.6+, on TensorBrain.

The only accelerator TensorBrain knows is CUDA (through CuPy): each function here is
``tb.cuda``'s (memory figures from CuPy's pool, streams, synchronize). Without a GPU,
``current_accelerator()`` is None, ``is_available()`` is False and ``device_count()`` is 0, and
the functions that need a device raise torch's "Cannot access accelerator device when none is
available" (a RuntimeError), as in torch.

>>> import tensorbrain as tb
>>> dev = tb.accelerator.current_accelerator() if tb.accelerator.is_available() else tb.device("cpu")
>>> dev.type in ("cpu", "cuda")
True
"""
from __future__ import annotations

from . import _xp
from ._device import device
from ._unsupported import unsupported_class

_NONE = "Cannot access accelerator device when none is available."


def _cuda():
    """``tb.cuda``, or torch's RuntimeError when there is no accelerator."""
    if not _xp.cuda_available():
        raise RuntimeError(_NONE)
    from . import cuda
    return cuda


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
    """The current GPU's index.

    Raises:
        RuntimeError: no accelerator.
    """
    return _cuda().current_device()


current_device_idx = current_device_index   # torch's older name


def set_device_index(index) -> None:
    """Make GPU ``index`` current.

    Args:
        index: the GPU index (or a device).

    Raises:
        RuntimeError: no accelerator.
    """
    _cuda().set_device(index)


set_device_idx = set_device_index


class device_index:
    """``with tb.accelerator.device_index(i):`` makes GPU ``i`` current for the block; None
    does nothing.

    Args:
        device: the GPU index, or None.
    """

    def __init__(self, device):
        self.idx, self._ctx = device, None

    def __enter__(self):
        if self.idx is not None:
            self._ctx = _cuda().device(self.idx)
            self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)
        return False


def synchronize(device=None) -> None:
    """Wait for the GPU's queued work.

    Args:
        device: the GPU index (None: the current one).

    Raises:
        RuntimeError: no accelerator.
    """
    _cuda().synchronize(device)


def current_stream(device=None):
    """The stream TensorBrain's GPU ops run on now (a ``tb.cuda.Stream``).

    Args:
        device: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    return _cuda().current_stream(device)


def set_stream(stream) -> None:
    """Make ``stream`` current.

    Args:
        stream: a ``tb.cuda.Stream``.

    Raises:
        RuntimeError: no accelerator.
    """
    _cuda().set_stream(stream)


def get_device_capability(device=None) -> dict:
    """What the accelerator supports, as torch's: ``{"supported_dtypes": [...]}``.

    Args:
        device: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    _cuda()
    from . import _dtype
    return {"supported_dtypes": [_dtype.bool_, _dtype.uint8, _dtype.int8, _dtype.int16,
                                 _dtype.int32, _dtype.int64, _dtype.float16, _dtype.float32,
                                 _dtype.float64]}


def empty_cache() -> None:
    """Free the memory pool's cached GPU blocks.

    Raises:
        RuntimeError: no accelerator.
    """
    _cuda().empty_cache()


def empty_host_cache() -> None:
    """Free CuPy's cached pinned host blocks.

    Raises:
        RuntimeError: no accelerator.
    """
    _cuda()
    _xp.cupy().get_default_pinned_memory_pool().free_all_blocks()


def memory_allocated(device_index=None) -> int:
    """Bytes held by live tensors on the GPU (``tb.cuda.memory_allocated``).

    Args:
        device_index: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    return _cuda().memory_allocated(device_index)


def max_memory_allocated(device_index=None) -> int:
    """The peak of :func:`memory_allocated` (``tb.cuda.max_memory_allocated``).

    Args:
        device_index: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    return _cuda().max_memory_allocated(device_index)


def memory_reserved(device_index=None) -> int:
    """Bytes the memory pool holds (``tb.cuda.memory_reserved``).

    Args:
        device_index: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    return _cuda().memory_reserved(device_index)


def max_memory_reserved(device_index=None) -> int:
    """The peak of :func:`memory_reserved` (``tb.cuda.max_memory_reserved``).

    Args:
        device_index: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    return _cuda().max_memory_reserved(device_index)


def memory_stats(device_index=None) -> dict:
    """``tb.cuda.memory_stats``.

    Args:
        device_index: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    return _cuda().memory_stats(device_index)


def reset_peak_memory_stats(device_index=None) -> None:
    """``tb.cuda.reset_peak_memory_stats``.

    Args:
        device_index: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    _cuda().reset_peak_memory_stats(device_index)


reset_accumulated_memory_stats = reset_peak_memory_stats


def get_memory_info(device_index=None) -> tuple[int, int]:
    """``(free, total)`` bytes of the GPU (``tb.cuda.mem_get_info``).

    Args:
        device_index: the GPU; None for the current one.

    Raises:
        RuntimeError: no accelerator.
    """
    return _cuda().mem_get_info(device_index)


Graph = unsupported_class("torch.accelerator.Graph", "TensorBrain does not capture CUDA graphs",
                          "the eager model")
