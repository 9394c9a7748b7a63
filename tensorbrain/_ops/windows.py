"""Strided windows over N-d inputs, shared by convolution (``convnd.py``), the 3-D pools
(``pooling.py``) and ``unfold``/``fold`` (``nn_more.py``).

* ``_windows``: a strided *view* of every kernel window, ``(N, C, *K, *O)`` (``as_strided``,
  no copy); ``_im2col`` copies it once into a column array.
* ``_col2im``: the adjoint, a scattered add of the column array into the (padded) image, one
  vectorised add per kernel position (9 for a 3x3 kernel), never a loop over pixels.
* ``ntuple``, ``_out_size``, ``_pad``, ``_padding``: the argument and size rules (torch's).
"""
from __future__ import annotations

import itertools
import math




def ntuple(v, nd, name):
    """``v`` as a tuple of ``nd`` ints (an int is repeated; a 1-tuple too)."""
    if isinstance(v, int):
        return (v,) * nd
    v = tuple(v)
    if len(v) == 1:
        v = v * nd
    if len(v) != nd or not all(isinstance(i, int) for i in v):
        raise ValueError(f"{name} must be an int or a tuple of {nd} ints, got {v!r}")
    return v


def _out_size(size, k, s, d, pad_total):
    span = size + pad_total - d * (k - 1) - 1
    return span // s + 1 if span >= 0 else 0


def _pad(xp, x, lo, hi):
    """Zero-pad the trailing ``len(lo)`` dims of ``x`` (by hand: np.pad costs ~0.4 ms of argument
    handling per call, more than the copy itself on a ResNet-size activation)."""
    if not any(lo) and not any(hi):
        return x
    nd = len(lo)
    lead = x.shape[:x.ndim - nd]
    padded = tuple(s + a + b for s, a, b in zip(x.shape[-nd:], lo, hi, strict=True))
    out = xp.zeros(lead + padded, dtype=x.dtype)
    out[(Ellipsis,) + tuple(slice(a, a + s) for a, s in zip(lo, x.shape[-nd:], strict=True))] = x
    return out


def _windows(xp, x, ks, ss, ds, outs):
    """View ``(N, C, *K, *O)`` of the windows of padded ``x`` ``(N, C, *S)``, no copy."""
    st = x.strides[2:]
    shape = x.shape[:2] + tuple(ks) + tuple(outs)
    strides = x.strides[:2] + tuple(s * d for s, d in zip(st, ds, strict=True)) + \
        tuple(s * t for s, t in zip(st, ss, strict=True))
    return xp.lib.stride_tricks.as_strided(x, shape, strides)


def _im2col(xp, x, ks, ss, ds, outs, fold_batch):
    """The column array of padded ``x`` (N, C, *S), copied once from the window view:
    ``(N, C*prod(K), L)`` for a GEMM per image, or with ``fold_batch`` ``(C*prod(K), N*L)`` for
    one GEMM over the whole batch (the transpose is folded into the same copy)."""
    n, c = x.shape[:2]
    kk, L = c * math.prod(ks), math.prod(outs)
    v = _windows(xp, x, ks, ss, ds, outs)
    if fold_batch:
        nd = len(ks)
        perm = (1,) + tuple(range(2, 2 + nd)) + (0,) + tuple(range(2 + nd, 2 + 2 * nd))
        return xp.ascontiguousarray(v.transpose(perm)).reshape(kk, n * L)
    return xp.ascontiguousarray(v).reshape(n, kk, L)


def _positions(ks, ss, ds, outs):
    """For each kernel position: its index and the strided slice of the padded image it reads."""
    for pos in itertools.product(*(range(k) for k in ks)):
        yield pos, tuple(slice(p * d, p * d + s * (o - 1) + 1, s)
                         for p, s, d, o in zip(pos, ss, ds, outs, strict=True))


def _col2im(xp, cols, padded_shape, ks, ss, ds, outs):
    """Adjoint of im2col: add ``cols`` ``(N, C, *K, *O)`` into a zero image ``padded_shape``."""
    img = xp.zeros(padded_shape, dtype=cols.dtype)
    # Windows that tile the image (stride == kernel, no dilation) do not overlap: assign.
    tiles = tuple(ss) == tuple(ks) and all(d == 1 for d in ds)
    lead = (slice(None), slice(None))
    for pos, sl in _positions(ks, ss, ds, outs):
        src = cols[lead + pos]
        if tiles:
            img[lead + sl] = src
        else:
            img[lead + sl] += src
    return img


def _padding(name, padding, ks, ss, ds):
    """``(lo, hi)`` padding per spatial dim; ``'same'`` puts the odd pixel at the end (torch)."""
    nd = len(ks)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * nd, (0,) * nd
        if padding == "same":
            if any(s != 1 for s in ss):
                raise ValueError(f"{name}: padding='same' is not supported for strided "
                                 f"convolutions (stride {tuple(ss)})")
            tot = [d * (k - 1) for k, d in zip(ks, ds, strict=True)]
            return tuple(t // 2 for t in tot), tuple(t - t // 2 for t in tot)
        raise ValueError(f"{name}: padding must be 'valid', 'same', an int or a tuple of {nd} "
                         f"ints, got {padding!r}")
    p = ntuple(padding, nd, "padding")
    if any(v < 0 for v in p):
        raise RuntimeError(f"{name}: negative padding {p} is not supported")
    return p, p
