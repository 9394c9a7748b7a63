"""The pipeline's argument check (:func:`check`), and the checks it is made of.

One place for every check of a collective's arrays, so an error's wording depends neither on
the backend nor on the layer (docs/architecture.md, "Check once"); checks of (op, dtype) pairs
are cached because the 8-byte latency path runs them on every call.

>>> import numpy as np
>>> check_reduce("sum", np.dtype("float32"), ("float32",), "tcp")
>>> splits(None, 6, 3, "input_split_sizes")
[2, 2, 2]
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .base import Array, Backend, Call

#: the reduce ops of ``tensorbrain._kernels.reduce_into`` plus "avg"
REDUCE_OPS = ("sum", "avg", "prod", "min", "max", "band", "bor", "bxor")
BITWISE = ("band", "bor", "bxor")
FLOATING = frozenset({"float16", "float32", "float64", "bfloat16"})

#: the kinds that reduce, and the arrays whose dtype they reduce ("in": the inputs, "out": the output)
_REDUCING = {"all_reduce": "in", "reduce": "in", "reduce_scatter": "out",
             "reduce_scatter_tensor": "out"}


def check(call: Call, backend: Backend) -> None:
    """Raise unless ``call`` is a valid collective for ``backend`` (its size and capabilities):
    ValueError for sizes, a refused op or splits, TypeError for dtypes. Sets ``call.rows`` for
    all_to_all_single: the rows received from and sent to each rank."""
    kind, ins, outs, n = call.kind, call.inputs, call.outputs, backend.size
    op = call.op
    if op is not None:
        caps = backend.capabilities
        if op not in caps.ops:  # (an unknown op: refused first, by _collectives._op)
            raise ValueError(caps.refused.format(OP=op.upper()))
        dtypes = caps.dtypes
        for a in (ins if _REDUCING[kind] == "in" else outs):
            if (op, a.dtype, dtypes) not in _CHECKED:  # the latency path: one set lookup
                check_reduce(op, a.dtype, dtypes, backend.name)
    if kind == "all_reduce":
        for a in ins:  # before anything is posted: a failed copy-back would come too late
            if type(a) is np.ndarray and not a.flags.writeable:
                raise ValueError(f"all_reduce writes its result into the tensor, but this "
                                 f"{a.dtype} array of shape {a.shape} is read-only; pass a "
                                 "writable copy")
    elif kind == "all_gather":
        each_like(outs, ins[0], kind, "tensor_list", "input", "; all must match")
    elif kind in ("gather", "scatter") and call.root == backend.rank:
        lists, ref = (outs, ins[0]) if kind == "gather" else (ins, outs[0])
        each_like(lists, ref, kind, f"{kind}_list", "input" if kind == "gather" else "output")
    elif kind == "reduce_scatter":
        each_like(ins, outs[0], kind, "input_list", "output")
    elif kind in ("all_gather_into_tensor", "reduce_scatter_tensor"):
        out, src = outs[0], ins[0]
        big, small = ("output", "input") if kind == "all_gather_into_tensor" else \
            ("input", "output")
        sizes = {"output": out.size, "input": src.size}
        if sizes[big] != sizes[small] * n:
            raise ValueError(f"{kind}: {big} has {sizes[big]} elements, expected world_size x "
                             f"{small} = {n} x {sizes[small]}")
        same_dtype(out, src, kind)
    elif kind == "all_to_all":  # (world_size lists: dist.all_to_all checked them)
        _own_block(ins[backend.rank].size, outs[backend.rank].size)
    elif kind == "all_to_all_single":
        out, src = outs[0], ins[0]
        same_dtype(out, src, kind)
        out_splits, in_splits = call.splits or (None, None)
        call.rows = (splits(out_splits, rows_of(out), n, "output_split_sizes"),
                     splits(in_splits, rows_of(src), n, "input_split_sizes"))
        r = backend.rank
        _own_block(call.rows[1][r] * per_row(src), call.rows[0][r] * per_row(out))


def _own_block(sent: int, slot: int) -> None:
    if sent != slot:
        raise ValueError(f"all_to_all: this rank's block to itself has {sent} elements but its "
                         f"output slot {slot}")


def per_row(array: Array) -> int:
    """Elements in one row (dim 0 entry) of ``array`` (a 0-d array counts as one row)."""
    rows = rows_of(array)
    return int(array.size) // rows if rows else 0


def same_dtype(a: Array, b: Array, what: str) -> None:
    """Raise TypeError unless ``a`` and ``b`` have one dtype (``what``: the collective)."""
    if a.dtype != b.dtype:
        raise TypeError(f"{what}: dtype mismatch ({a.dtype} vs {b.dtype})")


def each_like(arrays: Sequence[Array], ref: Array, what: str, name: str, role: str,
              hint: str = "") -> None:
    """Each array of the list argument ``name`` (``"tensor_list"``) of collective ``what`` must
    have the size and dtype of its single ``role`` array ``ref`` (``hint`` ends the message)."""
    for i, a in enumerate(arrays):
        if a.size != ref.size:
            raise ValueError(f"{what}: {name}[{i}] has shape {a.shape}, the {role} "
                             f"{ref.shape}{hint}")
        same_dtype(a, ref, what)


# (op, dtype, dtypes) triples already accepted
_CHECKED: set[tuple[str, np.dtype, tuple[str, ...]]] = set()


def check_reduce(op: str, dtype: np.dtype, dtypes: tuple[str, ...], backend: str) -> None:
    """Raise unless ``op`` can reduce ``dtype`` on ``backend``, which reduces ``dtypes``; cached
    per (op, dtype, dtypes)."""
    key = (op, dtype, dtypes)
    if key in _CHECKED:
        return
    name = np.dtype(dtype).name
    if name not in dtypes:
        raise TypeError(f"the {backend} backend cannot reduce {name} arrays; supported: "
                        f"{', '.join(dtypes)}")
    if op == "avg" and name not in FLOATING:
        raise TypeError(f"ReduceOp.AVG needs a floating dtype, got {name} (integer averages are "
                        "not defined, as in torch's Gloo): reduce with SUM and divide")
    if op in BITWISE and np.dtype(dtype).kind not in "iub":
        raise TypeError(f"ReduceOp.{op.upper()} needs an integer or bool dtype, got {name}")
    _CHECKED.add(key)


def splits(given: Sequence[int] | None, rows: int, size: int, what: str) -> list[int]:
    """all_to_all_single's rows per rank: ``given`` (the argument ``what``) checked to be
    ``size`` non-negative counts summing to ``rows`` (dim 0), or an even split when it is None
    or empty."""
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
    """Bytes in one row (:func:`per_row` elements) of ``array``."""
    return per_row(array) * int(array.itemsize)
