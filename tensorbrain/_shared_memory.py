"""Tensor storage in POSIX shared memory, so processes on one machine can share a tensor's data.

``Tensor.share_memory_()`` moves a CPU tensor's array into a segment under ``/dev/shm``; a child
process that receives the tensor (``tensorbrain.multiprocessing``) maps the same segment, so both
see every write (hogwild training). Only a small handle (segment name, offset, shape, strides,
dtype) crosses the process boundary; the data itself is never pickled.

Lifetime: the process that created a segment unlinks it when its last array over the segment is
freed, or at exit; Python's resource tracker unlinks it if that process is killed. A process
that hands a shared tensor to another must keep it alive until the other has received it (as
with torch's file-descriptor strategy).
"""
from __future__ import annotations

import atexit
import mmap
import os
import secrets
import threading
import weakref

import numpy as np

_PREFIX = "tb_shm_"
_lock = threading.Lock()
# name -> (weak reference to the mmap, start address, size, created here)
_segments: dict[str, tuple[weakref.ref, int, int, bool]] = {}


def _posixshmem():
    try:
        import _posixshmem
    except ImportError:  # Windows
        raise RuntimeError("shared-memory tensors need POSIX shared memory (Linux or macOS)") from None
    return _posixshmem


def _track(name: str, register: bool) -> None:
    from multiprocessing import resource_tracker
    (resource_tracker.register if register else resource_tracker.unregister)(name, "shared_memory")


def _unlink(name: str, at_exit: bool = False) -> None:
    with _lock:
        entry = _segments.get(name)
        if entry is None or not (at_exit or entry[0]() is None):
            return  # already gone, or mapped again since that mapping died
        del _segments[name]
    if not entry[3]:
        return  # attached here, created elsewhere: the creator unlinks it
    try:
        _posixshmem().shm_unlink(name)
    except FileNotFoundError:
        pass
    _track(name, register=False)


def _map(name: str, size: int, created: bool) -> np.ndarray:
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if created else 0)
    fd = _posixshmem().shm_open(name, flags, mode=0o600)
    try:
        if created:
            os.ftruncate(fd, size)
        else:
            size = os.fstat(fd).st_size
        m = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    raw = np.frombuffer(m, dtype=np.uint8)  # keeps the mmap alive as long as any view of it lives
    start = raw.__array_interface__["data"][0]
    with _lock:
        _segments[name] = (weakref.ref(m), start, size, created)
    weakref.finalize(m, _unlink, name)
    return raw


def share_array(array: np.ndarray) -> np.ndarray:
    """A copy of ``array`` (same shape, dtype, C order) whose memory is a new shared segment."""
    name = f"/{_PREFIX}{os.getpid()}_{secrets.token_hex(8)}"
    raw = _map(name, max(int(array.nbytes), 1), created=True)
    _track(name, register=True)
    out = raw[:array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def handle(array: np.ndarray):
    """``(name, offset, shape, strides, dtype)`` when ``array`` lives in a shared segment, else None."""
    ptr = array.__array_interface__["data"][0]
    with _lock:
        for name, (ref, start, size, _) in _segments.items():
            if ref() is not None and start <= ptr < start + size:
                return name, ptr - start, tuple(array.shape), tuple(array.strides), array.dtype.str
    return None


def is_shared(array) -> bool:
    return isinstance(array, np.ndarray) and handle(array) is not None


def attach(name: str, offset: int, shape, strides, dtype) -> np.ndarray:
    """The array a :func:`handle` describes, mapped into this process (no copy)."""
    if not name.startswith("/" + _PREFIX):
        raise ValueError(f"{name!r} is not a TensorBrain shared-memory segment")
    with _lock:
        entry = _segments.get(name)
        m = entry[0]() if entry is not None else None
    if m is not None:
        raw = np.frombuffer(m, dtype=np.uint8)
    else:
        try:
            raw = _map(name, 0, created=False)
        except FileNotFoundError:
            raise RuntimeError(f"shared-memory segment {name!r} no longer exists: the process that "
                               f"sent this tensor freed it (or exited) before it was received; keep "
                               f"the tensor alive in the sender until the receiver has it") from None
    return np.ndarray(shape, dtype=np.dtype(dtype), buffer=raw, offset=offset, strides=strides)


@atexit.register
def _unlink_all() -> None:
    for name in [n for n, e in list(_segments.items()) if e[3]]:
        _unlink(name, at_exit=True)
