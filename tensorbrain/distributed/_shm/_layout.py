"""The shared-memory segment layout, shared by the C++ transport (csrc/shm/shm.h) and the twin.

Both sides use these offsets, so one rank may run the native transport and another the NumPy
twin on the same segment (tests/distributed/test_shm_parity.py does exactly that).

>>> header_bytes(2), segment_bytes(2, 4096)
(4096, 20480)
"""
from __future__ import annotations

import os
import uuid

from ... import _config

MAGIC = 0x31304D5342544254  # b"TBTBSM01" little-endian
VERSION = 1
CTL_STRIDE = 128  # one control block per rank, 128 bytes apart (no shared cache lines)

# header fields (byte offsets)
OFF_MAGIC, OFF_VERSION, OFF_NRANKS, OFF_BUF_BYTES = 0, 8, 12, 16
OFF_ATTACHED, OFF_ABORT, OFF_ABORT_RANK, OFF_ABORT_KIND = 24, 28, 32, 36
# control block fields, at CTL_STRIDE * (rank + 1)
CTL_SEQ, CTL_WAITERS, CTL_PID = 0, 4, 8

# One buffer per rank and generation (two generations alternate). 1 MiB measured best for 2 ranks
# on the dev VM (min of 3 rounds, 16 MiB: 2.6 ms against 6.9 ms with 256 KiB and 4.4 ms with
# 4 MiB; 64 MiB: 11.2 / 11.6 / 16.7 ms): a chunk fits the 1 MiB L2 of the core that reduces it.
# The segment holds 2 * nranks buffers: 8 MiB for 4 ranks.
DEFAULT_BUF_BYTES = 1 << 20


def flat_max_bytes(nranks: int) -> int:
    """all_reduce uses the single-copy flat exchange up to this size and reduce-scatter/all-gather
    above it: the measured crossover (see the comment in csrc/shm/shm.cpp, same values)."""
    return (2 << 10) if nranks == 2 else (16 << 10)


def header_bytes(nranks: int) -> int:
    """Bytes before the first data buffer (page aligned)."""
    h = CTL_STRIDE * (nranks + 1)
    return (h + 4095) // 4096 * 4096


def segment_bytes(nranks: int, buf_bytes: int) -> int:
    """Total size of a segment for ``nranks`` ranks with ``buf_bytes`` per buffer."""
    return header_bytes(nranks) + 2 * nranks * buf_bytes


def segment_name(tag: str = "") -> str:
    """A fresh segment name: ``tb_<TB_RUN_ID>_<uuid>`` under tbrun (so the launcher can remove
    leftovers after a crash by that prefix), else ``tb_<pid>_<uuid>``."""
    run_id = _config.get("TB_RUN_ID") or str(os.getpid())
    safe = run_id.replace("/", "-")[:200]  # a name is one path component (NAME_MAX 255)
    return f"tb_{safe}_{tag}{uuid.uuid4().hex[:12]}"
