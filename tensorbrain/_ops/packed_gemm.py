"""NumPy twins of ``tensorbrain._C.PackedMatrix`` and ``tensorbrain._C.gemm_packed``: a GEMM
whose right operand ``B (K, N)`` is prepared once and reused, for the products a recurrent layer
repeats every timestep with the same weight (csrc/kernels/gemm.h; the native one packs ``B``
into panels for its AVX2/FMA micro-kernel, where OpenBLAS repacked it on every call).

``B``'s columns form ``groups`` equal blocks, and the product is written block by block as
``(groups, M, N / groups)``: with 4 groups, an LSTM step's ``(4, B, H)`` gates. The twin keeps
the blocks as one ``(groups, K, N / groups)`` array and runs one batched ``matmul`` (what
``_ops/rnn.py`` ran before the native kernel; tests/nn/test_packed_gemm.py holds the two
together). It serves CuPy arrays, other dtypes and builds without the native module.
"""
from __future__ import annotations

from .._xp import get_array_module


class PackedMatrix:
    """``B (K, N)``, its columns split into ``groups`` equal blocks, ready for
    :func:`gemm_packed` (the twin of ``tensorbrain._C.PackedMatrix``).

    Args:
        b: ``(K, N)`` array (any strides).
        groups: a positive divisor of ``N``.
        order (Sequence[int] | None): group ``g`` takes ``b``'s column block ``order[g]`` (each
            group once); None keeps them in place.
        scale (Sequence[float] | None): group ``g``'s values multiplied by ``scale[g]``.

    Raises:
        ValueError: ``b`` is not 2-D, ``groups`` does not divide ``N``, or ``order``/``scale``
            do not have one entry per group (``order`` each group once).
    """

    def __init__(self, b, groups: int = 1, order=None, scale=None):
        if b.ndim != 2:
            raise ValueError(f"PackedMatrix: b must be a 2-D array (K, N), got shape {tuple(b.shape)}")
        K, N = b.shape
        if groups < 1 or N % groups:
            raise ValueError(f"PackedMatrix: groups must be a positive divisor of N = {N}, got {groups}")
        if order is not None and sorted(order) != list(range(groups)):
            raise ValueError(f"PackedMatrix: order must list each of the {groups} groups once")
        if scale is not None and len(scale) != groups:
            raise ValueError(f"PackedMatrix: scale must have one value per group ({groups}), got {len(scale)}")
        xp = get_array_module(b)
        self.k, self.n, self.groups = int(K), int(N), int(groups)
        blocks = b.reshape(K, groups, N // groups).transpose(1, 0, 2)
        if order is not None:
            blocks = blocks[list(order)]
        if scale is not None:
            blocks = blocks * xp.asarray(scale, dtype=b.dtype).reshape(groups, 1, 1)
        self.blocks = xp.ascontiguousarray(blocks)


def gemm_packed(a, b: PackedMatrix, out, accumulate: bool = False) -> None:
    """``out (groups, M, N / groups) = a (M, K) @ B`` (``+=`` with ``accumulate``), in place.

    Args:
        a: ``(M, K)`` array.
        b: the packed right operand.
        out: array of ``M * N`` values, read as ``(groups, M, N / groups)``.
        accumulate: add to ``out`` instead of overwriting it.
    """
    xp = get_array_module(a)
    M = a.shape[0]
    if a.ndim != 2 or a.shape[1] != b.k:
        raise ValueError(f"gemm_packed: a must be an (M, {b.k}) array, got shape {tuple(a.shape)}")
    if out.size != M * b.n:
        raise ValueError(f"gemm_packed: out must have M * N = {M * b.n} values, laid out "
                         f"({b.groups}, M, {b.n // b.groups}), got shape {tuple(out.shape)}")
    o = out.reshape(b.groups, M, b.n // b.groups)
    if accumulate:
        o += xp.matmul(a[None], b.blocks)
    else:
        xp.matmul(a[None], b.blocks, out=o)
