"""GPU memory figures, as ``torch.cuda.memory_allocated`` & co., from CuPy's memory pool.

CuPy's default pool is TensorBrain's caching allocator (as torch's CUDACachingAllocator is
torch's): ``memory_allocated`` is the bytes held by live arrays (``pool.used_bytes()``),
``memory_reserved`` what the pool holds from the driver, live or cached
(``pool.total_bytes()``); ``empty_cache`` frees the cached part.

CuPy keeps no peaks, so the first call of any function here (``reset_peak_memory_stats`` is the
usual one, at the start of the measured region) wraps the pool's allocator with one that raises
the peaks after each allocation: a Python call per allocation, paid only by programs that ask
for peaks. Before that call the peak is what is in use when it is first asked.

Without a GPU these give torch's figures there: ``memory_allocated()`` and the other counters
are 0 and ``memory_stats()`` is empty, as torch's are before CUDA starts; the ones torch cannot
answer without CUDA (``mem_get_info``, the resets) raise a clear error.

>>> import tensorbrain as tb
>>> tb.cuda.memory_allocated() if not tb.cuda.is_available() else 0
0
"""
from __future__ import annotations

import collections
import threading

from . import _xp

_lock = threading.Lock()
_peak: dict[int, list[int]] = {}   # device -> [peak allocated, peak reserved]
_tracking = [False]


def _pool():
    return _xp.cupy().get_default_memory_pool()


def _index(device) -> int:
    cp = _xp.cupy()
    if device is None:
        return cp.cuda.runtime.getDevice()
    if isinstance(device, int):
        return device
    index = getattr(device, "index", None)
    if index is None and isinstance(device, str):
        _, _, ordinal = device.partition(":")
        index = int(ordinal) if ordinal else None
    return cp.cuda.runtime.getDevice() if index is None else int(index)


def _used(pool, index: int) -> tuple[int, int]:
    cp = _xp.cupy()
    with cp.cuda.Device(index):
        return pool.used_bytes(), pool.total_bytes()


def _raise_peaks(index: int) -> list[int]:
    used, total = _used(_pool(), index)
    with _lock:
        peak = _peak.setdefault(index, [used, total])
        peak[0] = max(peak[0], used)
        peak[1] = max(peak[1], total)
        return peak


def _track() -> None:
    """Wrap the pool's allocator so that every allocation raises the peaks (once)."""
    if _tracking[0]:
        return
    cp = _xp.cupy()
    pool = _pool()
    malloc, used_bytes, total_bytes = pool.malloc, pool.used_bytes, pool.total_bytes

    def tracked(size):
        mem = malloc(size)   # on the current device, whose figures used_bytes() gives
        used, peak = used_bytes(), _peak.get(mem.device_id)
        if peak is None:
            _peak[mem.device_id] = [used, total_bytes()]
        else:
            peak[0] = max(peak[0], used)
            peak[1] = max(peak[1], total_bytes())
        return mem
    cp.cuda.set_allocator(tracked)
    _tracking[0] = True


def _stat(device, what: int, peak: bool) -> int:
    if not _xp.cuda_available():
        return 0
    index = _index(device)
    _track()
    if peak:
        return _raise_peaks(index)[what]
    return _used(_pool(), index)[what]


def memory_allocated(device=None) -> int:
    """Bytes held by live CUDA tensors on ``device`` (0 without a GPU).

    Args:
        device: a device, its index or ``"cuda:N"``; None for the current one.

    Returns:
        int: bytes.
    """
    return _stat(device, 0, False)


def max_memory_allocated(device=None) -> int:
    """The most bytes held by live tensors since the peaks were first asked for or reset.

    Args:
        device: a device, its index or ``"cuda:N"``; None for the current one.

    Returns:
        int: bytes (0 without a GPU).
    """
    return _stat(device, 0, True)


def memory_reserved(device=None) -> int:
    """Bytes the memory pool holds from the driver (live and cached) on ``device``.

    Args:
        device: a device, its index or ``"cuda:N"``; None for the current one.

    Returns:
        int: bytes (0 without a GPU).
    """
    return _stat(device, 1, False)


def max_memory_reserved(device=None) -> int:
    """The most bytes the pool held since the peaks were first asked for or reset.

    Args:
        device: a device, its index or ``"cuda:N"``; None for the current one.

    Returns:
        int: bytes (0 without a GPU).
    """
    return _stat(device, 1, True)


memory_cached = memory_reserved          # torch's old names
max_memory_cached = max_memory_reserved


def reset_peak_memory_stats(device=None) -> None:
    """Start the peaks again from what is in use now.

    Args:
        device: a device, its index or ``"cuda:N"``; None for the current one.

    Raises:
        RuntimeError: no usable GPU.
    """
    index = _index(device)   # raises without CUDA
    _track()
    used, total = _used(_pool(), index)
    with _lock:
        _peak[index] = [used, total]


reset_max_memory_allocated = reset_peak_memory_stats
reset_max_memory_cached = reset_peak_memory_stats


def memory_stats(device=None) -> dict:
    """torch's memory statistics that the pool can give, under torch's keys.

    ``allocated_bytes.all.current`` / ``.peak``, ``reserved_bytes.all.current`` / ``.peak``,
    ``inactive_split_bytes.all.current`` (cached, free) and ``num_alloc_retries`` (0).

    Args:
        device: a device, its index or ``"cuda:N"``; None for the current one.

    Returns:
        collections.OrderedDict: empty without a GPU, as torch's before CUDA starts.
    """
    out: collections.OrderedDict = collections.OrderedDict()
    if not _xp.cuda_available():
        return out
    index = _index(device)
    _track()
    used, total = _used(_pool(), index)
    peak = _raise_peaks(index)
    out["allocated_bytes.all.current"] = used
    out["allocated_bytes.all.peak"] = peak[0]
    out["active_bytes.all.current"] = used
    out["reserved_bytes.all.current"] = total
    out["reserved_bytes.all.peak"] = peak[1]
    out["inactive_split_bytes.all.current"] = total - used
    out["num_alloc_retries"] = 0
    out["num_ooms"] = 0
    return out


def memory_summary(device=None, abbreviated: bool = False) -> str:
    """A short table of :func:`memory_stats`, as ``torch.cuda.memory_summary`` prints.

    Args:
        device: a device, its index or ``"cuda:N"``; None for the current one.
        abbreviated: accepted for torch compatibility.

    Returns:
        str: the table.

    Raises:
        RuntimeError: no usable GPU.
    """
    stats = memory_stats(_index(device))
    mib = 1 << 20
    rows = [("Allocated memory", "allocated_bytes.all"), ("Reserved memory", "reserved_bytes.all")]
    lines = ["|  TensorBrain CUDA memory summary (CuPy memory pool)  |",
             "|  name               |  current    |  peak       |"]
    for label, key in rows:
        lines.append(f"|  {label:<18} | {stats[key + '.current'] / mib:8.1f} MiB | "
                     f"{stats[key + '.peak'] / mib:8.1f} MiB |")
    return "\n".join(lines)


def mem_get_info(device=None) -> tuple[int, int]:
    """``(free, total)`` bytes of the GPU, as the driver reports them.

    Args:
        device: a device, its index or ``"cuda:N"``; None for the current one.

    Returns:
        tuple[int, int]: free and total bytes.

    Raises:
        RuntimeError: no usable GPU.
    """
    cp = _xp.cupy()
    with cp.cuda.Device(_index(device)):
        free, total = cp.cuda.runtime.memGetInfo()
    return int(free), int(total)


def empty_cache() -> None:
    """Free the pool's cached (unused) GPU blocks; a no-op without CUDA."""
    if _xp.cuda_available():
        _pool().free_all_blocks()


def set_per_process_memory_fraction(fraction: float, device=None) -> None:
    """Cap the pool at ``fraction`` of the GPU's memory (CuPy's ``set_limit``).

    Args:
        fraction: between 0 and 1.
        device: a device, its index or ``"cuda:N"``; None for the current one.

    Raises:
        ValueError: ``fraction`` outside [0, 1].
        RuntimeError: no usable GPU.
    """
    if not 0 <= fraction <= 1:
        raise ValueError(f"Invalid fraction value: {fraction}. Allowed range: 0~1")
    cp = _xp.cupy()
    with cp.cuda.Device(_index(device)):
        _pool().set_limit(fraction=fraction)


__all__ = ["empty_cache", "max_memory_allocated", "max_memory_cached", "max_memory_reserved",
           "mem_get_info", "memory_allocated", "memory_cached", "memory_reserved",
           "memory_stats", "memory_summary", "reset_max_memory_allocated",
           "reset_max_memory_cached", "reset_peak_memory_stats",
           "set_per_process_memory_fraction"]
