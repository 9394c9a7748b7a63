"""``interpolate`` (nearest, nearest-exact, linear/bilinear/trilinear, bicubic, area), pixel shuffles.

Every mode is separable: along each spatial axis the output is a fixed ``(out, in)`` matrix times
the input (one-hot rows for nearest, two weights per row for linear, four for bicubic, a box
average for area), so one op applies the matrices axis by axis with ``matmul`` and its backward
applies their transposes. Nearest with integer scale factors skips the matrices: a broadcast copy forward, a
reshape-and-sum backward. Index rules are PyTorch's (``aten/src/ATen/native/UpSample.h``):
``src = min(floor(dst * scale), in - 1)`` for nearest, ``src = scale * (dst + 0.5) - 0.5``
clamped at 0 for linear (``dst * (in - 1) / (out - 1)`` with ``align_corners``), where
``scale = 1 / scale_factor`` when a scale factor was given, else ``in / out``.
"""
from __future__ import annotations

import math

import numpy as np

from .._xp import get_array_module, matmul
from . import shape as _S
from .core import make

_LINEAR = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")


def _axis_matrix(mode, n_in, n_out, scale, align_corners):
    """The ``(n_out, n_in)`` float64 matrix of one axis (built in NumPy: it is tiny)."""
    m = np.zeros((n_out, n_in))
    dst = np.arange(n_out)
    rows = np.arange(n_out)
    if mode in ("nearest", "nearest-exact"):
        s = np.float32(n_in / n_out if scale is None else 1.0 / scale)
        off = np.float32(0.5 if mode == "nearest-exact" else 0.0)
        src = np.minimum(np.floor((dst.astype(np.float32) + off) * s).astype(np.int64), n_in - 1)
        m[rows, src] = 1.0
    elif mode == "bicubic":
        # torch's cubic convolution (A = -0.75), 4 taps at floor(src) - 1 .. + 2 clamped to the
        # input; src is not clamped at 0 for cubic (area_pixel_compute_source_index).
        if align_corners:
            src = dst * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
        else:
            s = n_in / n_out if scale is None else 1.0 / scale
            src = s * (dst + 0.5) - 0.5
        i0 = np.floor(src).astype(np.int64)
        t = src - i0
        a = -0.75
        near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1             # noqa: E731
        far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a          # noqa: E731
        for k, c in enumerate((far(t + 1), near(t), near(1 - t), far(2 - t))):
            np.add.at(m, (rows, np.clip(i0 - 1 + k, 0, n_in - 1)), c)
    elif mode == "area":
        for i in range(n_out):            # a loop over output rows (a handful), not pixels
            a, b = (i * n_in) // n_out, -(-((i + 1) * n_in) // n_out)
            m[i, a:b] = 1.0 / (b - a)
    else:
        if align_corners:
            s = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
            src = dst * s
        else:
            s = n_in / n_out if scale is None else 1.0 / scale
            src = np.maximum(s * (dst + 0.5) - 0.5, 0.0)
        i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        l1 = src - i0
        np.add.at(m, (rows, i0), 1.0 - l1)
        np.add.at(m, (rows, i1), l1)
    return m


def _apply(xp, x, mats, transpose=False):
    """Apply ``mats[k]`` along spatial axis k of ``x`` (N, C, *S) (their transposes with
    ``transpose``, for the gradient)."""
    nd = len(mats)
    for k, m in enumerate(mats):
        if m is None:
            continue
        if transpose:
            m = m.T
        j = nd - k   # position from the end
        if j == 1:
            x = matmul(x, m.T)
        else:
            shp = x.shape
            rest = math.prod(shp[len(shp) - j + 1:])
            x = matmul(m, x.reshape(shp[:len(shp) - j] + (shp[-j], rest))).reshape(
                shp[:len(shp) - j] + (m.shape[0],) + shp[len(shp) - j + 1:])
    return x


def _sizes(name, x, size, scale_factor, recompute_scale_factor):
    nd = x.ndim - 2
    if nd < 1:
        raise ValueError(f"{name}: expected an input with a batch and a channel dim and 1 to 3 "
                         f"spatial dims, got shape {tuple(x.shape)}")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{name}: give exactly one of size and scale_factor")
    if size is not None:
        out = (size,) * nd if isinstance(size, int) else tuple(int(s) for s in size)
        if len(out) != nd:
            raise ValueError(f"{name}: size {tuple(out)} must have {nd} elements for input of "
                             f"shape {tuple(x.shape)}")
        return out, (None,) * nd
    sf = (float(scale_factor),) * nd if isinstance(scale_factor, (int, float)) else \
        tuple(float(s) for s in scale_factor)
    if len(sf) != nd:
        raise ValueError(f"{name}: scale_factor {sf} must have {nd} elements for input of "
                         f"shape {tuple(x.shape)}")
    out = tuple(int(math.floor(s * f)) for s, f in zip(x.shape[2:], sf, strict=True))
    return out, ((None,) * nd if recompute_scale_factor else sf)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize ``(N, C, *S)`` to ``size`` or by ``scale_factor`` (PyTorch's ``F.interpolate``).

    Args:
        input: ``(N, C, *spatial)`` with 1 to 3 spatial dims.
        size: the output's spatial size (an int or one per dim); or
        scale_factor: a float or one per dim (output size ``floor(in * scale_factor)``).
        mode: ``nearest``, ``nearest-exact``, ``linear`` (3-D input), ``bilinear`` or
            ``bicubic`` (4-D), ``trilinear`` (5-D) or ``area``.
        align_corners: linear modes only: map the corner pixels' centres onto each other.
        recompute_scale_factor: compute the index scale from the sizes instead of using
            ``1 / scale_factor``.
        antialias: must be False.

    Returns:
        ``(N, C, *size)``.

    Raises:
        ValueError: both or neither of size/scale_factor, sizes of the wrong length, a mode
            that needs another rank, ``align_corners`` with a non-linear mode.
        NotImplementedError: other modes, ``antialias=True``.

    >>> import tensorbrain as tb
    >>> x = tb.arange(4.0).reshape(1, 1, 2, 2)
    >>> tb.nn.functional.interpolate(x, scale_factor=2).shape
    tb.Size([1, 1, 4, 4])
    >>> tb.nn.functional.interpolate(x, size=3, mode="bilinear", align_corners=True)[0, 0, 1].tolist()
    [1.0, 1.5, 2.0]
    """
    x = input._data
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported (supported: "
                                  f"{', '.join(_MODES)})")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported")
    nd = x.ndim - 2
    if mode in _LINEAR and _LINEAR[mode] != nd:
        raise ValueError(f"interpolate: mode {mode!r} needs a {_LINEAR[mode] + 2}-D input, got "
                         f"shape {tuple(x.shape)}")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    outs, scales = _sizes("interpolate", x, size, scale_factor, recompute_scale_factor)
    if any(o <= 0 for o in outs):
        raise ValueError(f"interpolate: output size {outs} must be positive (input shape "
                         f"{tuple(x.shape)})")
    xp = get_array_module(x)
    ins = x.shape[2:]
    reps = [o // i if o % i == 0 else 0 for i, o in zip(ins, outs, strict=True)]
    if mode == "nearest" and all(reps) and all(
            s is None or s == r for s, r in zip(scales, reps, strict=True)):
        return _nearest_repeat(input, reps)
    mats = [None if i == o and s in (None, 1.0)       # identity along this axis
            else xp.asarray(_axis_matrix(mode, i, o, s, bool(align_corners)), dtype=x.dtype)
            for i, o, s in zip(ins, outs, scales, strict=True)]
    out = xp.ascontiguousarray(_apply(xp, x, mats))
    return make(out, (input,), lambda g: (_apply(xp, g, mats, transpose=True),),
                "UpsampleBackward")


def _nearest_repeat(input, reps):
    """Nearest upsampling by integer factors: a broadcast copy; backward sums the blocks."""
    x = input._data
    xp = get_array_module(x)
    n, c = x.shape[:2]
    ins = x.shape[2:]
    nd = len(ins)
    expanded = (n, c) + tuple(v for i, r in zip(ins, reps, strict=True) for v in (i, r))
    view = x.reshape((n, c) + tuple(v for i in ins for v in (i, 1)))
    out = xp.ascontiguousarray(xp.broadcast_to(view, expanded)).reshape(
        (n, c) + tuple(i * r for i, r in zip(ins, reps, strict=True)))

    def backward(g):
        g = xp.ascontiguousarray(g).reshape(expanded)
        return (g.sum(axis=tuple(3 + 2 * k for k in range(nd))),)
    return make(out, (input,), backward, "UpsampleNearestBackward")


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """Deprecated alias of :func:`interpolate` (as in PyTorch)."""
    return interpolate(input, size, scale_factor, mode, align_corners)


# ***** pixel shuffle *****
def pixel_shuffle(input, upscale_factor):
    """``(*, C * r^2, H, W) -> (*, C, H * r, W * r)`` (sub-pixel convolution, Shi et al.).

    Args:
        input: at least 3-D, channel dim (-3) divisible by ``upscale_factor ** 2``.
        upscale_factor: ``r``.

    Returns:
        The rearranged tensor (a view-based op: reshape, permute, reshape).

    Raises:
        RuntimeError: a rank below 3 or channels not divisible by ``r ** 2``.

    >>> import tensorbrain as tb
    >>> tb.nn.functional.pixel_shuffle(tb.ones(1, 8, 3, 3), 2).shape
    tb.Size([1, 2, 6, 6])
    """
    r = int(upscale_factor)
    shp = tuple(input.shape)
    if len(shp) < 3 or r <= 0 or shp[-3] % (r * r):
        raise RuntimeError(f"pixel_shuffle: expected an input of at least 3 dims whose channel "
                           f"dim (-3) is divisible by upscale_factor**2 = {r * r}, got shape {shp}")
    lead, (c, h, w) = shp[:-3], shp[-3:]
    k = len(lead)
    t = _S.reshape(input, lead + (c // (r * r), r, r, h, w))
    t = _S.permute(t, *range(k), k, k + 3, k + 1, k + 4, k + 2)
    return _S.reshape(t, lead + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """``(*, C, H * r, W * r) -> (*, C * r^2, H, W)``, the inverse of :func:`pixel_shuffle`.

    Args:
        input: at least 3-D, height and width divisible by ``downscale_factor``.
        downscale_factor: ``r``.

    Returns:
        The rearranged tensor.

    Raises:
        RuntimeError: a rank below 3 or sizes not divisible by ``r``.

    >>> import tensorbrain as tb
    >>> tb.nn.functional.pixel_unshuffle(tb.ones(1, 2, 6, 6), 2).shape
    tb.Size([1, 8, 3, 3])
    """
    r = int(downscale_factor)
    shp = tuple(input.shape)
    if len(shp) < 3 or r <= 0 or shp[-2] % r or shp[-1] % r:
        raise RuntimeError(f"pixel_unshuffle: expected an input of at least 3 dims whose height "
                           f"and width are divisible by downscale_factor = {r}, got shape {shp}")
    lead, (c, h, w) = shp[:-3], shp[-3:]
    k = len(lead)
    t = _S.reshape(input, lead + (c, h // r, r, w // r, r))
    t = _S.permute(t, *range(k), k, k + 2, k + 4, k + 1, k + 3)
    return _S.reshape(t, lead + (c * r * r, h // r, w // r))
