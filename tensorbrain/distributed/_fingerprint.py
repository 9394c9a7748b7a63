"""Collective fingerprints: every rank checks that its peers run the same collective.

A mismatched collective (one rank calls ``all_reduce(op=MAX)`` while another calls ``SUM``; a
float32 tensor against a float64 one; 4 elements against 2; another root) must be an error on
the ranks involved, never a silent wrong result. This module is the one place that knows what a
collective's *fingerprint* is and how a mismatch is reported; backends only move it:

* ``(seq, kind, op, dtype, count, root)`` packed into :data:`WORDS` int64 words (:func:`pack`).
* Backends that frame their own messages carry it **in band** at no cost: the tcp backend's
  frame header already holds kind, dtype, the byte count and the sequence number, and its tag
  field holds :func:`wire_tag` (op and root) for collective frames; the receiver compares every
  field before it reads a byte (``backends/tcp/wire.py``). The shared-memory transport writes the same
  fields into its control blocks (``_shm/_layout.py``).
* Any other backend (mpi, nccl, or one registered by a user) is wrapped by
  :class:`FingerprintLayer` when it declares ``fingerprint_inband = False`` and provides
  a way to all-gather it (see the class): the fingerprint travels with (mpi) or ahead of (nccl)
  each collective, and every rank raises before the collective's Work reports success.

``TB_DISTRIBUTED_DEBUG=DETAIL`` adds each rank's shapes and Python call site to what is compared
(shapes) and reported (call sites).

>>> import numpy as np
>>> a = pack(3, "all_reduce", [np.zeros(4, np.float32)], op="max")
>>> describe(a)
'all_reduce(seq 3, float32 x 4, op=max)'
>>> diff = [pack(3, "all_reduce", [np.zeros(4, np.float32)], op="sum"), a]
>>> try:
...     verify(diff, 0, "all_reduce (seq 3) of group 'default' on rank 0")
... except Exception as exc:
...     print(type(exc).__name__)
DistBackendError
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from .backends._executor import FailureState
from .errors import DistBackendError

if TYPE_CHECKING:
    from . import _work
    from .backends.base import Array, Backend

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
    if op:
        parts.append(f"op={OPS[op] if op < len(OPS) else op}")
    if root >= 0:
        parts.append(f"root={root}")
    return f"{kname}({', '.join(parts)})"


def verify(rows: np.ndarray, rank: int, where: str,
           details: Sequence[str] | None = None) -> None:
    """Raise `DistBackendError` unless every rank's fingerprint (``rows[j]``) equals this rank's;
    the message lists each rank's call (and with ``details``, its shapes and call site)."""
    rows = np.asarray(rows, dtype=np.int64).reshape(len(rows), -1)
    mine = rows[rank]
    pairwise = mine[2] == ANY_COUNT or bool((rows[:, 2] == ANY_COUNT).any())
    if rows.tobytes() == mine.tobytes() * len(rows) and not (pairwise and mine[3]):
        return  # the fast path: one comparison
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


def detail_text(arrays: Sequence[Array], site: str) -> str:
    shapes = ",".join(f"{a.dtype}{list(a.shape)}" for a in arrays)
    return f"shapes {shapes or '-'} at {site}"


def encode_detail(text: str) -> np.ndarray:
    buf = np.zeros(DETAIL_BYTES, np.uint8)
    raw = text.encode(errors="replace")[:DETAIL_BYTES]
    buf[:len(raw)] = np.frombuffer(raw, np.uint8)
    return buf.view(np.int64)


def decode_detail(words: np.ndarray) -> str:
    return bytes(np.asarray(words, np.int64).view(np.uint8)).rstrip(b"\0").decode(
        errors="replace")


# ***** the layer for backends without in-band fingerprints (mpi, nccl, user backends) *****
class FingerprintLayer:
    """Wraps a backend and checks each collective's fingerprint on every rank before running it.

    The wrapped backend provides one of:

    * ``fingerprint_attach(words, check)`` (mpi): the backend all-gathers ``words`` alongside
      the next collective it posts (no extra round trip) and calls ``check(rows)`` before that
      collective's Work reports success;
    * ``fingerprint_exchange(words) -> rows`` (nccl): a blocking all-gather, run before the
      collective is launched (NCCL may hang on mismatched counts, so the check comes first).

    After a mismatch every rank raises the same `DistBackendError` and the group is poisoned
    (later calls raise at once). Everything else (point-to-point, lifetime, backend-specific
    attributes) passes straight through.
    """

    def __init__(self, backend: Backend) -> None:
        self.__dict__["_inner"] = backend
        self.__dict__["_fp_seq"] = 0
        # the backend's own failure state when it has one (one per group), else the layer's
        failure = getattr(backend, "_failure", None)
        if not isinstance(failure, FailureState):
            failure = FailureState(backend.group_name, backend.rank)
        self.__dict__["_fp_failure"] = failure
        self.__dict__["_fp_detail"] = detail_enabled()
        self.__dict__["_attach"] = getattr(backend, "fingerprint_attach", None)
        self.__dict__["_fp_verify"] = self._verify_rows  # one bound method, not one per call
        # all_reduce of one array without DETAIL: the latency path (see allreduce)
        self.__dict__["_fp_fast"] = self._attach is not None and not self._fp_detail \
            and backend.size > 1
        # ... and the backend's own latency path for it, when it has one (mpi's inline check)
        self.__dict__["_fp_allreduce"] = getattr(backend, "fingerprint_allreduce", None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)

    def __repr__(self) -> str:
        return f"FingerprintLayer({self._inner!r})"

    def _run(self, fn: Callable[..., _work.Work], *args: Any, **kw: Any) -> _work.Work:
        """Run the wrapped op; a fingerprint it did not consume (it raised first) is dropped."""
        try:
            return fn(*args, **kw)
        except BaseException:
            if self._attach is not None:
                self._attach(None, None)
            raise

    def _check(self, kind: str, arrays: Sequence[Array] = (), op: str | None = None,
               root: int | None = None, count: int | None = None,
               pairs: tuple[Sequence[int], Sequence[int]] | None = None) -> None:
        # The latency path (measured: the layer's Python cost is what an 8-byte collective
        # pays): words packed inline, the failure text built only on a mismatch.
        inner = self._inner
        if self._fp_failure.first is not None:
            raise self._fp_failure.unusable(kind)
        d = self.__dict__
        seq = d["_fp_seq"]
        d["_fp_seq"] = seq + 1
        if inner.size == 1:
            return
        detail = self._fp_detail
        if detail or count is not None or len(arrays) != 1:
            words = pack(seq, kind, arrays, op=op, root=root, count=count, detail=detail)
        else:
            a = arrays[0]
            words = np.array((seq, header_word(kind, op, a.dtype, root), a.size, 0), np.int64)
        if pairs is not None:  # all_to_all: per-pair sizes (shapes legitimately differ)
            words[3] = balance(inner.rank, inner.size, *pairs)
        if detail:
            words = np.concatenate([words, encode_detail(detail_text(arrays, call_site()))])
        if self._attach is not None:
            self._attach(words, self._fp_verify)  # exchanged alongside the collective
        else:
            self._fp_verify(inner.fingerprint_exchange(words))  # exchanged ahead of it

    def _verify_rows(self, rows: np.ndarray) -> None:
        """``check(rows)`` for any collective (this rank's own row says which: its seq and
        kind): the fast comparison, the wording only on a mismatch."""
        inner = self._inner
        rows = np.asarray(rows, np.int64).reshape(inner.size, -1)
        mine = rows[inner.rank]
        detail = self._fp_detail
        if not detail and rows.tobytes() == mine.tobytes() * inner.size and \
                not (mine[2] == ANY_COUNT and mine[3]):
            return
        details = [decode_detail(r[WORDS:]) for r in rows] if detail else None
        code = int(mine[1]) & 0xFF
        kind = KINDS[code] if code < len(KINDS) else f"op#{code}"
        where = f"{kind} (seq {int(mine[0])}) of group {inner.group_name!r} on rank {inner.rank}"
        try:
            verify(rows[:, :WORDS], inner.rank, where, details)
        except DistBackendError as exc:
            self._fp_failure.record(exc)
            raise

    # ***** collectives: check, then run *****
    def allreduce(self, arrays: Sequence[Array], op: str = "sum", *,
                  async_op: bool = True) -> _work.Work:
        d = self.__dict__
        if d["_fp_fast"] and len(arrays) == 1:
            # The latency path (an 8-byte all_reduce pays every line of Python here): the same
            # words as pack() builds, as a tuple the backend writes straight into its exchange
            # buffer.
            failure = d["_fp_failure"]
            if failure.first is not None:
                raise failure.unusable("all_reduce")
            seq = d["_fp_seq"]
            d["_fp_seq"] = seq + 1
            a = arrays[0]
            words = (seq, header_word("all_reduce", op, a.dtype), a.size, 0)
            attach = d["_attach"]
            try:
                lean = d["_fp_allreduce"]
                if lean is not None:
                    work: _work.Work = lean(arrays, op, words, d["_fp_verify"], async_op)
                    return work
                attach(words, d["_fp_verify"])
                work = d["_inner"].allreduce(arrays, op, async_op=async_op)
                return work
            except BaseException:
                attach(None, None)
                raise
        self._check("all_reduce", arrays, op=op)
        return self._run(self._inner.allreduce, arrays, op, async_op=async_op)

    def broadcast(self, array: Array, root: int, *, async_op: bool = True) -> _work.Work:
        self._check("broadcast", [array], root=root)
        return self._run(self._inner.broadcast, array, root, async_op=async_op)

    def reduce(self, array: Array, root: int, op: str = "sum", *,
               async_op: bool = True) -> _work.Work:
        self._check("reduce", [array], op=op, root=root)
        return self._run(self._inner.reduce, array, root, op, async_op=async_op)

    def allgather(self, outputs: Sequence[Array], input: Array, *,
                  async_op: bool = True) -> _work.Work:
        self._check("all_gather", [input])
        return self._run(self._inner.allgather, outputs, input, async_op=async_op)

    def allgather_into(self, output: Array, input: Array, *,
                       async_op: bool = True) -> _work.Work:
        self._check("all_gather", [input])
        return self._run(self._inner.allgather_into, output, input, async_op=async_op)

    def gather(self, outputs: Sequence[Array] | None, input: Array, root: int, *,
               async_op: bool = True) -> _work.Work:
        self._check("gather", [input], root=root)
        return self._run(self._inner.gather, outputs, input, root, async_op=async_op)

    def scatter(self, output: Array, inputs: Sequence[Array] | None, root: int, *,
                async_op: bool = True) -> _work.Work:
        self._check("scatter", [output], root=root)
        return self._run(self._inner.scatter, output, inputs, root, async_op=async_op)

    def reduce_scatter(self, output: Array, inputs: Sequence[Array], op: str = "sum", *,
                       async_op: bool = True) -> _work.Work:
        self._check("reduce_scatter", [output], op=op)
        return self._run(self._inner.reduce_scatter, output, inputs, op, async_op=async_op)

    def reduce_scatter_into(self, output: Array, input: Array, op: str = "sum", *,
                            async_op: bool = True) -> _work.Work:
        self._check("reduce_scatter", [output], op=op)
        return self._run(self._inner.reduce_scatter_into, output, input, op, async_op=async_op)

    def alltoall(self, outputs: Sequence[Array], inputs: Sequence[Array], *,
                 async_op: bool = True) -> _work.Work:
        inputs, outputs = list(inputs), list(outputs)
        self._check("all_to_all", inputs[:1], count=ANY_COUNT,
                    pairs=([int(x.size) for x in inputs], [int(o.size) for o in outputs]))
        return self._run(self._inner.alltoall, outputs, inputs, async_op=async_op)

    def alltoall_single(self, output: Array, input: Array, out_splits: Sequence[int] | None = None,
                        in_splits: Sequence[int] | None = None, *,
                        async_op: bool = True) -> _work.Work:
        n = self._inner.size
        sent = _split_elements(input, in_splits, n)
        expected = _split_elements(output, out_splits, n)
        self._check("all_to_all", [input], count=ANY_COUNT, pairs=(sent, expected))
        return self._run(self._inner.alltoall_single, output, input, out_splits, in_splits,
                                           async_op=async_op)

    def barrier(self, *, async_op: bool = True) -> _work.Work:
        self._check("barrier")
        return self._run(self._inner.barrier, async_op=async_op)


def _split_elements(array: Array, splits: Sequence[int] | None, n: int) -> list[int]:
    """Elements ``array`` sends to (or receives from) each rank under ``splits`` (rows per
    rank along dim 0; None or empty: equal parts)."""
    size = int(array.size)
    if not splits:
        return [size // n] * n
    rows = array.shape[0] if getattr(array, "ndim", 1) else 1
    per_row = size // rows if rows else 0
    return [int(k) * per_row for k in splits]


def wrap(backend: Backend) -> Backend | FingerprintLayer:
    """``backend`` wrapped in :class:`FingerprintLayer` unless it checks fingerprints in band."""
    if getattr(backend, "fingerprint_inband", True) or isinstance(backend, FingerprintLayer):
        return backend
    if not hasattr(backend, "fingerprint_exchange"):
        return backend
    return FingerprintLayer(backend)
