"""The tcp backend's wire format: the frame header, frame kinds and dtype codes (what a frame
is, and the engine that moves frames: ``wire.py``)."""
from __future__ import annotations

import struct

import numpy as np

from ... import _fingerprint

HEADER = struct.Struct("<HBBiQQQ")
HEADER_SIZE = HEADER.size  # 32
MAGIC = 0x7442  # "Bt"
MAX_STASH = 1 << 30  # an early p2p frame larger than this is refused (bounded allocation)

# the collectives' codes are the fingerprint's (one list), then the tcp backend's own frames
KINDS = [*_fingerprint.KINDS, "p2p", "hello", "check", "abort"]
KIND = {name: i for i, name in enumerate(KINDS)}
_P2P = KIND["p2p"]
# "abort": a rank that fails an op tells every peer why before it closes its sockets (tag: the
# rank it blames, or -1; payload: its error text), so a survivor several hops from a dead or
# frozen rank names it without asking the store (which may live in the process that died).
_ABORT = KIND["abort"]
MAX_ABORT_TEXT = 4096

#: the small integer naming a dtype on the wire: the fingerprint's code (255 = any other
#: dtype, compared by size only)
dtype_code = _fingerprint.dtype_code


def dtype_name(code: int) -> str:
    """The dtype name (``"float32"``) a header's dtype ``code`` stands for (``dtype#N`` for an
    unknown code; 0 is "no dtype")."""
    return _fingerprint.DTYPES[code] if 1 <= code < len(_fingerprint.DTYPES) else f"dtype#{code}"


def as_bytes(array) -> memoryview:
    """A flat byte view of a C-contiguous host array (no copy)."""
    return memoryview(array.reshape(-1).view(np.uint8))


_EMPTY = memoryview(b"")


class Recv:
    """One expected frame: what the peer must send, where its payload goes, what to do next."""

    __slots__ = ("kind", "dtype", "tag", "seq", "total", "nbytes", "dest", "callback", "got",
                 "header_ok")

    def __init__(self, kind, dtype, tag, seq, total, nbytes, dest, callback):
        self.kind, self.dtype, self.tag, self.seq = kind, dtype, tag, seq
        self.total, self.nbytes, self.dest, self.callback = total, nbytes, dest, callback
        self.got = 0
        self.header_ok = False


def _consume(bufs: list, n: int) -> None:
    """Drop the first ``n`` sent bytes from ``bufs`` (memoryviews, in place), as a partial
    ``sendmsg`` leaves them: whole buffers are popped, the next one is sliced."""
    while n:
        first = bufs[0]
        if n >= len(first):
            n -= len(first)
            bufs.pop(0)
        else:
            bufs[0] = first[n:]
            n = 0
