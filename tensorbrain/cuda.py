"""``tb.cuda``: honest answers about GPUs. Without CuPy or a GPU everything says so clearly.

Memory figures (``memory_allocated``, ``max_memory_allocated``, ``memory_stats``...) come from
CuPy's memory pool (``tensorbrain/_cuda_memory.py``); streams, events and ``device`` are
CuPy's (``tensorbrain/_cuda_streams.py``); ``tb.cuda.FloatTensor`` & co. are the legacy typed
classes (``tensorbrain/_legacy_types.py``); ``get_rng_state``/``set_rng_state`` are in
``tensorbrain/_cuda/random.py`` and ``nvtx`` in ``tensorbrain/_cuda/nvtx.py``. CUDA graphs
are refused (``tensorbrain/_unsupported.py``); ``cudart()`` is the CUDA runtime's profiler and
host-registration calls through CuPy.
"""
from __future__ import annotations

from . import _xp
from ._cuda_memory import (empty_cache, max_memory_allocated, max_memory_cached,  # noqa: F401
                           max_memory_reserved, mem_get_info, memory_allocated, memory_cached,
                           memory_reserved, memory_stats, memory_summary,
                           reset_max_memory_allocated, reset_max_memory_cached,
                           reset_peak_memory_stats, set_per_process_memory_fraction)
from ._cuda_streams import (Event, Stream, StreamContext, current_stream,  # noqa: F401
                            default_stream, device, is_current_stream_capturing, set_stream,
                            stream)
from ._unsupported import unsupported, unsupported_class

_GRAPHS = "TensorBrain does not capture CUDA graphs (its GPU ops are CuPy kernels run eagerly)"
CUDAGraph = unsupported_class("torch.cuda.CUDAGraph", _GRAPHS, "the eager model")
graph = unsupported_class("torch.cuda.graph", _GRAPHS, "the eager model")
graph_pool_handle = unsupported("torch.cuda.graph_pool_handle", _GRAPHS)
make_graphed_callables = unsupported("torch.cuda.make_graphed_callables", _GRAPHS,
                                     "the callables themselves")


class _CudaRuntime:
    """What ``torch.cuda.cudart()`` returns: the CUDA runtime calls programs make through it,
    on CuPy's binding (each returns 0, ``cudaSuccess``, or raises CuPy's CUDARuntimeError)."""

    @staticmethod
    def cudaProfilerStart() -> int:  # noqa: N802  (CUDA's name)
        """Start the CUDA profiler's capture (``nsys --capture-range=cudaProfilerApi``)."""
        _xp.cupy().cuda.runtime.profilerStart()
        return 0

    @staticmethod
    def cudaProfilerStop() -> int:  # noqa: N802
        """Stop the CUDA profiler's capture."""
        _xp.cupy().cuda.runtime.profilerStop()
        return 0

    @staticmethod
    def cudaHostRegister(ptr: int, size: int, flags: int) -> int:  # noqa: N802
        """Page-lock ``size`` bytes of host memory at ``ptr``.

        Args:
            ptr: the address.
            size: bytes.
            flags: ``cudaHostRegister`` flags.
        """
        _xp.cupy().cuda.runtime.hostRegister(ptr, size, flags)
        return 0

    @staticmethod
    def cudaHostUnregister(ptr: int) -> int:  # noqa: N802
        """Undo :meth:`cudaHostRegister`.

        Args:
            ptr: the address.
        """
        _xp.cupy().cuda.runtime.hostUnregister(ptr)
        return 0


def cudart() -> _CudaRuntime:
    """The CUDA runtime binding, as ``torch.cuda.cudart()``: ``cudaProfilerStart()`` /
    ``cudaProfilerStop()`` (and ``cudaHostRegister``/``cudaHostUnregister``), on CuPy.

    Returns:
        The runtime object.

    Raises:
        AssertionError: no usable GPU (torch's error type on a build without CUDA), saying why.
    """
    if not _xp.cuda_available():
        raise AssertionError(f"torch.cuda.cudart(): CUDA is not available ({why_unavailable()})")
    return _CudaRuntime()

#: What torch raises on a GPU out of memory: CuPy's error when CuPy is there (so
#: ``except tb.cuda.OutOfMemoryError`` catches what TensorBrain's GPU ops raise).
OutOfMemoryError: type = (_xp._cupy.cuda.memory.OutOfMemoryError if _xp._cupy is not None
                          else type("OutOfMemoryError", (RuntimeError,),
                                    {"__module__": "tensorbrain.cuda",
                                     "__doc__": "A GPU ran out of memory (torch's class)."}))


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


def is_initialized() -> bool:
    """Whether CUDA can be used here (TensorBrain initialises it at import, with CuPy)."""
    return _xp.cuda_available()


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: CuPy has no bfloat16, so TensorBrain's CUDA tensors never hold it (float16 is
    autocast's GPU dtype); also False without a GPU, as torch's.

    Args:
        including_emulation: accepted for torch compatibility.
    """
    return False


def get_arch_list() -> list[str]:
    """The compute capabilities CuPy's kernels can be compiled for here (``[]`` without CUDA).

    Returns:
        list[str]: e.g. ``["sm_90"]`` (CuPy compiles for the GPU it runs on).
    """
    if not _xp.cuda_available():
        return []
    major, minor = get_device_capability()
    return [f"sm_{major}{minor}"]


class _CudaDeviceProperties:
    """What ``get_device_properties`` returns: torch's attribute names."""

    def __init__(self, props: dict):
        def text(v):
            return v.decode() if isinstance(v, bytes) else str(v)
        self.name = text(props.get("name", ""))
        self.major, self.minor = int(props["major"]), int(props["minor"])
        self.total_memory = int(props["totalGlobalMem"])
        self.multi_processor_count = int(props["multiProcessorCount"])
        self.L2_cache_size = int(props.get("l2CacheSize", 0))
        self.is_integrated = bool(props.get("integrated", 0))
        self.is_multi_gpu_board = bool(props.get("isMultiGpuBoard", 0))
        self.warp_size = int(props.get("warpSize", 32))

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor="
                f"{self.minor}, total_memory={self.total_memory >> 20}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None) -> _CudaDeviceProperties:  # noqa: F811
    """The GPU's name, compute capability, memory and multiprocessor count.

    Args:
        device: an index, ``"cuda:N"`` or device; None for the current one.

    Returns:
        An object with torch's attributes (``name``, ``major``, ``minor``, ``total_memory``,
        ``multi_processor_count``, ``L2_cache_size``, ``warp_size``).

    Raises:
        RuntimeError: no usable GPU.
    """
    cp = _xp.cupy()
    from ._cuda_streams import _device_index
    index = _device_index(device)
    index = cp.cuda.runtime.getDevice() if index is None else index
    return _CudaDeviceProperties(cp.cuda.runtime.getDeviceProperties(index))


def get_device_capability(device=None) -> tuple[int, int]:  # noqa: F811
    """The GPU's compute capability ``(major, minor)``.

    Args:
        device: an index, ``"cuda:N"`` or device; None for the current one.

    Returns:
        tuple[int, int]: e.g. ``(9, 0)`` for an H100.

    Raises:
        RuntimeError: no usable GPU.
    """
    p = get_device_properties(device)
    return p.major, p.minor


def get_device_name(device=None) -> str:  # noqa: F811
    """The GPU's name, e.g. ``"NVIDIA H100 80GB HBM3"``.

    Args:
        device: an index, ``"cuda:N"`` or device; None for the current one.

    Returns:
        str: the name.

    Raises:
        RuntimeError: no usable GPU.
    """
    return get_device_properties(device).name


def ipc_collect() -> None:
    """Nothing to collect: TensorBrain shares no CUDA memory between processes through IPC
    handles (a no-op, also without CUDA)."""


# `tb.cuda` is this one module, not a package (it predates tb.cuda.amp). Naming a folder as its
# package path lets `import tensorbrain.cuda.amp` / `from tensorbrain.cuda.amp import autocast`
# find tensorbrain/_cuda/amp.py, as `torch.cuda.amp` is imported.
import os as _os  # noqa: E402

__path__ = [_os.path.join(_os.path.dirname(__file__), "_cuda")]


#: Submodules of ``tb.cuda`` (files in ``tensorbrain/_cuda/``) and the names served from them.
_LAZY = {"amp": "amp", "nvtx": "nvtx", "random": "random", "memory": "memory",
         "profiler": "profiler", "nccl": "nccl", "graphs": "graphs", "comm": "comm",
         "monitor": "monitor",
         "get_rng_state": "random", "set_rng_state": "random", "get_rng_state_all": "random",
         "set_rng_state_all": "random", "initial_seed": "random", "seed": "random",
         "seed_all": "random", "default_generators": "random"}
_LEGACY_TYPES = ("FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "ByteTensor",
                 "CharTensor", "ShortTensor", "IntTensor", "LongTensor", "BoolTensor")


_LAZY.update({name: "monitor" for name in (
    "CUDAPluggableAllocator", "CudaError", "ExternalStream", "MemPool", "check_error",
    "clock_rate", "device_memory_used", "device_of", "list_gpu_processes", "memory_snapshot",
    "power_draw", "temperature", "use_mem_pool", "utilization")})


def __getattr__(name):
    import importlib
    if name in _LEGACY_TYPES:   # tb.cuda.FloatTensor: the classes live with the CPU ones
        return getattr(importlib.import_module(".cuda.legacy", __package__), name)
    if name in _LAZY:
        module = importlib.import_module(f".cuda.{_LAZY[name]}", __package__)
        return module if _LAZY[name] == name else getattr(module, name)
    raise AttributeError(f"module 'tensorbrain.cuda' has no attribute {name!r}")
