"""The 2-D convolution path on column arrays: ``im2col2d``/``col2im2d`` build and scatter the
columns straight from and into the unpadded images, and one GEMM (or one per image) does the
rest (``_conv2d_columns``, ``_conv_transpose2d_folded``). ``convnd.conv``/``conv_transpose``
take this path where ``_columns_module`` names a module that has the two column functions: the
C++ one (``csrc/kernels/im2col.cpp``, float32/float64 NumPy arrays) or the CuPy kernels of
``cuda_fused.py`` (float32 CuPy arrays, with ``TB_CUDA_CONV=1``). The NumPy functions here are
their twins (tests/nn/test_conv_native.py, tests/test_cuda_kernels_cpu.py).
"""
from __future__ import annotations

import numpy as np

from .. import _config, _gemm, _native
from .._xp import get_array_module, is_cupy_array
from .core import make, sum_axes
from .windows import _col2im, _im2col, _pad

_KEEP_COLS_BYTES = 64 << 20   # forward keeps its columns for the weight gradient up to this size
# On a GPU cache-sized chunks and limits (this one, convnd._FLAT_CHUNK_BYTES) only multiply kernel
# launches (a ResNet-18
# step on an H200 made ~30,000 of them and took 8.4x torch's time): there every batched GEMM is
# one GEMM, and the columns are kept up to this many bytes.
_GPU_BYTES = 4 << 30


def _limit(xp, cpu_bytes: int) -> int:
    """``cpu_bytes`` for NumPy arrays, ``_GPU_BYTES`` for CuPy's."""
    return cpu_bytes if xp is np else _GPU_BYTES


# ***** 2-D columns: native kernels (csrc/kernels/im2col.cpp) and their NumPy twins *****
def _tail_pad(size, k, s, d, p, o):
    """Zero padding needed after the input so that ``o`` windows fit (0 when they already do)."""
    return max(0, (o - 1) * s + d * (k - 1) + 1 - size - p)


def im2col2d(x, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold):
    """The columns of ``x`` ``(N, C, H, W)`` with zero padding ``(ph, pw)`` before each spatial
    dim: ``(C*KH*KW, N*OH*OW)`` with ``fold`` (one GEMM over the batch reads it), else
    ``(N, C*KH*KW, OH*OW)``. The NumPy twin of ``tensorbrain._C.im2col2d``."""
    xp = get_array_module(x)
    h, w = x.shape[2:]
    xpad = _pad(xp, x, (ph, pw), (_tail_pad(h, kh, sh, dh, ph, oh), _tail_pad(w, kw, sw, dw, pw, ow)))
    return _im2col(xp, xpad, (kh, kw), (sh, sw), (dh, dw), (oh, ow), fold)


def col2im2d(cols, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, fold):
    """The adjoint of :func:`im2col2d`: the ``(N, C, H, W)`` sum of the columns at their input
    pixels, those in the padding dropped. The NumPy twin of ``tensorbrain._C.col2im2d``."""
    xp = get_array_module(cols)
    if fold:
        v = cols.reshape(c, kh, kw, n, oh, ow).transpose(3, 0, 1, 2, 4, 5)
    else:
        v = cols.reshape(n, c, kh, kw, oh, ow)
    padded = (n, c, h + ph + _tail_pad(h, kh, sh, dh, ph, oh), w + pw + _tail_pad(w, kw, sw, dw, pw, ow))
    img = _col2im(xp, v, padded, (kh, kw), (sh, sw), (dh, dw), (oh, ow))
    return xp.ascontiguousarray(img[:, :, ph:ph + h, pw:pw + w])


_NATIVE_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_NATIVE_2D = True   # tests switch the native 2-D path off to run the NumPy paths
# The largest OH*OW whose convolution runs one GEMM over the batch (see _conv2d_columns). Where
# it pays depends on the CPU: on the Intel Xeon the 32->64 layer of the conv net at 16x16 ran
# fwd+bwd in 25.7 ms folded against 28.9 per image (docs/training.md); on the AMD EPYC (Zen 4,
# OpenBLAS) the same layer ran 15.1 per image against 16.1 ms folded, and 14x14 and 12x12
# outputs still ran faster folded (11.2 against 12.0, 26.2 against 28.5 ms; one thread,
# 2026-11-30, docs/training.md "The conv net on an AMD EPYC").
_FOLD_CONV_MAX = 256 if _gemm._intel_cpu() else 255


def _columns_module(x):
    """Where :func:`im2col2d`/:func:`col2im2d` run for ``x``: the C++ module (float32/64 NumPy
    arrays), their CuPy kernels (float32 CuPy arrays, ``_ops/cuda_fused.py``), or None for the
    NumPy/CuPy paths."""
    if not _NATIVE_2D or x.dtype not in _NATIVE_DTYPES:
        return None
    if type(x) is np.ndarray:
        return _native.loaded()
    if x.dtype == np.float32 and is_cupy_array(x) and _config.get("TB_CUDA_CONV"):
        from . import cuda_fused
        return cuda_fused
    return None


def _swap_native(a, bias=None):
    """The C++ ``swap_leading_axes`` for a C-contiguous float32/float64 NumPy ``a`` (and a bias
    of its dtype), or None."""
    if not _NATIVE_2D or type(a) is not np.ndarray or a.dtype not in _NATIVE_DTYPES or not a.flags.c_contiguous or \
            (bias is not None and (type(bias) is not np.ndarray or bias.dtype != a.dtype)):
        return None
    C = _native.loaded()
    return None if C is None else C.swap_leading_axes(a, None if bias is None else np.ascontiguousarray(bias))


def _to_channel_major(xp, a):
    """``(N, C, *S)`` -> ``(C, N * prod(S))``: the layout of a GEMM over the whole batch (the
    native copy splits the rows across threads; NumPy's is its twin)."""
    n, c = a.shape[:2]
    out = _swap_native(a.reshape(n, c, -1))
    if out is None:
        out = xp.ascontiguousarray(a.reshape(n, c, -1).transpose(1, 0, 2))
    return out.reshape(c, -1)


def _from_channel_major(xp, a, n, spatial, bias=None):
    """``(C, N * L)`` -> ``(N, C, *spatial)`` in one copy (the bias added in the same pass)."""
    c = a.shape[0]
    out = _swap_native(a.reshape(c, n, -1), bias)
    if out is not None:
        return out.reshape((n, c) + tuple(spatial))
    v = a.reshape(c, n, -1).transpose(1, 0, 2)
    out = xp.empty((n, c, v.shape[2]), dtype=a.dtype)
    if bias is None:
        out[...] = v
    else:
        xp.add(v, bias.reshape(1, c, 1), out=out)
    return out.reshape((n, c) + tuple(spatial))


def _conv2d_columns(C, input, weight, bias, x, unbatched, geom):
    """A 2-D convolution (groups=1) on columns built and scattered by the native kernels
    straight from and into the unpadded images.

    Small outputs (L = OH*OW <= ``_FOLD_CONV_MAX``) run one GEMM over the whole batch:
    ``W (OC, K) @ cols (K, N*L)`` forward, ``gW = g (OC, N*L) @ cols.T`` and
    ``gx = col2im(W.T @ g)`` backward, with one transposing copy of the output and of its
    gradient. Larger outputs run a GEMM per image on ``(N, K, L)`` columns, whose results are
    already in NCHW order (the copy would cost more than the wider GEMM saves). Figures in
    docs/training.md ("At torch's level").
    """
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow = geom
    n, c, h, wd = x.shape
    w = weight._data
    oc = w.shape[0]
    w2 = w.reshape(oc, -1)
    xp = get_array_module(x)
    x = xp.ascontiguousarray(x)   # the column kernels read whole planes (a permuted input raised)
    fold = oh * ow <= _FOLD_CONV_MAX or xp is not np   # a GPU: always one GEMM
    cols = C.im2col2d(x, *geom, fold)
    if fold:
        out = _from_channel_major(xp, _gemm.mm(w2, cols), n, (oh, ow), None if bias is None else bias._data)
    else:
        out = _gemm.mm_each(w2, cols).reshape(n, oc, oh, ow)
        if bias is not None:
            out += bias._data.reshape(1, oc, 1, 1)
    kept = cols if weight.requires_grad and cols.nbytes <= _limit(xp, _KEEP_COLS_BYTES) else None
    del cols
    if unbatched:
        out = out[0]

    def backward(g):
        if unbatched:
            g = g[None]
        # channel-major for one GEMM; else contiguous (a stride-0 g makes matmul skip BLAS)
        gf = _to_channel_major(xp, g) if fold else xp.ascontiguousarray(g).reshape(n, oc, -1)
        gx = gw = gb = None
        if bias is not None and bias.requires_grad:
            gb = sum_axes(gf, (1,) if fold else (0, 2))
        if weight.requires_grad:
            cols = kept if kept is not None else C.im2col2d(x, *geom, fold)
            if fold:
                gw = _gemm.mm(gf, cols.T).reshape(w.shape)
            else:   # (K, L) @ (L, OC) per image: the faster orientation (see conv())
                gw = xp.ascontiguousarray(_gemm.mm_sum(cols, gf.swapaxes(-1, -2)).T)
                gw = gw.reshape(w.shape)
        if input.requires_grad:
            gx = C.col2im2d(_gemm.mm(w2.T, gf) if fold else _gemm.mm_each(w2.T, gf), n, c, h, wd, *geom, fold)
            if unbatched:
                gx = gx[0]
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "ConvolutionBackward", (input, weight))


def _conv_transpose2d_folded(C, input, weight, bias, x, unbatched, geom, outs):
    """A 2-D transposed convolution (groups=1) as one GEMM over the whole batch: forward
    ``col2im(W.T @ x)``, backward the columns of the output gradient shared by ``gx = W @ gcols``
    and ``gW = x @ gcols.T`` (the native kernels crop and pad, no padded image is made)."""
    kh, kw, sh, sw, ph, pw, dh, dw, ih, iw = geom
    n, c = x.shape[:2]
    xp = get_array_module(x)
    w = weight._data
    oc = w.shape[1]
    w2 = w.reshape(c, -1)                                  # (Cin, Cout*K)
    x4 = _to_channel_major(xp, x)                          # (Cin, N*L)
    cols = _gemm.mm(w2.T, x4)                              # (Cout*K, N*L)
    out = C.col2im2d(cols, n, oc, outs[0], outs[1], *geom, True)
    del cols
    if bias is not None:
        out += bias._data.reshape(1, oc, 1, 1)
    if unbatched:
        out = out[0]

    def backward(g):
        if unbatched:
            g = g[None]
        g = xp.ascontiguousarray(g, dtype=x.dtype)
        gx = gw = gb = None
        if bias is not None and bias.requires_grad:
            gb = sum_axes(g, (0, 2, 3))
        if input.requires_grad or weight.requires_grad:
            gcols = C.im2col2d(g, *geom, True)             # (Cout*K, N*L)
            if input.requires_grad:
                gx = _from_channel_major(xp, _gemm.mm(w2, gcols), n, (ih, iw))
                if unbatched:
                    gx = gx[0]
            if weight.requires_grad:
                gw = _gemm.mm(x4, gcols.T).reshape(w.shape)
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "ConvolutionBackward", (input, weight))

