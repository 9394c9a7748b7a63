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
ANY_COUNT = -1  # all_to_all_single with uneven splits: counts legitimately differ per rank
WORDS = 4       # seq, kind|op|dtype|root, count, shapes hash (DETAIL only, else 0)
DETAIL_BYTES = 256


def detail_enabled() -> bool:
    """True under ``TB_DISTRIBUTED_DEBUG=DETAIL`` (read once per group, not per call)."""
    from .. import _config
    return str(_config.get("TB_DISTRIBUTED_DEBUG")).upper() == "DETAIL"


_DTYPE_CACHE: dict[np.dtype, int] = {}


def dtype_code(dtype: np.dtype) -> int:
    code = _DTYPE_CACHE.get(dtype)  # np.dtype objects hash; .name builds a string each time
    if code is None:
        code = _DTYPE_CACHE[dtype] = DTYPE_CODE.get(np.dtype(dtype).name, OTHER_DTYPE)
    return code


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
    dt = dtype_code(arrays[0].dtype) if len(arrays) else 0
    if count is None:
        count = arrays[0].size if len(arrays) == 1 else sum(int(a.size) for a in arrays)
    word = KIND_CODE[kind] | OP_CODE[op or "none"] << 8 | dt << 16 | \
        ((root + 1 if root is not None else 0) & 0xFFFFFFFF) << 24
    shapes = 0
    if detail:
        import zlib
        shapes = zlib.crc32(repr([tuple(a.shape) for a in arrays]).encode())
    return np.array((seq, word, count, shapes), dtype=np.int64)


def describe(words: np.ndarray) -> str:
    """``all_reduce(seq 3, float32 x 4, op=max)``: a packed fingerprint in words."""
    seq, word, count = int(words[0]), int(words[1]), int(words[2])
    kind, op, dt, root = word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF, (word >> 24) - 1
    kname = KINDS[kind] if kind < len(KINDS) else f"op#{kind}"
    parts = [f"seq {seq}"]
    if dt:
        dname = DTYPES[dt] if dt < len(DTYPES) else "another dtype"
        parts.append(f"{dname} x {count}" if count != ANY_COUNT else f"{dname}, uneven splits")
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
    if rows.tobytes() == mine.tobytes() * len(rows):  # the fast path: one comparison
        return
    same = (rows == mine).all(axis=1)
    if mine[2] == ANY_COUNT or (rows[:, 2] == ANY_COUNT).any():
        same = (rows[:, [0, 1, 3]] == mine[[0, 1, 3]]).all(axis=1)
    if same.all():
        return
    calls = []
    for j, row in enumerate(rows):
        text = describe(row)
        if details is not None and details[j]:
            text += f" [{details[j]}]"
        calls.append(f"rank {j}: {text}")
    bad = [j for j in range(len(rows)) if not same[j]]
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
               root: int | None = None, count: int | None = None) -> None:
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
            words = np.array((seq, KIND_CODE[kind] | OP_CODE[op or "none"] << 8
                              | dtype_code(a.dtype) << 16
                              | ((root + 1 if root is not None else 0) & 0xFFFFFFFF) << 24,
                              a.size, 0), np.int64)
        if detail:
            words = np.concatenate([words, encode_detail(detail_text(arrays, call_site()))])
        check = _Check(self, kind, seq, detail)
        if self._attach is not None:
            self._attach(words, check)  # exchanged alongside the collective
        else:
            check(inner.fingerprint_exchange(words))  # exchanged ahead of it

    # ***** collectives: check, then run *****
    def allreduce(self, arrays: Sequence[Array], op: str = "sum", *,
                  async_op: bool = True) -> _work.Work:
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
        self._check("all_to_all", list(inputs)[:1], count=sum(int(x.size) for x in inputs))
        return self._run(self._inner.alltoall, outputs, inputs, async_op=async_op)

    def alltoall_single(self, output: Array, input: Array, out_splits: Sequence[int] | None = None,
                        in_splits: Sequence[int] | None = None, *,
                        async_op: bool = True) -> _work.Work:
        even = not out_splits and not in_splits
        self._check("all_to_all", [input], count=None if even else ANY_COUNT)
        return self._run(self._inner.alltoall_single, output, input, out_splits, in_splits,
                                           async_op=async_op)

    def barrier(self, *, async_op: bool = True) -> _work.Work:
        self._check("barrier")
        return self._run(self._inner.barrier, async_op=async_op)


class _Check:
    """``check(rows)`` for one collective: the fast comparison, the wording only on a mismatch."""

    __slots__ = ("layer", "kind", "seq", "detail")

    def __init__(self, layer: FingerprintLayer, kind: str, seq: int, detail: bool) -> None:
        self.layer, self.kind, self.seq, self.detail = layer, kind, seq, detail

    def __call__(self, rows: np.ndarray) -> None:
        inner = self.layer._inner
        rows = np.asarray(rows, np.int64).reshape(inner.size, -1)
        if not self.detail and rows.tobytes() == rows[inner.rank].tobytes() * inner.size:
            return
        details = [decode_detail(r[WORDS:]) for r in rows] if self.detail else None
        where = f"{self.kind} (seq {self.seq}) of group {inner.group_name!r} on rank {inner.rank}"
        try:
            verify(rows[:, :WORDS], inner.rank, where, details)
        except DistBackendError as exc:
            self.layer._fp_failure.record(exc)
            raise


def wrap(backend: Backend) -> Backend | FingerprintLayer:
    """``backend`` wrapped in :class:`FingerprintLayer` unless it checks fingerprints in band."""
    if getattr(backend, "fingerprint_inband", True) or isinstance(backend, FingerprintLayer):
        return backend
    if not hasattr(backend, "fingerprint_exchange"):
        return backend
    return FingerprintLayer(backend)
