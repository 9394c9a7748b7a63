"""Collective fingerprints: every rank checks that its peers run the same collective.

The one place that knows what a collective's *fingerprint* is (``(seq, kind, op, dtype, count,
root)`` packed into :data:`WORDS` int64 words, :func:`pack`; ``TB_DISTRIBUTED_DEBUG=DETAIL``
adds each rank's shapes and Python call site) and how a mismatch is worded. Backends only move
it, as each declares (``Backend.fingerprint``): in band (:func:`wire_tag`), or attached or
exchanged (:func:`of_call`, checked by a :class:`Verifier`); backend by backend, and why:
docs/reliability.md, "Collective mismatches: the fingerprint".

>>> import numpy as np
>>> a = pack(3, "all_reduce", [np.zeros(4, np.float32)], op="max")
>>> describe(a)
'all_reduce(seq 3, float32 x 4, op=max)'
>>> diff = [pack(3, "all_reduce", [np.zeros(4, np.float32)], op="sum"), a]
>>> try:
...     verify(diff, 0, "default")
... except Exception as exc:
...     print(type(exc).__name__)
DistBackendError
"""
from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from .backends._executor import FailureState
from .backends._validate import per_row
from .errors import DistBackendError

if TYPE_CHECKING:
    from .backends.base import Array, Call

KINDS = ("none", "all_reduce", "broadcast", "reduce", "all_gather", "gather", "scatter",
         "reduce_scatter", "all_to_all", "barrier")
KIND_CODE = {k: i for i, k in enumerate(KINDS)}
OPS = ("none", "sum", "avg", "prod", "min", "max", "band", "bor", "bxor")
OP_CODE = {o: i for i, o in enumerate(OPS)}
DTYPES = ("none", "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
          "uint64", "float16", "float32", "float64", "complex64", "complex128", "bfloat16")
DTYPE_CODE = {d: i for i, d in enumerate(DTYPES)}
OTHER_DTYPE = 255
ANY_COUNT = -1  # all_to_all: counts legitimately differ per rank; word 3 checks them by pair
WORDS = 4       # seq, kind|op|dtype|root, count, shapes hash (DETAIL only, else 0)
DETAIL_BYTES = 256


def detail_enabled() -> bool:
    """True under ``TB_DISTRIBUTED_DEBUG=DETAIL`` (read once per group, not per call)."""
    from .. import _config
    return str(_config.get("TB_DISTRIBUTED_DEBUG")).upper() == "DETAIL"


_DTYPE_CACHE: dict[np.dtype, int] = {}
_HEADER_WORDS: dict[tuple, int] = {}  # (kind, op, dtype, root) -> word 1


def dtype_code(dtype: np.dtype) -> int:
    code = _DTYPE_CACHE.get(dtype)  # np.dtype objects hash; .name builds a string each time
    if code is None:
        code = _DTYPE_CACHE[dtype] = DTYPE_CODE.get(np.dtype(dtype).name, OTHER_DTYPE)
    return code


def header_word(kind: str, op: str | None = None, dtype: np.dtype | None = None,
                root: int | None = None) -> int:
    """Word 1 of a fingerprint: kind in bits 0-7, op in 8-15, dtype in 16-23, root+1 above
    (cached: the latency path asks for it on every call)."""
    key = (kind, op, dtype, root)
    word = _HEADER_WORDS.get(key)
    if word is None:
        dt = dtype_code(dtype) if dtype is not None else 0
        word = _HEADER_WORDS[key] = KIND_CODE[kind] | OP_CODE[op or "none"] << 8 | dt << 16 \
            | ((root + 1 if root is not None else 0) & 0xFFFFFFFF) << 24
    return word


def wire_tag(op: str | None = None, root: int | None = None) -> int:
    """The 32-bit tag a framed transport carries for op and root (op in bits 0-7, root+1 above;
    0 when the collective has neither)."""
    return OP_CODE[op or "none"] | ((root + 1 if root is not None else 0) & 0x7FFFFF) << 8


def describe_tag(tag: int) -> str:
    """``op=max, root=1`` for a :func:`wire_tag` value ('' when it holds neither)."""
    op, root = tag & 0xFF, (tag >> 8) - 1
    parts = [f"op={OPS[op] if op < len(OPS) else op}"] if op else []
    return ", ".join(parts + ([f"root={root}"] if root >= 0 else []))


def pack(seq: int, kind: str, arrays: Sequence[Array] = (), op: str | None = None,
         root: int | None = None, count: int | None = None, detail: bool = False) -> np.ndarray:
    """The fingerprint of one call as :data:`WORDS` int64 words (``count``: elements, default
    the total over ``arrays``; ``detail``: also hash the shapes)."""
    if count is None:
        count = arrays[0].size if len(arrays) == 1 else sum(int(a.size) for a in arrays)
    word = header_word(kind, op, arrays[0].dtype if len(arrays) else None, root)
    shapes = 0
    if detail or len(arrays) > 1:  # several arrays (coalesced): their sizes must match too
        import zlib
        what = [tuple(a.shape) for a in arrays] if detail else [int(a.size) for a in arrays]
        shapes = zlib.crc32(repr(what).encode())
    return np.array((seq, word, count, shapes), dtype=np.int64)


# ***** all_to_all: per-pair sizes, checked through one word per rank *****
# Every rank may send each peer a different number of elements (uneven lists or splits); what
# rank i sends to j must equal what j expects from i. Word 3 of an all_to_all fingerprint holds
# the rank's *balance*: sum_j sent[j] * w(me, j) - sum_i expected[i] * w(i, me) (mod 2**64) with
# fixed pseudo-random 64-bit weights w per (sender, receiver) pair. The balances of all ranks sum
# to sum_(i,j) w(i, j) * (sent_i[j] - expected_j[i]): zero when every pair agrees, and, unless a
# disagreement happens to cancel modulo 2**64, nonzero when one does.
_WEIGHTS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}


def _pair_weights(rank: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """(w(rank, j) for every j, w(i, rank) for every i) as uint64 arrays (splitmix64)."""
    key = (rank, size)
    got = _WEIGHTS.get(key)
    if got is None:
        def mix(x: int) -> int:
            x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
            x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
            x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
            return x ^ (x >> 31)
        send = np.array([mix(rank << 32 | j) for j in range(size)], np.uint64)
        recv = np.array([mix(i << 32 | rank) for i in range(size)], np.uint64)
        got = _WEIGHTS[key] = (send, recv)
    return got


def balance(rank: int, size: int, sent: Sequence[int], expected: Sequence[int]) -> int:
    """This rank's all_to_all balance word (see above); ``sent[j]``: elements this rank sends
    to rank j, ``expected[i]``: elements it expects from rank i."""
    w_send, w_recv = _pair_weights(rank, size)
    with np.errstate(over="ignore"):
        b = (np.asarray(sent, np.uint64) * w_send).sum(dtype=np.uint64) \
            - (np.asarray(expected, np.uint64) * w_recv).sum(dtype=np.uint64)
    return int(np.uint64(b).view(np.int64))


def describe(words: np.ndarray) -> str:
    """``all_reduce(seq 3, float32 x 4, op=max)``: a packed fingerprint in words."""
    seq, word, count = int(words[0]), int(words[1]), int(words[2])
    kind, op, dt, root = word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF, (word >> 24) - 1
    kname = KINDS[kind] if kind < len(KINDS) else f"op#{kind}"
    parts = [f"seq {seq}"]
    if dt:
        dname = DTYPES[dt] if dt < len(DTYPES) else "another dtype"
        parts.append(f"{dname} x {count}" if count != ANY_COUNT else f"{dname}, counts per peer")
    tag = describe_tag(op | (root + 1) << 8)  # op and root as a frame's tag says them
    return f"{kname}({', '.join(parts + ([tag] if tag else []))})"


def verify(rows: np.ndarray, rank: int, group: str,
           details: Sequence[str] | None = None) -> None:
    """Raise `DistBackendError` unless every rank's fingerprint (``rows[j]``) equals this rank's
    (in the group named ``group``); the message lists each rank's call (and with ``details``,
    its shapes and call site)."""
    rows = np.asarray(rows, dtype=np.int64).reshape(len(rows), -1)
    mine = rows[rank]
    if rows.tobytes() == mine.tobytes() * len(rows) and not (mine[2] == ANY_COUNT and mine[3]):
        return  # the fast path: one comparison
    code = int(mine[1]) & 0xFF
    kind = KINDS[code] if code < len(KINDS) else f"op#{code}"
    where = f"{kind} (seq {int(mine[0])}) of group {group!r} on rank {rank}"
    pairwise = mine[2] == ANY_COUNT or bool((rows[:, 2] == ANY_COUNT).any())
    same = (rows == mine).all(axis=1)
    if pairwise:  # all_to_all: word 3 is each rank's balance, they must sum to 0
        same = (rows[:, [0, 1]] == mine[[0, 1]]).all(axis=1)
        if same.all():
            with np.errstate(over="ignore"):
                total = rows[:, 3].view(np.uint64).sum(dtype=np.uint64)
            if total == 0:
                return
            raise DistBackendError(
                f"{where}: collective mismatch between ranks: the element counts do not pair "
                "up (some rank sends a peer a different number of elements than that peer "
                "expects from it; for all_to_all_single, input_split_sizes[j] on rank i must "
                "equal output_split_sizes[i] on rank j): "
                + "; ".join(f"rank {j}: {describe(row)}" for j, row in enumerate(rows)))
    if same.all():
        return
    calls = []
    for j, row in enumerate(rows):
        text = describe(row)
        if details is not None and details[j]:
            text += f" [{details[j]}]"
        calls.append(f"rank {j}: {text}")
    bad = [j for j in range(len(rows)) if not same[j]]
    if len({describe(row) for row in rows}) == 1:  # only word 3 differs
        calls.append("the same totals, but the sizes (or, with DETAIL, shapes) of the "
                     "individual tensors differ")
    raise DistBackendError(
        f"{where}: collective mismatch between ranks (rank(s) {bad} differ from this rank): "
        + "; ".join(calls) + ". Every rank must call the same collectives in the same order with "
        "the same op, root, dtype and element count.")


# ***** DETAIL: each rank's Python call site *****
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def call_site() -> str:
    """``train.py:42 in step``: the first frame outside tensorbrain (the user's call)."""
    f: FrameType | None = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back
    if f is None:
        return "?"
    return f"{os.path.basename(f.f_code.co_filename)}:{f.f_lineno} in {f.f_code.co_name}"


def encode_detail(text: str) -> np.ndarray:
    buf = np.zeros(DETAIL_BYTES, np.uint8)
    raw = text.encode(errors="replace")[:DETAIL_BYTES]
    buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    return buf.view(np.int64)


def decode_detail(words: np.ndarray) -> str:
    return bytes(np.asarray(words, np.int64).view(np.uint8)).rstrip(b"\0").decode(
        errors="replace")


# ***** the pipeline's fingerprint step for backends that attach or exchange it (mpi, nccl) *****
#: the kind a collective's fingerprint names (its family: all_gather_into_tensor is an all_gather)
FAMILY = {"all_gather_into_tensor": "all_gather", "reduce_scatter_tensor": "reduce_scatter",
          "all_to_all_single": "all_to_all"}


def arrays_of(call: Call) -> Sequence[Array]:
    """The arrays a collective's fingerprint (and the DETAIL check) describes: all_reduce's
    inputs, the one output of scatter and the reduce_scatters, else the first input."""
    if call.kind in ("scatter", "reduce_scatter", "reduce_scatter_tensor"):
        return call.outputs
    return call.inputs if call.kind == "all_reduce" else call.inputs[:1]


def of_call(call: Call, seq: int, rank: int, size: int, detail: bool) -> Any:
    """The fingerprint words of ``call`` as collective ``seq`` of this rank's group: a tuple for
    the latency path (all_reduce of one array without DETAIL), else an int64 array (``detail``:
    shapes hashed, the call site appended)."""
    kind = call.kind
    if kind == "all_reduce" and len(call.inputs) == 1 and not detail:
        a = call.inputs[0]
        return (seq, header_word("all_reduce", call.op, a.dtype), a.size, 0)
    family = FAMILY.get(kind, kind)
    arrays = arrays_of(call)
    count = pairs = None
    if kind == "all_to_all":  # per-pair sizes (shapes legitimately differ)
        count = ANY_COUNT
        pairs = ([int(x.size) for x in call.inputs], [int(o.size) for o in call.outputs])
    elif kind == "all_to_all_single":
        assert call.rows is not None  # set by the check
        out_rows, in_rows = call.rows
        src, out = call.inputs[0], call.outputs[0]
        count = ANY_COUNT
        pairs = ([k * per_row(src) for k in in_rows], [k * per_row(out) for k in out_rows])
    words = pack(seq, family, arrays, op=call.op, root=call.root, count=count, detail=detail)
    if pairs is not None:
        words[3] = balance(rank, size, *pairs)
    if detail:  # each rank's shapes and Python call site, for the message
        shapes = ",".join(f"{a.dtype}{list(a.shape)}" for a in arrays)
        words = np.concatenate([words, encode_detail(f"shapes {shapes or '-'} at {call_site()}")])
    return words


class Verifier:
    """``check(rows)`` for the group of ``failure`` (its name, this rank): every rank's words
    against this rank's, the failure worded only on a mismatch and recorded in the group's
    failure state (it is unusable then); with ``detail`` the rows carry each rank's call site."""

    __slots__ = ("size", "failure", "detail")

    def __init__(self, size: int, failure: FailureState, detail: bool) -> None:
        self.size, self.failure, self.detail = size, failure, detail

    def __call__(self, rows: np.ndarray) -> None:
        rows = np.asarray(rows, np.int64).reshape(self.size, -1)
        details = [decode_detail(r[WORDS:]) for r in rows] if self.detail else None
        try:
            verify(rows[:, :WORDS], self.failure.rank, self.failure.group_name, details)
        except DistBackendError as exc:
            self.failure.record(exc)
            raise
