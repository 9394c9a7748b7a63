"""NumPy twin of the shm transport's n-ary reduction kernel (csrc/shm/shm_reduce.h).

``reduce_ranks(dst, srcs, op)`` writes ``op(srcs[0], srcs[1], ..., srcs[n-1])`` into ``dst`` in
rank order, element-wise, with NumPy's ufunc semantics (integers wrap, min/max propagate NaN, on
bool sum/max are "or" and prod/min are "and"). float16 is accumulated in float32 across ALL the
sources and rounded to float16 once (NumPy's own a + b + c would round after every add).

>>> import numpy as np
>>> a = np.full(2, 2048, np.float16); b = np.ones(2, np.float16)
>>> out = np.empty(2, np.float16)
>>> reduce_ranks(out, [a, b, b], "sum")   # 2048 + 1 + 1 = 2050; float16 chains give 2048
>>> out.tolist(), (a + b + b).tolist()
([2050.0, 2050.0], [2048.0, 2048.0])
"""
from __future__ import annotations

import numpy as np

OPS = ("sum", "prod", "min", "max", "band", "bor", "bxor")
_UFUNC = {"sum": np.add, "prod": np.multiply, "min": np.minimum, "max": np.maximum,
          "band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}
_F16 = np.dtype(np.float16)


def check_op(dtype, op: str) -> None:
    """Raise ValueError for an unknown op or a bitwise op on a floating dtype."""
    if op not in _UFUNC:
        raise ValueError(f"shm: unknown reduce op '{op}' (expected one of {', '.join(OPS)})")
    if op in ("band", "bor", "bxor") and np.dtype(dtype).kind == "f":
        raise ValueError(f"shm: bitwise reduce op '{op}' is not defined for {np.dtype(dtype)} "
                         "(use an integer or bool tensor)")


def reduce_ranks(dst: np.ndarray, srcs, op: str) -> None:
    """dst = op over srcs in order (the twin of ``tensorbrain._C.shm_reduce_ranks``)."""
    check_op(dst.dtype, op)
    ufunc = _UFUNC[op]
    if len(srcs) == 1:
        np.copyto(dst, srcs[0])
        return
    if dst.dtype == _F16:
        acc = srcs[0].astype(np.float32)
        for s in srcs[1:]:
            ufunc(acc, s.astype(np.float32), out=acc)
        np.copyto(dst, acc.astype(np.float16))  # one round-to-nearest-even, like the C++ cast
        return
    if any(np.shares_memory(s, dst) for s in srcs[2:]):  # in place: keep the source intact
        srcs = list(srcs[:2]) + [s.copy() if np.shares_memory(s, dst) else s for s in srcs[2:]]
    ufunc(srcs[0], srcs[1], out=dst)
    for s in srcs[2:]:
        ufunc(dst, s, out=dst)
