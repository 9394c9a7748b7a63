"""Keep freed arrays' memory in the process (glibc only), applied once at ``import tensorbrain``.

glibc's malloc hands blocks above its mmap threshold (128 KiB at start, raised automatically only
after a large block is freed) back to the kernel on free. A training step allocates and frees the
same 1-2 MiB activations and gradients every time, so every step faulted in fresh zero-filled
pages, and in DDP the faulting rank set the pace (the figures are in docs/ddp.md, "Memory
allocator"). PyTorch never shows this because its own 25 MiB buffers raise glibc's threshold as a
side effect.

The values are the ceiling glibc's own automatic adjustment reaches (32 MiB mmap threshold), and
64 MiB of free heap top is kept. Cost: freed blocks up to 32 MiB stay in the heap for reuse
instead of returning to the OS. ``TB_MALLOC_TUNING=0`` leaves glibc's defaults (and any
``MALLOC_*`` environment tuning of the user's) alone.
"""
from __future__ import annotations

import ctypes
import platform
import sys

from . import _config

MMAP_THRESHOLD = 32 << 20
TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # <malloc.h>

applied = False


def keep_freed_memory() -> bool:
    """Set the thresholds once per process; True when they were set (glibc, not disabled)."""
    global applied
    if applied:
        return True
    if not _config.get("TB_MALLOC_TUNING"):
        return False
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL(None)
        ok = libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
        ok = libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    except (OSError, AttributeError):
        return False
    applied = ok
    return ok
