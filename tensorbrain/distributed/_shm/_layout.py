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
VERSION = 2  # 2: collective fingerprints in the control blocks
CTL_STRIDE = 128  # one control block per rank, 128 bytes apart (no shared cache lines)

# header fields (byte offsets)
OFF_MAGIC, OFF_VERSION, OFF_NRANKS, OFF_BUF_BYTES = 0, 8, 12, 16
OFF_ATTACHED, OFF_ABORT, OFF_ABORT_RANK, OFF_ABORT_KIND = 24, 28, 32, 36
# control block fields, at CTL_STRIDE * (rank + 1); CTL_FP: two 16-byte collective fingerprints
CTL_SEQ, CTL_WAITERS, CTL_PID, CTL_FP = 0, 4, 8, 16

# Collective fingerprints (csrc/shm/shm.cpp, begin()): word a = kind | dtype << 8 | op << 16 |
# (root + 1) << 32, word b = bytes. The codes are the C++ enums' values (shm_reduce.h).
KIND_ALL_REDUCE, KIND_BROADCAST, KIND_ALL_GATHER, KIND_REDUCE_SCATTER, KIND_ALL_TO_ALL, \
    KIND_BARRIER = range(1, 7)
KIND_NAMES = {1: "all_reduce", 2: "broadcast", 3: "all_gather", 4: "reduce_scatter",
              5: "all_to_all", 6: "barrier"}
NONE = 255
DTYPE_CODES = {"bool": 0, "int8": 1, "int16": 2, "int32": 3, "int64": 4, "uint8": 5, "uint16": 6,
               "uint32": 7, "uint64": 8, "float16": 9, "float32": 10, "float64": 11}
OP_CODES = {"sum": 0, "prod": 1, "min": 2, "max": 3, "band": 4, "bor": 5, "bxor": 6}
# Fingerprint-only codes (shm_reduce.h, kFp*): the byte movers (broadcast, all_gather, all_to_all)
# record the buffer's dtype too, so float32 on one rank against int32 on another raises.
FP_DTYPE_CODES = {**DTYPE_CODES, "complex64": 12, "complex128": 13}
FP_OTHER_DTYPE = 254


def fp_dtype_code(dtype) -> int:
    """The dtype as a fingerprint records it (any dtype; those without a code share one)."""
    return FP_DTYPE_CODES.get(dtype.name, FP_OTHER_DTYPE)


def fingerprint(kind: int, dtype: int = NONE, op: int = NONE, root: int = -1) -> int:
    return kind | dtype << 8 | op << 16 | ((root + 1) & 0xFFFFFFFF) << 32


def describe(a: int, nbytes: int) -> str:
    """``all_reduce(float32, sum, 16 bytes)``: a fingerprint as the C++ side writes it."""
    kind, dt, op, root = a & 0xFF, (a >> 8) & 0xFF, (a >> 16) & 0xFF, (a >> 32) - 1
    dts = {v: k for k, v in FP_DTYPE_CODES.items()}
    ops = {v: k for k, v in OP_CODES.items()}
    parts = [dts.get(dt, "another dtype")] if dt != NONE else []
    parts += [ops.get(op, "?")] if op != NONE else []
    parts += [f"root {root}"] if root >= 0 else []
    return f"{KIND_NAMES.get(kind, '?')}({', '.join(parts + [f'{nbytes} bytes'])})"

# One buffer per rank and generation (two generations alternate). 1 MiB: a chunk fits the 1 MiB L2
# of the core that reduces it (the chunk sizes measured against it are in docs/shm.md).
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
