"""Pooling over NCHW images by strided slices, and ``conv2d`` (its N-d body is ``convnd``).

Pooling reads each kernel position as one strided slice of every image (a Python loop over the
KH*KW positions, never over pixels) and scatters gradients back the same way. ``max_pool2d`` of a
C-contiguous float32/float64 NumPy array runs in one native pass instead (csrc/kernels/pool.cpp:
the max and its winner together, so backward needs no second search); the strided-slice code is
its twin, for CuPy, other dtypes and builds without ``tensorbrain._C``
(tests/nn/test_pool_native.py holds the two together).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _native
from .._xp import get_array_module, matmul
from . import convnd as _convnd
from .._tensor_base import TensorBase as Tensor
from .core import make
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py


def _pair(v, name):
    if isinstance(v, int):
        return (v, v)
    v = tuple(v)
    if len(v) == 1:
        return (v[0], v[0])
    if len(v) != 2 or not all(isinstance(i, int) for i in v):
        raise ValueError(f"{name} must be an int or a pair of ints, got {v!r}")
    return v


def _out_size(size, k, s, d, pad_total, ceil_mode=False):
    span = size + pad_total - d * (k - 1) - 1
    if span < 0:
        return 0
    return (-(-span // s) if ceil_mode else span // s) + 1


def _slice(i, j, sh, sw, dh, dw, oh, ow):
    """Index of kernel position (i, j) across all outputs in the padded input (strided slice)."""
    return (slice(None), slice(None), slice(i * dh, i * dh + sh * (oh - 1) + 1, sh),
            slice(j * dw, j * dw + sw * (ow - 1) + 1, sw))


def _pad4(xp, x, top, bottom, left, right, value=0.0):
    if not (top or bottom or left or right):
        return x
    # By hand rather than xp.pad: np.pad spent ~0.4 ms per call in argument handling alone
    # (cProfile of a ResNet-18 step: 16 ms over 36 calls), more than the copy itself.
    n, c, h, w = x.shape
    out = (xp.zeros if value == 0 else xp.empty)((n, c, h + top + bottom, w + left + right), dtype=x.dtype)
    if value != 0:
        out.fill(value)
    out[:, :, top:top + h, left:left + w] = x
    return out


def _as_4d(name, x):
    """``(x as (N, C, H, W), unbatched)``: a 3-D (C, H, W) input gains a batch dim of 1 (to be
    dropped from the result again); any other rank than 3 or 4 is an error."""
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    if x.ndim != 4:
        raise RuntimeError(f"{name}: expected a 4-D input (N, C, H, W), got shape {tuple(x.shape)}")
    return x, unbatched


# ***** convolution *****
@autocast_op("conv2d")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution; the N-d implementation is ``convnd.conv``."""
    if weight._data.ndim != 4:
        raise RuntimeError(f"conv2d: weight must be 4-D (out_channels, in_channels/groups, kH, kW), "
                           f"got shape {tuple(weight._data.shape)}")
    return _convnd.conv(input, weight, bias, stride, padding, dilation, groups, "conv2d")


# ***** pooling *****
def _pool_geometry(name, x, kernel_size, stride, padding, dilation, ceil_mode):
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(stride if stride not in (None, ()) else (kh, kw), "stride")
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError(f"{name}: padding ({ph}, {pw}) should be at most half of the kernel size "
                           f"({kh}, {kw})")
    h, w = x.shape[-2:]
    oh = _out_size(h, kh, sh, dh, 2 * ph, ceil_mode)
    ow = _out_size(w, kw, sw, dw, 2 * pw, ceil_mode)
    # PyTorch: with ceil_mode the last window must start inside the input or the left padding.
    if ceil_mode and (oh - 1) * sh >= h + ph:
        oh -= 1
    if ceil_mode and (ow - 1) * sw >= w + pw:
        ow -= 1
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"{name}: output size is too small for input of shape {tuple(x.shape)} "
                           f"(kernel {kh}x{kw}, stride {sh}x{sw}, padding {ph}x{pw})")
    # Extra right/bottom padding so the last (ceil_mode) window is fully addressable.
    eh = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - (h + 2 * ph))
    ew = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - (w + 2 * pw))
    return kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, eh, ew


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """2-D max pooling over ``(N, C, H, W)`` or ``(C, H, W)``, as
    ``torch.nn.functional.max_pool2d``.

    Args:
        input: the input tensor.
        kernel_size: the window, an int or ``(kh, kw)``.
        stride: the step, an int or a pair; None: ``kernel_size``.
        padding: implicit ``-inf`` padding on each side (at most half the window).
        dilation: the spacing of the window's elements.
        ceil_mode: round the output size up instead of down.
        return_indices: also return the flat ``H * W`` index of each maximum.

    Returns:
        Tensor: the pooled tensor, or ``(output, indices)`` with ``return_indices``. The
        gradient goes to the first maximum of each window.

    Raises:
        RuntimeError: a bad input rank or window geometry (the message names the sizes).

    Example:
        >>> import tensorbrain as tb
        >>> tb.nn.functional.max_pool2d(tb.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[5.0, 7.0], [13.0, 15.0]]]]
    """
    x = input._data
    x, unbatched = _as_4d("max_pool2d", x)
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, eh, ew = _pool_geometry(
        "max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    xp = get_array_module(x)
    n, c, h, w = x.shape
    C = _pool_native(x)
    if C is not None:
        return _max_pool2d_native(C, input, x, unbatched, return_indices,
                                  (kh, kw, sh, sw, ph, pw, dh, dw, oh, ow))
    fill = -math.inf if x.dtype.kind in "fV" else xp.iinfo(x.dtype).min   # V: bfloat16
    xpad = _pad4(xp, x, ph, ph + eh, pw, pw + ew, fill)
    # Running max over the KH*KW strided slices: no window copy. np.maximum propagates NaN as
    # PyTorch does. Which position won is not tracked here (copyto(where=) costs 15x a compare);
    # backward and return_indices recover it as the first position equal to the max.
    slices = [_slice(p // kw, p % kw, sh, sw, dh, dw, oh, ow) for p in range(kh * kw)]
    best = xpad[slices[0]].copy()
    for sl in slices[1:]:
        xp.maximum(best, xpad[sl], out=best)
    out = best[0] if unbatched else best
    nan_path = x.dtype.kind in "fV" and bool(xp.isnan(best).any())
    if input.requires_grad or return_indices:
        best = best.copy()   # the caller may change the output in place; backward needs the max

    def winner():
        """Per output, the first kernel position holding the max (PyTorch's tie rule): written
        in reverse so the earliest position is the last to write, 2 passes per position."""
        arg = xp.zeros(best.shape, dtype=xp.int8 if kh * kw < 128 else xp.int64)
        for p in range(kh * kw - 1, -1, -1):
            s = xpad[slices[p]]
            hit = s == best
            if nan_path:
                hit |= xp.isnan(s) & xp.isnan(best)
            arg = xp.where(hit, arg.dtype.type(p), arg)
        return arg

    # Windows that tile the input exactly (stride == kernel, no padding or dilation) can assign
    # their gradient slices instead of accumulating them into a zeroed buffer.
    tiles = (sh, sw) == (kh, kw) and (dh, dw) == (1, 1) and not (ph or pw or eh or ew) \
        and h == oh * kh and w == ow * kw

    def backward(g):
        if unbatched:
            g = g[None]
        g = xp.ascontiguousarray(g)   # a stride-0 g from sum() makes every where() slower
        if tiles and not nan_path:
            gx = _tiled_max_grad(xp, x, best, g, kh, kw)
            return (gx[0] if unbatched else gx,)
        arg = winner()
        gxp = (xp.empty if tiles else xp.zeros)(xpad.shape, dtype=g.dtype)
        zero = xp.zeros((), dtype=g.dtype)
        for p, sl in enumerate(slices):
            if tiles:
                gxp[sl] = xp.where(arg == p, g, zero)
            else:
                gxp[sl] += xp.where(arg == p, g, zero)
        gx = gxp[:, :, ph:ph + h, pw:pw + w]
        return (gx[0] if unbatched else gx,)
    res = make(out, (input,), backward, "MaxPool2DWithIndicesBackward")
    if not return_indices:
        return res
    arg = winner().astype(xp.int64)
    ki, kj = arg // kw, arg % kw
    rows = xp.arange(oh).reshape(oh, 1) * sh + ki * dh - ph
    colsi = xp.arange(ow) * sw + kj * dw - pw
    idx = rows * w + colsi
    return res, Tensor._wrap(idx[0] if unbatched else idx)


def _pool_native(x):
    """The C++ module for max pooling ``x``, or None for the NumPy/CuPy twin: float32/float64
    C-contiguous NumPy arrays only (csrc/kernels/pool.cpp)."""
    if type(x) is not np.ndarray or x.dtype not in _NATIVE_POOL or not x.flags.c_contiguous:
        return None
    return _native.loaded()


_NATIVE_POOL = (np.dtype(np.float32), np.dtype(np.float64))


def _max_pool2d_native(C, input, x, unbatched, return_indices, geometry):
    """``max_pool2d`` in one native pass: the max and the winner of every window (the first
    position holding it, as the twin below and PyTorch pick); backward adds each output
    gradient at its winner."""
    n, c, h, w = x.shape
    out, arg = C.max_pool2d_forward(x, *geometry)

    def backward(g):
        g = np.ascontiguousarray(g[None] if unbatched else g, dtype=x.dtype)
        gx = C.max_pool2d_backward(g, arg, h, w)
        return (gx[0] if unbatched else gx,)
    res = make(out[0] if unbatched else out, (input,), backward, "MaxPool2DWithIndicesBackward")
    if not return_indices:
        return res
    idx = arg.astype(np.int64)
    return res, Tensor._wrap(idx[0] if unbatched else idx)


def _tiled_max_grad(xp, x, best, g, kh, kw):
    """Max-pool gradient for windows that tile the input (stride == kernel, no padding).

    Works on the input's own layout, ``(N, C, OH, KH, W)`` with the max and the gradient
    repeated KW times along W, so every pass is over rows of W contiguous values (a 6-D view with
    a KW-long inner axis was 25% slower). Ties go to the first kernel position, as in PyTorch:
    a hit is dropped where an earlier position of the same window already hit.
    """
    n, c, oh, ow = best.shape
    w = ow * kw
    hit = x.reshape(n, c, oh, kh, w) == xp.repeat(best, kw, axis=-1)[:, :, :, None, :]
    taken = None
    for i in range(kh):
        for j in range(kw):
            h = hit[:, :, :, i, j::kw]          # a view: the updates land in hit
            if taken is None:
                taken = h.copy()
                continue
            h &= ~taken
            taken |= h
    zero = xp.zeros((), dtype=g.dtype)
    return xp.where(hit, xp.repeat(g, kw, axis=-1)[:, :, :, None, :], zero).reshape(x.shape)


def _avg_divisor(xp, size, k, s, p, o, count_include_pad):
    start = xp.arange(o) * s - p
    end = xp.minimum(start + k, size + p)
    if count_include_pad:
        return (end - start).astype("float64")
    return (xp.minimum(end, size) - xp.maximum(start, 0)).astype("float64")


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """2-D average pooling over ``(N, C, H, W)`` or ``(C, H, W)``, as
    ``torch.nn.functional.avg_pool2d``.

    Args:
        input: the input tensor.
        kernel_size: the window, an int or ``(kh, kw)``.
        stride: the step, an int or a pair; None: ``kernel_size``.
        padding: implicit zero padding on each side (at most half the window).
        ceil_mode: round the output size up instead of down.
        count_include_pad: count the padding zeros in the divisor.
        divisor_override: divide by this instead of the window size.

    Returns:
        Tensor: the pooled tensor.

    Raises:
        RuntimeError: a bad input rank or window geometry (the message names the sizes).

    Example:
        >>> import tensorbrain as tb
        >>> tb.nn.functional.avg_pool2d(tb.arange(16.0).reshape(1, 1, 4, 4), 2).tolist()
        [[[[2.5, 4.5], [10.5, 12.5]]]]
    """
    x = input._data
    x, unbatched = _as_4d("avg_pool2d", x)
    kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, eh, ew = _pool_geometry(
        "avg_pool2d", x, kernel_size, stride, padding, 1, ceil_mode)
    xp = get_array_module(x)
    n, c, h, w = x.shape
    xpad = _pad4(xp, x, ph, ph + eh, pw, pw + ew)
    if divisor_override:
        div = xp.asarray(float(divisor_override))
    else:
        div = (_avg_divisor(xp, h, kh, sh, ph, oh, count_include_pad)[:, None]
               * _avg_divisor(xp, w, kw, sw, pw, ow, count_include_pad)[None, :])
    scale = (1.0 / div).astype(x.dtype)
    acc = xp.zeros((n, c, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            acc += xpad[_slice(i, j, sh, sw, 1, 1, oh, ow)]
    acc *= scale
    out = acc[0] if unbatched else acc

    def backward(g):
        if unbatched:
            g = g[None]
        gs = g * scale
        gxp = xp.zeros(xpad.shape, dtype=g.dtype)
        for i in range(kh):
            for j in range(kw):
                gxp[_slice(i, j, sh, sw, 1, 1, oh, ow)] += gs
        gx = gxp[:, :, ph:ph + h, pw:pw + w]
        return (gx[0] if unbatched else gx,)
    return make(out, (input,), backward, "AvgPool2DBackward")


def _adaptive_matrix(xp, size, out, dtype):
    """(out, size) averaging matrix; row i averages input [floor(i*size/out), ceil((i+1)*size/out))."""
    m = xp.zeros((out, size), dtype=dtype)
    for i in range(out):           # loop over output rows (a handful), not pixels
        a, b = (i * size) // out, -(-((i + 1) * size) // out)
        m[i, a:b] = 1.0 / (b - a)
    return m


def adaptive_avg_pool2d(input, output_size):
    """2-D average pooling to a fixed output size, as
    ``torch.nn.functional.adaptive_avg_pool2d`` (torch's window bounds: floor and ceil).

    Args:
        input: a ``(N, C, H, W)`` or ``(C, H, W)`` tensor.
        output_size: ``(oh, ow)`` or an int for both; a None entry keeps that input size.

    Returns:
        Tensor: the pooled tensor, ``(..., oh, ow)``.

    Raises:
        RuntimeError: the input is not 3-D or 4-D.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nn.functional.adaptive_avg_pool2d(tb.ones(1, 3, 7, 5), 1).shape
        tb.Size([1, 3, 1, 1])
    """
    x = input._data
    if x.ndim not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d: expected a 3-D or 4-D input, got shape {tuple(x.shape)}")
    h, w = x.shape[-2:]
    oh, ow = _pair(output_size, "output_size") if not isinstance(output_size, (tuple, list)) or \
        None not in output_size else tuple(s if o is None else o for s, o in zip((h, w), output_size))
    xp = get_array_module(x)
    # Separable: out = A_h @ x @ A_w^T with averaging matrices, two small GEMMs.
    ah = _adaptive_matrix(xp, h, oh, x.dtype)
    aw = _adaptive_matrix(xp, w, ow, x.dtype)
    out = matmul(ah, matmul(x, aw.T))
    return make(out, (input,), lambda g: (matmul(ah.T, matmul(g, aw)),), "AdaptiveAvgPool2DBackward")
