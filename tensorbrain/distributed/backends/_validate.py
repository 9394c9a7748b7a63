"""Argument checks every backend shares: reduce ops, dtypes, split sizes, roots and tags.

One place, so the wording of an error does not depend on the backend that raises it. Each
backend passes what it supports (its :class:`~.base.Capabilities`); checks of (op, dtype) pairs
are cached because the 8-byte latency path runs them on every call.

>>> import numpy as np
>>> check_reduce("sum", np.dtype("float32"))
>>> splits(None, 6, 3, "input_split_sizes")
[2, 2, 2]
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .base import Array

#: the reduce ops of ``tensorbrain._kernels.reduce_into`` plus "avg"
REDUCE_OPS = ("sum", "avg", "prod", "min", "max", "band", "bor", "bxor")
BITWISE = ("band", "bor", "bxor")
FLOATING = frozenset({"float16", "float32", "float64", "bfloat16"})

# (op, dtype, dtypes) triples already accepted
_CHECKED: set[tuple[str, np.dtype, tuple[str, ...] | None]] = set()


def check_reduce(op: str, dtype: np.dtype, dtypes: tuple[str, ...] | None = None,
                 backend: str = "") -> None:
    """Raise unless ``op`` can reduce ``dtype`` (cached per (op, dtype, dtypes)).

    Args:
        op: the reduce op name.
        dtype: the array's dtype.
        dtypes: the dtype names the backend reduces (None: the NumPy kernels' list).
        backend: the backend's name, for the message.

    Raises:
        ValueError: an unknown op.
        TypeError: the backend cannot reduce this dtype, AVG on a non-floating dtype, or a
            bitwise op on a floating dtype.
    """
    key = (op, dtype, dtypes)
    if key in _CHECKED:
        return
    name = np.dtype(dtype).name
    if op not in REDUCE_OPS:
        raise ValueError(f"unknown reduce op {op!r}; expected one of {REDUCE_OPS}")
    if dtypes is None:
        from ... import _kernels
        dtypes = tuple(_kernels.DTYPES)
    if name not in dtypes:
        where = f"the {backend} backend" if backend else "reductions"
        raise TypeError(f"{where} cannot reduce {name} arrays; supported: {', '.join(dtypes)}")
    if op == "avg" and name not in FLOATING:
        raise TypeError(f"ReduceOp.AVG needs a floating dtype, got {name} (integer averages are "
                        "not defined, as in torch's Gloo): reduce with SUM and divide")
    if op in BITWISE and np.dtype(dtype).kind not in "iub":
        raise TypeError(f"ReduceOp.{op.upper()} needs an integer or bool dtype, got {name}")
    _CHECKED.add(key)


def splits(given: Sequence[int] | None, rows: int, size: int, what: str) -> list[int]:
    """all_to_all_single's rows per rank: ``given`` checked against ``rows``, or an even split.

    Args:
        given: rows per rank; None or empty for an equal split.
        rows: dim 0 of the array being split.
        size: the number of ranks.
        what: the argument's name for the message (``"input_split_sizes"``).

    Returns:
        list[int]: ``size`` non-negative row counts summing to ``rows``.

    Raises:
        ValueError: the split is not ``size`` non-negative entries summing to ``rows``, or
            ``rows`` does not divide evenly when no split is given.
    """
    if given is None or len(given) == 0:
        if rows % size:
            raise ValueError(f"all_to_all_single: dim 0 ({rows} rows) is not divisible by the "
                             f"world size {size}; pass {what}")
        return [rows // size] * size
    out = [int(s) for s in given]
    if len(out) != size or sum(out) != rows or min(out) < 0:
        raise ValueError(f"all_to_all_single: {what} {out} must have {size} non-negative entries "
                         f"summing to dim 0 = {rows}")
    return out


def rows_of(array: Array) -> int:
    """Dim 0 of ``array`` (a 0-d array counts as one row)."""
    return int(array.shape[0]) if array.ndim else 1


def row_bytes(array: Array) -> int:
    """Bytes in one row (dim 0 entry) of ``array``; a 0-d array counts as one row.

    Args:
        array: a NumPy or CuPy array.
    """
    if array.ndim == 0:
        return int(array.itemsize)
    return int(np.prod(array.shape[1:], dtype=np.int64)) * int(array.itemsize)


def same_size(what: str, arrays: Iterable[Array], expected: int, label: str = "output") -> None:
    """Raise ValueError unless every array of ``arrays`` holds ``expected`` elements.

    Args:
        what: the collective, for the message.
        arrays: the arrays to check.
        expected: the element count each must hold.
        label: what the arrays are (``"output"``, ``"input"``).
    """
    for j, a in enumerate(arrays):
        if a.size != expected:
            raise ValueError(f"{what}: {label} {j} has {a.size} elements, expected {expected}")


def root(what: str, root_rank: int, size: int) -> None:
    """Raise ValueError unless ``root_rank`` is a rank of a group of ``size``.

    Args:
        what: the collective, for the message.
        root_rank: the root's group rank.
        size: the group size.
    """
    if not 0 <= root_rank < size:
        raise ValueError(f"{what}: root {root_rank} is not a rank of this group of {size}")


def not_self(what: str, peer: int | None, rank: int) -> None:
    """Raise ValueError when a point-to-point ``peer`` is this rank itself.

    Args:
        what: ``"send"`` or ``"recv"``.
        peer: the peer's group rank.
        rank: this rank.
    """
    if peer == rank:
        side = "dst" if what == "send" else "src"
        verb = "send to" if what == "send" else "receive from"
        raise ValueError(f"{what}: {side} {peer} is this rank; a rank cannot {verb} itself")
