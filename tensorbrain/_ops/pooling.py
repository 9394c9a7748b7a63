"""Pooling that the 2-D ops (``conv.py``) lack, each as torch's ``nn.functional`` one: 1-D and
3-D pooling (``avg_pool1d``/``3d``, ``max_pool1d``/``3d``) and the adaptive pools
(``adaptive_avg_pool1d``/``3d``, ``adaptive_max_pool1d``/``2d``/``3d``).

The 1-D pools run the 2-D ones on a height of 1; the 3-D pools use ``convnd``'s strided window
view and its ``col2im`` for the gradient; the adaptive ones are written from other ops, so their
gradients come with them.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .._xp import get_array_module
from . import conv as CV
from . import windows as W
from . import reduce as R
from . import shape as S
from .core import make


def _single(v):
    return v[0] if isinstance(v, (tuple, list)) else v


# ***** pooling *****
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """Average pooling over ``(N, C, L)`` or ``(C, L)``, as ``F.avg_pool1d``.

    Args:
        input: the input.
        kernel_size: the window length.
        stride: the step (default ``kernel_size``).
        padding: zeros added at both ends.
        ceil_mode: round the output length up.
        count_include_pad: count the padding in the divisor.

    Returns:
        Tensor: the pooled tensor.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.avg_pool1d(tb.tensor([[[1.0, 3.0, 5.0, 7.0]]]), 2).tolist()
        [[[2.0, 6.0]]]
    """
    k = _single(kernel_size)
    s = _single(stride) if stride not in (None, ()) else k
    out = CV.avg_pool2d(S.unsqueeze(input, -2), (1, k), (1, s), (0, _single(padding)),
                        ceil_mode, count_include_pad)
    return S.squeeze(out, -2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling over ``(N, C, L)`` or ``(C, L)``, as ``F.max_pool1d``.

    Args:
        input: the input.
        kernel_size: the window length.
        stride: the step (default ``kernel_size``).
        padding: implicit -inf at both ends.
        dilation: the spacing of a window's elements.
        ceil_mode: round the output length up.
        return_indices: also return the positions of the maxima.

    Returns:
        Tensor, or (Tensor, Tensor) with ``return_indices``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.max_pool1d(tb.tensor([[[1.0, 3.0, 5.0, 2.0]]]), 2).tolist()
        [[[3.0, 5.0]]]
    """
    k = _single(kernel_size)
    s = _single(stride) if stride not in (None, ()) else k
    out = CV.max_pool2d(S.unsqueeze(input, -2), (1, k), (1, s), (0, _single(padding)),
                        (1, _single(dilation)), ceil_mode, return_indices)
    if return_indices:
        return S.squeeze(out[0], -2), S.squeeze(out[1], -2)
    return S.squeeze(out, -2)


def _pool3d(name, input, kernel_size, stride, padding, ceil_mode, kind, count_include_pad=True,
            dilation=1):
    x = input._data
    xp = get_array_module(x)
    unbatched = x.ndim == 4
    if unbatched:
        x = x[None]
    if x.ndim != 5:
        raise RuntimeError(f"{name}: expected a 4-D or 5-D input, got shape {tuple(x.shape)}")
    ks = W.ntuple(kernel_size, 3, "kernel_size")
    ss = W.ntuple(stride if stride not in (None, ()) else ks, 3, "stride")
    ps = W.ntuple(padding, 3, "padding")
    ds = W.ntuple(dilation, 3, "dilation")
    outs = []
    for size, k, s, p, d in zip(x.shape[2:], ks, ss, ps, ds):
        span = size + 2 * p - d * (k - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + p:
            o -= 1
        outs.append(o)
    hi = tuple(max(p, (o - 1) * s + d * (k - 1) + 1 - size - p)
               for size, k, s, p, d, o in zip(x.shape[2:], ks, ss, ps, ds, outs))
    fill = -np.inf if kind == "max" else 0.0
    padded = xp.full(x.shape[:2] + tuple(n + p + h for n, p, h in zip(x.shape[2:], ps, hi)),
                     fill, dtype=x.dtype)
    padded[(slice(None), slice(None)) + tuple(slice(p, p + n) for p, n in zip(ps, x.shape[2:]))] = x
    win = W._windows(xp, padded, ks, ss, ds, outs)            # (N, C, *K, *O)
    flat = win.reshape(win.shape[:2] + (-1,) + tuple(outs))    # (N, C, K, *O)
    if kind == "max":
        arg = flat.argmax(axis=2)
        out = xp.take_along_axis(flat, arg[:, :, None], axis=2)[:, :, 0]
    else:
        if count_include_pad:
            ones = xp.zeros(padded.shape[2:], dtype=x.dtype)
            ones[tuple(slice(0, n + 2 * p) for n, p in zip(x.shape[2:], ps))] = 1
        else:
            ones = xp.zeros(padded.shape[2:], dtype=x.dtype)
            ones[tuple(slice(p, p + n) for p, n in zip(ps, x.shape[2:]))] = 1
        counts = W._windows(xp, ones[None, None], ks, ss, ds, outs).reshape(
            (1, 1, -1) + tuple(outs)).sum(axis=2)
        out = flat.sum(axis=2) / counts

    def backward(g):
        if kind == "max":
            cols = xp.zeros(flat.shape, dtype=g.dtype)
            xp.put_along_axis(cols, arg[:, :, None], g[:, :, None], axis=2)
        else:
            cols = xp.broadcast_to((g / counts)[:, :, None], flat.shape)
        img = W._col2im(xp, xp.ascontiguousarray(cols).reshape(win.shape), padded.shape, ks,
                         ss, ds, outs)
        gx = img[(slice(None), slice(None)) + tuple(slice(p, p + n)
                                                    for p, n in zip(ps, x.shape[2:]))]
        return (gx[0] if unbatched else gx,)
    return make(out[0] if unbatched else out, (input,), backward, name + "Backward")


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling over ``(N, C, D, H, W)``, as ``F.max_pool3d``.

    Args:
        input: 4-D or 5-D.
        kernel_size: an int or three.
        stride: the step (default ``kernel_size``).
        padding: implicit -inf on each side.
        dilation: the spacing of a window's elements.
        ceil_mode: round the output up.
        return_indices: not supported (NotImplementedError).

    Returns:
        Tensor: the pooled tensor.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.max_pool3d(tb.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten().tolist()
        [7.0]
    """
    if return_indices:
        raise NotImplementedError("max_pool3d(return_indices=True) is not supported by "
                                  "TensorBrain")
    return _pool3d("MaxPool3d", input, kernel_size, stride, padding, ceil_mode, "max",
                   dilation=dilation)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """Average pooling over ``(N, C, D, H, W)``, as ``F.avg_pool3d``.

    Args:
        input: 4-D or 5-D.
        kernel_size: an int or three.
        stride: the step (default ``kernel_size``).
        padding: zeros on each side.
        ceil_mode: round the output up.
        count_include_pad: count the padding in the divisor.
        divisor_override: not supported (NotImplementedError).

    Returns:
        Tensor: the pooled tensor.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.avg_pool3d(tb.arange(8.0).reshape(1, 1, 2, 2, 2), 2).flatten().tolist()
        [3.5]
    """
    if divisor_override is not None:
        raise NotImplementedError("avg_pool3d(divisor_override=...) is not supported by "
                                  "TensorBrain")
    return _pool3d("AvgPool3d", input, kernel_size, stride, padding, ceil_mode, "avg",
                   count_include_pad)


def _adaptive_bounds(size, out):
    return [(math.floor(i * size / out), math.ceil((i + 1) * size / out)) for i in range(out)]


def adaptive_avg_pool1d(input, output_size):
    """Average pooling to ``output_size`` positions, as ``F.adaptive_avg_pool1d``.

    Args:
        input: ``(N, C, L)`` or ``(C, L)``.
        output_size: the output length.

    Returns:
        Tensor: ``(..., output_size)``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.adaptive_avg_pool1d(tb.tensor([[1.0, 2.0, 3.0, 4.0]]), 2).tolist()
        [[1.5, 3.5]]
    """
    out = CV.adaptive_avg_pool2d(S.unsqueeze(input, -2), (1, _single(output_size)))
    return S.squeeze(out, -2)


def adaptive_avg_pool3d(input, output_size):
    """Average pooling to ``output_size`` (three sizes), as ``F.adaptive_avg_pool3d``.

    Args:
        input: ``(N, C, D, H, W)`` or ``(C, D, H, W)``.
        output_size: an int or three (None keeps a size).

    Returns:
        Tensor: the pooled tensor.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.adaptive_avg_pool3d(tb.ones(1, 1, 2, 2, 2), 1).shape
        tb.Size([1, 1, 1, 1, 1])
    """
    return _adaptive_nd(input, output_size, 3, R.mean)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """Max pooling to ``output_size`` positions, as ``F.adaptive_max_pool1d``.

    Args:
        input: ``(N, C, L)`` or ``(C, L)``.
        output_size: the output length.
        return_indices: not supported (NotImplementedError).

    Returns:
        Tensor: ``(..., output_size)``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.adaptive_max_pool1d(tb.tensor([[1.0, 5.0, 3.0, 4.0]]), 2).tolist()
        [[5.0, 4.0]]
    """
    _no_indices("adaptive_max_pool1d", return_indices)
    return _adaptive_nd(input, _single(output_size), 1, R.amax)


def _no_indices(name, flag):
    if flag:
        raise NotImplementedError(f"{name}(return_indices=True) is not supported by TensorBrain")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """Max pooling to ``output_size`` (two sizes), as ``F.adaptive_max_pool2d``.

    Args:
        input: ``(N, C, H, W)`` or ``(C, H, W)``.
        output_size: an int or two (None keeps a size).
        return_indices: not supported (NotImplementedError).

    Returns:
        Tensor: the pooled tensor; the gradient goes to the maxima.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.adaptive_max_pool2d(tb.arange(16.0).reshape(1, 4, 4), 2).tolist()
        [[[5.0, 7.0], [13.0, 15.0]]]
    """
    _no_indices("adaptive_max_pool2d", return_indices)
    return _adaptive_nd(input, output_size, 2, R.amax)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    """Max pooling to ``output_size`` (three sizes), as ``F.adaptive_max_pool3d``.

    Args:
        input: ``(N, C, D, H, W)`` or ``(C, D, H, W)``.
        output_size: an int or three.
        return_indices: not supported (NotImplementedError).

    Returns:
        Tensor: the pooled tensor.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.adaptive_max_pool3d(tb.arange(8.0).reshape(1, 2, 2, 2), 1).flatten().tolist()
        [7.0]
    """
    _no_indices("adaptive_max_pool3d", return_indices)
    return _adaptive_nd(input, output_size, 3, R.amax)


def _adaptive_nd(input, output_size, nd, reduce):
    """Each output cell reduces its window (torch's floor/ceil bounds), cells stacked back."""
    spatial = input.shape[-nd:]
    sizes = (output_size,) * nd if isinstance(output_size, int) else tuple(output_size)
    outs = [spatial[i] if o is None else o for i, o in enumerate(sizes)]
    bounds = [_adaptive_bounds(n, o) for n, o in zip(spatial, outs)]
    dims = tuple(range(-nd, 0))
    cells = []
    for cell in itertools.product(*bounds):
        window = S.getitem(input, (Ellipsis,) + tuple(slice(a, b) for a, b in cell))
        cells.append(reduce(window, dims))
    stacked = S.stack(cells, -1)
    return S.reshape(stacked, *stacked.shape[:-1], *outs)
