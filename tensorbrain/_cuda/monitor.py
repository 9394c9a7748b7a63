"""The GPU monitoring and small device helpers of ``tb.cuda`` (``torch.cuda.utilization``,
``temperature``, ``power_draw``, ``clock_rate``, ``device_memory_used``,
``list_gpu_processes``, ``device_of``, ``check_error``), and the allocator names TensorBrain
refuses (``MemPool``, ``use_mem_pool``, ``CUDAPluggableAllocator``, ``ExternalStream``,
``memory_snapshot``).

The figures come from NVML through ``pynvml`` (the ``nvidia-ml-py`` package), as torch's do;
without it each raises torch's ``ModuleNotFoundError`` (``list_gpu_processes`` returns torch's
message instead). The device index is NVML's (``CUDA_VISIBLE_DEVICES`` is not remapped).
"""
from __future__ import annotations

from .. import _xp
from .._unsupported import unsupported, unsupported_class

_CUPY_POOL = ("TensorBrain allocates GPU memory from CuPy's memory pool, which has no "
              "pluggable or per-block pools")


class CudaError(RuntimeError):
    """A CUDA runtime error code turned into an exception (``torch.cuda.CudaError``)."""

    def __init__(self, code: int) -> None:
        msg = f"CUDA error {code}"
        if _xp._cupy is not None:
            try:
                rt = _xp._cupy.cuda.runtime
                msg = f"{rt.getErrorName(code)}: {rt.getErrorString(code)}"
            except Exception:
                pass
        super().__init__(f"{msg} ({code})")


def check_error(res: int) -> None:
    """Raise :class:`CudaError` when ``res`` (a CUDA runtime result code) is not success (0).

    Args:
        res: the code a CUDA runtime call returned.

    Raises:
        CudaError: ``res`` is not 0.
    """
    if int(res) != 0:
        raise CudaError(int(res))


class device_of:
    """``with tb.cuda.device_of(t):`` makes ``t``'s GPU current for the block; a no-op for a
    tensor on the CPU (``torch.cuda.device_of``).

    Args:
        obj: a tensor (or storage) whose device is used.
    """

    def __init__(self, obj) -> None:
        from .._cuda_streams import device
        idx = obj.get_device() if getattr(obj, "is_cuda", False) else -1
        self._ctx = device(idx)

    def __enter__(self):
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc) -> bool:
        return self._ctx.__exit__(*exc)


def _nvml_index(device) -> int:
    if device is None:
        from ..cuda import current_device
        return current_device()
    if isinstance(device, int):
        return device
    from .._device import device as _device
    d = _device(device) if isinstance(device, str) else device
    return 0 if d.index is None else int(d.index)


def _handle(device):
    try:
        import pynvml  # type: ignore
    except ImportError as e:
        raise ModuleNotFoundError("nvidia-ml-py does not seem to be installed or it can't be "
                                  "imported.") from e
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_DriverNotLoaded as e:
        raise RuntimeError("cuda driver can't be loaded, is cuda enabled?") from e
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(_nvml_index(device))


def utilization(device=None) -> int:
    """Percent of the last sample period a kernel ran on the GPU (``nvidia-smi``'s figure).

    Raises:
        ModuleNotFoundError: ``nvidia-ml-py`` is not installed.
    """
    nvml, h = _handle(device)
    return nvml.nvmlDeviceGetUtilizationRates(h).gpu


def temperature(device=None) -> int:
    """The GPU die's temperature in degrees C.

    Raises:
        ModuleNotFoundError: ``nvidia-ml-py`` is not installed.
    """
    nvml, h = _handle(device)
    return nvml.nvmlDeviceGetTemperature(h, 0)


def power_draw(device=None) -> int:
    """The GPU's power draw in mW.

    Raises:
        ModuleNotFoundError: ``nvidia-ml-py`` is not installed.
    """
    nvml, h = _handle(device)
    return nvml.nvmlDeviceGetPowerUsage(h)


def clock_rate(device=None) -> int:
    """The SM clock in MHz.

    Raises:
        ModuleNotFoundError: ``nvidia-ml-py`` is not installed.
    """
    nvml, h = _handle(device)
    return nvml.nvmlDeviceGetClockInfo(h, 1)


def device_memory_used(device=None) -> int:
    """Bytes of GPU memory in use on the device, by every process (``nvidia-smi``'s figure).

    Raises:
        ModuleNotFoundError: ``nvidia-ml-py`` is not installed.
    """
    nvml, h = _handle(device)
    return nvml.nvmlDeviceGetMemoryInfo(h).used


def list_gpu_processes(device=None) -> str:
    """A printout of the processes on the GPU and their memory, as torch's; torch's message
    when ``nvidia-ml-py`` is missing."""
    try:
        nvml, h = _handle(device)
    except ModuleNotFoundError:
        return "pynvml module not found, please install nvidia-ml-py"
    except RuntimeError as e:
        return str(e)
    procs = nvml.nvmlDeviceGetComputeRunningProcesses(h)
    lines = [f"GPU:{_nvml_index(device)}"]
    if not procs:
        lines.append("no processes are running")
    for p in procs:
        lines.append(f"process {p.pid:>10d} uses {p.usedGpuMemory / (1024 * 1024):>12.3f} MB "
                     f"GPU memory")
    return "\n".join(lines)


memory_snapshot = unsupported("torch.cuda.memory_snapshot", _CUPY_POOL + " to list",
                              "tb.cuda.memory_stats() and tb.cuda.memory_summary()")
MemPool = unsupported_class("torch.cuda.MemPool", _CUPY_POOL, "the default pool")
use_mem_pool = unsupported("torch.cuda.use_mem_pool", _CUPY_POOL, "the default pool")
CUDAPluggableAllocator = unsupported_class(
    "torch.cuda.memory.CUDAPluggableAllocator", _CUPY_POOL,
    "cupy.cuda.set_allocator before TensorBrain allocates")
change_current_allocator = unsupported(
    "torch.cuda.memory.change_current_allocator", _CUPY_POOL,
    "cupy.cuda.set_allocator before TensorBrain allocates")
ExternalStream = unsupported_class("torch.cuda.ExternalStream",
                                   "TensorBrain's streams are CuPy streams it creates",
                                   "tb.cuda.Stream()")

__all__ = ["CUDAPluggableAllocator", "CudaError", "ExternalStream", "MemPool",
           "change_current_allocator", "check_error", "clock_rate", "device_memory_used",
           "device_of", "list_gpu_processes", "memory_snapshot", "power_draw", "temperature",
           "use_mem_pool", "utilization"]
