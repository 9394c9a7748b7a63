"""``F.scaled_mm`` and ``F.scaled_grouped_mm``: matrix products of low-precision (float8)
operands with dequantisation scales, as torch's, for the tensor-wise and row-wise recipes.

The operands are widened to float32, multiplied by their scales (``scale_a`` per tensor or per
row of ``mat_a``, ``scale_b`` per tensor or per column of ``mat_b``), multiplied, the bias added
and the result cast to ``output_dtype``: the values torch's CPU kernel gives (its float32
accumulation). The block-wise recipes (MX/NVFP4 formats, swizzled scale layouts) are refused by
name; grouped products go through :func:`grouped_mm`.
"""
from __future__ import annotations

import enum

import numpy as np

from . import elementwise as E
from . import shape as S
from .nn_more import grouped_mm


class ScalingType(enum.IntEnum):
    """How a scale tensor covers its operand (torch's ``F.ScalingType``)."""
    TensorWise = 0
    RowWise = 1
    BlockWise1x16 = 2
    BlockWise1x32 = 3
    BlockWise1x128 = 4
    BlockWise128x128 = 5


class SwizzleType(enum.IntEnum):
    """The memory layout of a block-wise scale (torch's ``F.SwizzleType``)."""
    NO_SWIZZLE = 0
    SWIZZLE_32_4_4 = 1


def _recipe(recipe, swizzle, which: str) -> int:
    r = recipe[0] if isinstance(recipe, (list, tuple)) else recipe
    sw = swizzle[0] if isinstance(swizzle, (list, tuple)) else swizzle
    if int(r) not in (ScalingType.TensorWise, ScalingType.RowWise):
        raise NotImplementedError(f"scaled_mm: scale_recipe_{which}={ScalingType(int(r)).name} "
                                  f"is not supported by TensorBrain (block-wise MX/NVFP4 "
                                  f"scaling); TensorWise and RowWise are")
    if sw is not None and int(sw) != SwizzleType.NO_SWIZZLE:
        raise NotImplementedError(f"scaled_mm: swizzle_{which}={SwizzleType(int(sw)).name} is "
                                  f"not supported by TensorBrain (only NO_SWIZZLE)")
    return int(r)


def _scaled(mat, scale, recipe: int, rows: bool):
    """``mat`` widened to float32 times its scale (per tensor, or per row / per column)."""
    from ..tensor import Tensor
    scale = scale[0] if isinstance(scale, (list, tuple)) else scale
    x = mat.to(np.float32)
    s = scale.to(np.float32) if isinstance(scale, Tensor) else float(scale)
    if recipe == ScalingType.RowWise and isinstance(s, Tensor) and s.numel() > 1:
        # rows of mat_a: (..., M, 1); columns of mat_b: (..., 1, N)
        s = (S.reshape(s, *mat.shape[:-1], 1) if rows
             else S.reshape(s, *mat.shape[:-2], 1, mat.shape[-1]))
    return E.mul(x, s)


def scaled_mm(mat_a, mat_b, scale_a, scale_recipe_a, scale_b, scale_recipe_b, swizzle_a=None,
              swizzle_b=None, bias=None, output_dtype=None, contraction_dim=(),
              use_fast_accum=False):
    """``(mat_a * scale_a) @ (mat_b * scale_b) + bias`` in float32, cast to ``output_dtype``, as
    ``torch.nn.functional.scaled_mm``.

    Args:
        mat_a: ``(M, K)``, usually float8.
        mat_b: ``(K, N)``.
        scale_a: a one-element tensor (TensorWise) or ``(M, 1)`` (RowWise).
        scale_recipe_a: a :class:`ScalingType`.
        scale_b: one element (TensorWise) or ``(1, N)`` (RowWise).
        scale_recipe_b: a :class:`ScalingType`.
        swizzle_a: None or ``SwizzleType.NO_SWIZZLE``.
        swizzle_b: None or ``SwizzleType.NO_SWIZZLE``.
        bias: ``(N,)`` added to the product.
        output_dtype: the result's dtype (None: bfloat16, torch's default).
        contraction_dim: accepted when empty or ``(1, 0)``.
        use_fast_accum: accepted (float32 accumulation either way).

    Returns:
        Tensor ``(M, N)``.

    Raises:
        NotImplementedError: a block-wise recipe or a swizzled scale.
    """
    from .._dtype import bfloat16
    ra = _recipe(scale_recipe_a, swizzle_a, "a")
    rb = _recipe(scale_recipe_b, swizzle_b, "b")
    out = S.matmul(_scaled(mat_a, scale_a, ra, True), _scaled(mat_b, scale_b, rb, False))
    if bias is not None:
        out = E.add(out, bias.to(np.float32))
    return out.to(bfloat16 if output_dtype is None else output_dtype)


def scaled_grouped_mm(mat_a, mat_b, scale_a, scale_recipe_a, scale_b, scale_recipe_b,
                      swizzle_a=None, swizzle_b=None, bias=None, offs=None, output_dtype=None,
                      contraction_dim=(), use_fast_accum=False):
    """Grouped products of scaled operands, as ``torch.nn.functional.scaled_grouped_mm``:
    each operand times its scales (row-wise: ``scale_a`` per row of ``mat_a``, ``scale_b`` per
    group and column of ``mat_b``), then :func:`grouped_mm` with ``offs``.

    Args:
        mat_a: ``(sum M, K)`` or ``(G, M, K)``.
        mat_b: ``(G, K, N)``.
        scale_a: ``(sum M,)`` / ``(G, M)`` row scales, or one element.
        scale_recipe_a: a :class:`ScalingType`.
        scale_b: ``(G, N)`` column scales, or one element.
        scale_recipe_b: a :class:`ScalingType`.
        swizzle_a: None or ``NO_SWIZZLE``.
        swizzle_b: None or ``NO_SWIZZLE``.
        bias: not supported (as :func:`grouped_mm`).
        offs: the groups' end rows in ``mat_a`` (2-D ``mat_a``).
        output_dtype: the result's dtype (None: bfloat16).
        contraction_dim: accepted when empty.
        use_fast_accum: accepted.

    Returns:
        The grouped product.

    Raises:
        NotImplementedError: a block-wise recipe or a swizzled scale.
    """
    from .._dtype import bfloat16
    ra = _recipe(scale_recipe_a, swizzle_a, "a")
    rb = _recipe(scale_recipe_b, swizzle_b, "b")
    a = _scaled(mat_a, scale_a, ra, True)
    b = _scaled(mat_b, scale_b, rb, False)
    return grouped_mm(a, b, offs=offs, bias=bias,
                      out_dtype=bfloat16 if output_dtype is None else output_dtype)


__all__ = ["ScalingType", "SwizzleType", "scaled_grouped_mm", "scaled_mm"]
