"""Stride-1 3x3 convolutions by Winograd's minimal filtering, F(2x2, 3x3) (Lavin and Gray, 2016).

Each 2x2 output tile is ``A^T [sum_c (G w G^T) * (B^T d B)] A`` for its 4x4 input tile ``d``:
16 products per 4 outputs where im2col + GEMM spends 36, done as 16 GEMMs (one per transformed
position) of ``U (OC, C) @ V (C, T)`` over all T tiles of the batch. The backward is the chain
rule through the same linear maps: ``gM = A g A^T`` per tile, ``gU = gM @ V^T`` (then
``gW = G^T gU G``), ``gV = U^T @ gM`` (then ``gx`` = the adjoint input transform). The tile
transforms run in ``csrc/kernels/winograd.cpp``; the functions here are their NumPy twins
(tests/nn/test_winograd.py holds them together) and the op.

``convnd.conv`` takes this path (``TB_WINOGRAD``, default on) for float32/float64 NumPy arrays
with the native module, groups 1, a 3x3 kernel, stride and dilation 1, and enough channels and
tiles for the 16 products to be worth their transforms (:func:`transforms_for`). The results differ from
im2col + GEMM by rounding only (the transforms' coefficients are 0, +-1 and 1/2). Figures in
docs/training.md ("Winograd").
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import _config, _gemm, _native
from .core import make, sum_axes

_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
_BT = np.array([[1.0, 0.0, -1.0, 0.0], [0.0, 1.0, 1.0, 0.0], [0.0, -1.0, 1.0, 0.0], [0.0, 1.0, 0.0, -1.0]])
_AT = np.array([[1.0, 1.0, 1.0, 0.0], [0.0, 1.0, -1.0, -1.0]])

# Taken when both sides of every product have at least this many channels and the batch has
# this many tiles: below them the 16 small GEMMs and the transforms cost more than the 2.25x
# fewer multiplications save (measured: docs/training.md, "Winograd").
_MIN_CHANNELS = 16
_MIN_TILES = 64
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def transforms_for(x, oc, tiles):
    """The module whose tile transforms a stride-1 3x3 convolution (groups 1) of ``x`` to ``oc``
    channels over ``tiles`` output tiles runs on: the native one for a float32/float64 NumPy
    array with ``TB_WINOGRAD`` on and enough channels and tiles, else None (im2col + GEMM)."""
    if type(x) is not np.ndarray or x.dtype not in _DTYPES or min(x.shape[1], oc) < _MIN_CHANNELS or \
            tiles < _MIN_TILES or not _config.get("TB_WINOGRAD"):
        return None
    C = _native.loaded()
    return C if C is not None and hasattr(C, "winograd_input") else None


def half(out):
    """Tiles along a dim of ``out`` outputs."""
    return (out + 1) // 2


# ***** the tile transforms' NumPy twins (tensorbrain._C.winograd_*) *****
def _frame(x, pt, pl, th, tw):
    """``x`` (N, C, H, W) in a zero frame of (2 TH + 2, 2 TW + 2), its top-left at (pt, pl)."""
    n, c, h, w = x.shape
    out = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), dtype=x.dtype)
    out[:, :, pt:pt + h, pl:pl + w] = x
    return out


def _tile_view(frame, th, tw):
    """(N, C, TH, TW, 4, 4) windows of a frame, tile (i, j) at rows 2i.., columns 2j.."""
    s = frame.strides
    return np.lib.stride_tricks.as_strided(
        frame, frame.shape[:2] + (th, tw, 4, 4), s[:2] + (2 * s[2], 2 * s[3], s[2], s[3]), writeable=False)


def winograd_input(x, pt, pl, th, tw):
    """(N, C, H, W) -> V (16, C, N*TH*TW): ``B^T d B`` of each 4x4 input tile. The twin of
    ``tensorbrain._C.winograd_input``."""
    n, c = x.shape[:2]
    d = _tile_view(_frame(x, pt, pl, th, tw), th, tw)
    bt = _BT.astype(x.dtype)
    v = np.einsum("ar,ncijrs,bs->abcnij", bt, d, bt)
    return np.ascontiguousarray(v.reshape(16, c, n * th * tw))


def winograd_input_grad(gV, n, h, w, pt, pl, th, tw):
    """The adjoint of :func:`winograd_input`: gV (16, C, T) -> gx (N, C, H, W). The twin of
    ``tensorbrain._C.winograd_input_grad``."""
    c = gV.shape[1]
    bt = _BT.astype(gV.dtype)
    gd = np.einsum("ar,abcnij,bs->ncijrs", bt, gV.reshape(4, 4, c, n, th, tw), bt)
    frame = np.zeros((n, c, 2 * th + 2, 2 * tw + 2), dtype=gV.dtype)
    for r in range(4):
        for s in range(4):
            frame[:, :, r:r + 2 * th:2, s:s + 2 * tw:2] += gd[..., r, s]
    return np.ascontiguousarray(frame[:, :, pt:pt + h, pl:pl + w])


def winograd_output(M, n, ho, wo, bias=None):
    """M (16, OC, N*TH*TW) -> y (N, OC, HO, WO): ``A^T m A`` of each tile (+ bias), cropped.
    The twin of ``tensorbrain._C.winograd_output``."""
    oc = M.shape[1]
    th, tw = half(ho), half(wo)
    at = _AT.astype(M.dtype)
    y = np.einsum("ra,abonij,sb->noirjs", at, M.reshape(4, 4, oc, n, th, tw), at)
    y = y.reshape(n, oc, 2 * th, 2 * tw)[:, :, :ho, :wo]
    if bias is not None:
        y = y + bias.reshape(1, oc, 1, 1)
    return np.ascontiguousarray(y)


def winograd_output_grad(g):
    """The adjoint of :func:`winograd_output` without the bias: g (N, OC, HO, WO) -> gM (16, OC,
    N*TH*TW). The twin of ``tensorbrain._C.winograd_output_grad``."""
    n, oc, ho, wo = g.shape
    th, tw = half(ho), half(wo)
    full = np.zeros((n, oc, 2 * th, 2 * tw), dtype=g.dtype)
    full[:, :, :ho, :wo] = g
    at = _AT.astype(g.dtype)
    gm = np.einsum("ra,noirjs,sb->abonij", at, full.reshape(n, oc, th, 2, tw, 2), at)
    return np.ascontiguousarray(gm.reshape(16, oc, n * th * tw))


# The twins under the native functions' names (tests run the op on them)
_NumpyTransforms = SimpleNamespace(winograd_input=winograd_input, winograd_input_grad=winograd_input_grad,
                                   winograd_output=winograd_output, winograd_output_grad=winograd_output_grad)


# ***** the filter transforms and the op *****
# G w G^T for every (OC, C) filter as one product: kron(G, G) (16, 9) @ w (9, OC*C)
_GG = np.kron(_G, _G)


def _filter(w):
    """(OC, C, 3, 3) -> U (16, OC, C): ``G w G^T`` for every filter."""
    oc, c = w.shape[:2]
    return _gemm.mm(_GG.astype(w.dtype), w.reshape(oc * c, 9).T).reshape(16, oc, c)


def _filter_grad(gU):
    """The adjoint of :func:`_filter`: gU (16, OC, C) -> gW (OC, C, 3, 3)."""
    oc, c = gU.shape[1:]
    return _gemm.mm(gU.reshape(16, oc * c).T, _GG.astype(gU.dtype)).reshape(oc, c, 3, 3)


def conv2d(C, input, weight, bias, x, unbatched, lo, hi):
    """A stride-1 3x3 convolution (groups 1) of ``x`` (N, C, H, W) with padding ``lo`` before and
    ``hi`` after each spatial dim, on the transforms of ``C`` (the native module, or
    ``_NumpyTransforms``). ``input``/``weight``/``bias`` are the Tensors; returns the output
    Tensor."""
    x = np.ascontiguousarray(x)   # a permuted or sliced input: the transforms read planes
    n, c, h, w = x.shape
    ho, wo = h + lo[0] + hi[0] - 2, w + lo[1] + hi[1] - 2
    th, tw = half(ho), half(wo)
    U = _filter(weight._data)                                   # (16, OC, C)
    V = C.winograd_input(x, lo[0], lo[1], th, tw)               # (16, C, T)
    # the bias goes in with the output transform when it can (x's dtype, one contiguous row)
    b = None if bias is None else bias._data
    fused = b is not None and b.dtype == x.dtype and b.ndim == 1 and b.flags.c_contiguous
    out = C.winograd_output(_gemm.bmm(U, V), n, ho, wo, b if fused else None)
    if b is not None and not fused:
        out += b.reshape(1, -1, 1, 1)
    if unbatched:
        out = out[0]

    def backward(g):
        if unbatched:
            g = g[None]
        g = np.ascontiguousarray(g, dtype=x.dtype)
        gx = gw = gb = None
        if bias is not None and bias.requires_grad:
            gb = sum_axes(g, (0, 2, 3))
        gM = C.winograd_output_grad(g)                          # (16, OC, T)
        if weight.requires_grad:
            gw = _filter_grad(_gemm.bmm(gM, V.swapaxes(1, 2)))
        if input.requires_grad:
            gx = C.winograd_input_grad(_gemm.bmm(U.swapaxes(1, 2), gM), n, h, w, lo[0], lo[1], th, tw)
            if unbatched:
                gx = gx[0]
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "ConvolutionBackward", (input, weight))
