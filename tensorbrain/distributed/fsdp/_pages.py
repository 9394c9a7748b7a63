"""Memory for FSDP's unsharded buffers on the CPU: mappings whose pages can be given away while
autograd keeps views of them, and a small cache of populated pages for the next all-gather.

Each unit's unsharded buffer is a private anonymous ``mmap`` at a fixed address (the parameters
and the tensors autograd saved are views of it). Resharding gives its pages away and makes the
range read-only: the kernel then stops counting it as data (``VmData``, the ``RLIMIT_DATA``
limit), and the views refuse writes while they hold no parameters.

Giving pages back to the kernel (``MADV_DONTNEED``) and taking fresh ones for the next
all-gather costs more than the all-gather on a CPU: the kernel zeroes every page and faults it
in again (4 MiB: 3.3-3.8 ms of CPU per release and refill on the 2-core VM, against 0.19-0.24 ms
to copy 4 MiB). So a released buffer's pages are first offered to :data:`PAGES`, which *moves*
them (``mremap``, Linux >= 5.7 for ``MREMAP_DONTUNMAP``) to a spare address and later moves them
into the next unit of the same size that all-gathers: no zeroing, no faults (0.27 ms for the same
cycle). It keeps at most two such blocks (``TB_FSDP_PAGE_CACHE``), the most recent ones, so FSDP holds at most two
released units' worth of pages beyond what it has gathered -- the same idea as torch's caching
allocator on a GPU. The cached pages stay private and writable, so ``RLIMIT_DATA`` counts them:
the limit sees everything FSDP holds. Where ``mremap`` cannot (another OS, an old kernel, no
room under the limit), pages go back to the kernel as before.
"""
from __future__ import annotations

import collections
import ctypes
import mmap
import threading
from typing import Any

import numpy as np

from ... import _config, _xp


def _libc_fn(name: str, argtypes: list, restype: Any) -> Any:
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = argtypes, restype
    return fn


_MPROTECT = _libc_fn("mprotect", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int], ctypes.c_int)
_MREMAP = _libc_fn("mremap", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int,
                              ctypes.c_void_p], ctypes.c_void_p)
_MUNMAP = _libc_fn("munmap", [ctypes.c_void_p, ctypes.c_size_t], ctypes.c_int)
_MREMAP_MAYMOVE, _MREMAP_FIXED, _MREMAP_DONTUNMAP = 1, 2, 4
_MAP_FAILED = ctypes.c_void_p(-1).value


def protect(array: np.ndarray, nbytes: int, writable: bool) -> int:
    """``mprotect`` the mapping under ``array`` read-only or read-write; 0 or the errno.

    A read-only private mapping is not counted by ``RLIMIT_DATA``; making it writable again is
    where the kernel enforces that limit (ENOMEM)."""
    if _MPROTECT is None:
        return 0
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    if _MPROTECT(array.ctypes.data, nbytes, prot) == 0:
        return 0
    return ctypes.get_errno()


def alloc(n: int, dtype: Any, like: Any) -> tuple[Any, mmap.mmap | None]:
    """``(array, mmap or None)``: an ``n``-element buffer whose pages can be released.

    Plain 4 KiB pages: with ``MADV_HUGEPAGE`` a release and refill of 4 MiB measured 6.1 ms
    against 2.1 ms here (the kernel zeroes and compacts whole 2 MiB pages)."""
    xp = _xp.get_array_module(like)
    if xp is not np:
        return xp.empty(n, dtype=dtype), None
    nbytes = max(int(n) * np.dtype(dtype).itemsize, 1)
    if _MPROTECT is None:      # no mprotect: a writable mapping, counted as data from the start
        mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE)
        return np.frombuffer(mm, dtype=dtype, count=int(n)), mm
    # created read-only: RLIMIT_DATA counts it only while it holds parameters (see protect)
    mm = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)
    return np.asarray(_Mapped(mm)).view(dtype)[:int(n)], mm


class _Mapped:
    """A writable NumPy view of a read-only ``mmap`` (``np.frombuffer`` would be read-only for
    good); every array over it keeps this object, and so the mapping, alive."""

    def __init__(self, mm: mmap.mmap) -> None:
        self.mm = mm
        addr = np.frombuffer(mm, dtype=np.uint8).ctypes.data
        self.__array_interface__ = {"shape": (len(mm),), "typestr": "|u1", "version": 3,
                                    "data": (addr, False)}


def data_limit() -> str:
    """``; the process's data limit (RLIMIT_DATA) is ... MiB`` where one is set, else ``""``."""
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_DATA)[0]
    except (ImportError, OSError, ValueError):
        return ""
    if soft == resource.RLIM_INFINITY:
        return ""
    return (f"; this process's data limit (RLIMIT_DATA, ulimit -d) is {soft / 2**20:.0f} MiB: "
            f"raise it, shard over more ranks, or train a smaller model")


# MADV_POPULATE_WRITE (Linux 5.14): fault a released buffer back in with one system call. On this
# machine (a Firecracker VM) refilling a released 4 MiB buffer took 14 ms through page faults and
# 1.2 ms after this advice; kernels without it raise OSError and the pages fault in on use.
_POPULATE_WRITE: int | None = getattr(mmap, "MADV_POPULATE_WRITE", 23)


def populate(mm: mmap.mmap | None) -> None:
    """Fault ``mm``'s pages in with one system call where the kernel allows it."""
    global _POPULATE_WRITE
    if _POPULATE_WRITE is None or mm is None or len(mm) < mmap.PAGESIZE:
        return
    try:
        mm.madvise(_POPULATE_WRITE)
    except (OSError, ValueError):
        _POPULATE_WRITE = None


def _span(nbytes: int) -> int:
    return -(-int(nbytes) // mmap.PAGESIZE) * mmap.PAGESIZE


class PageCache:
    """Populated pages of released unsharded buffers, moved (not copied) between units.

    ``stash(addr, nbytes)`` moves the pages under ``[addr, addr + nbytes)`` to a spare address and
    leaves that range mapped but empty; ``restore(addr, nbytes)`` moves a stashed block of the same
    size onto ``addr``. At most ``keep`` blocks are held; stashing one more unmaps the oldest.

    Args:
        keep: how many blocks to hold (0 turns the cache off); default ``TB_FSDP_PAGE_CACHE``.
    """

    def __init__(self, keep: int | None = None) -> None:
        self.keep = _config.get("TB_FSDP_PAGE_CACHE") if keep is None else keep
        self.enabled = _MREMAP is not None and _MUNMAP is not None
        self._blocks: collections.OrderedDict[int, tuple[int, int]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._next = 0

    def stash(self, addr: int, nbytes: int) -> bool:
        """Move the pages at ``addr`` into the cache; False (nothing moved) where it cannot."""
        if not self.enabled or self.keep <= 0:
            return False
        span = _span(nbytes)
        with self._lock:
            while len(self._blocks) >= self.keep:
                _, (old, old_span) = self._blocks.popitem(last=False)
                _MUNMAP(old, old_span)
            moved = _MREMAP(addr, span, span, _MREMAP_MAYMOVE | _MREMAP_DONTUNMAP, None)
            if moved in (None, _MAP_FAILED):
                # EINVAL: a kernel without MREMAP_DONTUNMAP (< 5.7) -- stop trying; ENOMEM (the
                # data limit has no room for the moment's second mapping): try again next time
                if ctypes.get_errno() != 12:
                    self.enabled = False
                return False
            self._blocks[self._next] = (moved, span)
            self._next += 1
            return True

    def restore(self, addr: int, nbytes: int) -> bool:
        """Move a cached block of ``nbytes`` onto ``addr`` (replacing what is mapped there)."""
        if not self.enabled:
            return False
        span = _span(nbytes)
        with self._lock:
            key = next((k for k, (_, s) in reversed(self._blocks.items()) if s == span), None)
            if key is None:
                return False
            block, _ = self._blocks.pop(key)
            got = _MREMAP(block, span, span, _MREMAP_MAYMOVE | _MREMAP_FIXED, addr)
            if got != addr:
                _MUNMAP(block, span)
                return False
            return True

    def clear(self) -> None:
        """Give every cached block back to the kernel."""
        with self._lock:
            while self._blocks:
                _, (block, span) = self._blocks.popitem()
                _MUNMAP(block, span)

    @property
    def nbytes(self) -> int:
        """Bytes held by the cache now."""
        with self._lock:
            return sum(s for _, s in self._blocks.values())


PAGES = PageCache()
