"""``nn.functional`` ops real programs use that the other op modules lack, each as torch's:
1-D and 3-D pooling (``avg_pool1d``/``3d``, ``max_pool1d``/``3d``, the adaptive pools),
``instance_norm``, ``unfold``/``fold`` (im2col and its adjoint), ``grid_sample``,
``affine_grid``, ``gumbel_softmax``, ``glu``, ``selu``, ``celu``, ``softsign``,
``softshrink``, ``tanhshrink``, ``threshold``, ``local_response_norm``,
``gaussian_nll_loss``, ``poisson_nll_loss``.

The 1-D pools run the 2-D ones on a height of 1; the 3-D pools use ``convnd``'s strided window
view and its ``col2im`` for the gradient; the rest are written from other ops, so their
gradients come with them.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from . import combine as CB
from . import conv as CV
from . import convnd as ND
from . import elementwise as E
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
    ks = ND.ntuple(kernel_size, 3, "kernel_size")
    ss = ND.ntuple(stride if stride not in (None, ()) else ks, 3, "stride")
    ps = ND.ntuple(padding, 3, "padding")
    ds = ND.ntuple(dilation, 3, "dilation")
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
    win = ND._windows(xp, padded, ks, ss, ds, outs)            # (N, C, *K, *O)
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
        counts = ND._windows(xp, ones[None, None], ks, ss, ds, outs).reshape(
            (1, 1, -1) + tuple(outs)).sum(axis=2)
        out = flat.sum(axis=2) / counts

    def backward(g):
        if kind == "max":
            cols = xp.zeros(flat.shape, dtype=g.dtype)
            xp.put_along_axis(cols, arg[:, :, None], g[:, :, None], axis=2)
        else:
            cols = xp.broadcast_to((g / counts)[:, :, None], flat.shape)
        img = ND._col2im(xp, xp.ascontiguousarray(cols).reshape(win.shape), padded.shape, ks,
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



# ***** normalisation *****
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each channel of each sample over its spatial positions, as
    ``F.instance_norm``; with running statistics, they are updated in training (the batch's
    mean of the instances' means and unbiased variances) and used when ``use_input_stats`` is
    False.

    Args:
        input: ``(N, C, ...)``.
        running_mean: ``(C,)`` or None.
        running_var: ``(C,)`` or None.
        weight: the per-channel scale, or None.
        bias: the per-channel shift, or None.
        use_input_stats: normalise with the instance's own statistics.
        momentum: the running statistics' update factor.
        eps: added to the variance.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> [round(v, 4) for v in F.instance_norm(tb.tensor([[[1.0, 3.0]]])).flatten().tolist()]
        [-1.0, 1.0]
    """
    from .norm import group_norm
    x = input._data
    c = x.shape[1]
    if use_input_stats:
        if running_mean is not None or running_var is not None:
            xp = get_array_module(x)
            axes = tuple(range(2, x.ndim))
            n = int(np.prod(x.shape[2:]))
            mean = x.mean(axis=axes).mean(axis=0)
            var = (x.var(axis=axes) * (n / max(n - 1, 1))).mean(axis=0)
            if running_mean is not None:
                running_mean._data *= 1 - momentum
                running_mean._data += momentum * mean.astype(running_mean._data.dtype)
            if running_var is not None:
                running_var._data *= 1 - momentum
                running_var._data += momentum * var.astype(running_var._data.dtype)
            del xp
        return group_norm(input, c, weight, bias, eps)
    shape = (1, c) + (1,) * (x.ndim - 2)
    out = E.div(E.sub(input, S.reshape(running_mean, *shape)),
                E.sqrt(E.add(S.reshape(running_var, *shape), eps)))
    if weight is not None:
        out = E.mul(out, S.reshape(weight, *shape))
    if bias is not None:
        out = E.add(out, S.reshape(bias, *shape))
    return out


# ***** im2col *****
def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of ``(N, C, H, W)`` as columns ``(N, C * kh * kw, L)`` (im2col), as
    ``F.unfold``.

    Args:
        input: 4-D (or 3-D, unbatched).
        kernel_size: the block size.
        dilation: the spacing inside a block.
        padding: zeros on each side.
        stride: the step between blocks.

    Returns:
        Tensor: the columns; the gradient adds back into each position read.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.unfold(tb.arange(4.0).reshape(1, 1, 2, 2), 2).tolist()
        [[[0.0], [1.0], [2.0], [3.0]]]
    """
    x = input._data
    xp = get_array_module(x)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    ks = ND.ntuple(kernel_size, 2, "kernel_size")
    ds = ND.ntuple(dilation, 2, "dilation")
    ps = ND.ntuple(padding, 2, "padding")
    ss = ND.ntuple(stride, 2, "stride")
    padded = ND._pad(xp, x, ps, ps)
    outs = tuple(ND._out_size(n, k, s, d, 2 * p) for n, k, s, d, p in
                 zip(x.shape[2:], ks, ss, ds, ps))
    cols = ND._im2col(xp, padded, ks, ss, ds, outs, False)     # (N, C*kh*kw, L)

    def backward(g):
        g6 = g.reshape(x.shape[:2] + ks + outs)
        img = ND._col2im(xp, g6, padded.shape, ks, ss, ds, outs)
        gx = img[:, :, ps[0]:ps[0] + x.shape[2], ps[1]:ps[1] + x.shape[3]]
        return (gx[0] if unbatched else gx,)
    return make(cols[0] if unbatched else cols, (input,), backward, "Im2ColBackward")


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Columns ``(N, C * kh * kw, L)`` summed back into an image ``(N, C, *output_size)``
    (col2im, the adjoint of :func:`unfold`), as ``F.fold``.

    Args:
        input: 3-D (or 2-D, unbatched).
        output_size: the image's spatial size.
        kernel_size: the block size.
        dilation: the spacing inside a block.
        padding: the padding that unfold added.
        stride: the step between blocks.

    Returns:
        Tensor: the image.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.fold(tb.ones(1, 4, 1), (2, 2), 2).tolist()
        [[[[1.0, 1.0], [1.0, 1.0]]]]
    """
    x = input._data
    xp = get_array_module(x)
    unbatched = x.ndim == 2
    if unbatched:
        x = x[None]
    size = ND.ntuple(output_size, 2, "output_size")
    ks = ND.ntuple(kernel_size, 2, "kernel_size")
    ds = ND.ntuple(dilation, 2, "dilation")
    ps = ND.ntuple(padding, 2, "padding")
    ss = ND.ntuple(stride, 2, "stride")
    outs = tuple(ND._out_size(n, k, s, d, 2 * p) for n, k, s, d, p in zip(size, ks, ss, ds, ps))
    c = x.shape[1] // (ks[0] * ks[1])
    if c * ks[0] * ks[1] != x.shape[1] or outs[0] * outs[1] != x.shape[2]:
        raise RuntimeError(f"fold: input of shape {tuple(x.shape)} does not match kernel_size "
                           f"{ks} and output_size {size} ({outs[0] * outs[1]} blocks expected)")
    padded_shape = (x.shape[0], c, size[0] + 2 * ps[0], size[1] + 2 * ps[1])
    img = ND._col2im(xp, x.reshape((x.shape[0], c) + ks + outs), padded_shape, ks, ss, ds, outs)
    out = img[:, :, ps[0]:ps[0] + size[0], ps[1]:ps[1] + size[1]]

    def backward(g):
        gp = ND._pad(xp, g, ps, ps)
        cols = ND._im2col(xp, gp, ks, ss, ds, outs, False)
        return (cols[0] if unbatched else cols,)
    return make(out[0] if unbatched else out, (input,), backward, "Col2ImBackward")


# ***** sampling grids *****
def affine_grid(theta, size, align_corners=None):
    """The sampling grid of the affine maps ``theta`` ``(N, 2, 3)`` for an output of ``size``
    ``(N, C, H, W)``, as ``F.affine_grid`` (coordinates in [-1, 1]).

    Args:
        theta: ``(N, 2, 3)``.
        size: the output size, 4 numbers.
        align_corners: the corner pixels' centres are -1 and 1 (True) or their edges are
            (False, the default).

    Returns:
        Tensor: ``(N, H, W, 2)``, differentiable in ``theta``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.affine_grid(tb.tensor([[[1.0, 0, 0], [0, 1.0, 0]]]), (1, 1, 1, 2), True).tolist()
        [[[[-1.0, 0.0], [1.0, 0.0]]]]
    """
    n, _, h, w = (int(v) for v in size)
    xp = get_array_module(theta._data)

    def axis(k):
        if k == 1:
            return xp.zeros(1, dtype=theta._data.dtype)
        v = xp.linspace(-1, 1, k, dtype=theta._data.dtype)
        return v if align_corners else v * (k - 1) / k
    gx, gy = xp.meshgrid(axis(w), axis(h))
    base = xp.stack([gx, gy, xp.ones_like(gx)], -1).reshape(1, h * w, 3)
    grid = S.matmul(Tensor._wrap(xp.broadcast_to(base, (n, h * w, 3))), S.transpose(theta, 1, 2))
    return S.reshape(grid, n, h, w, 2)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """``input`` sampled at ``grid``'s normalised coordinates, as ``F.grid_sample`` (4-D):
    ``grid[n, i, j] = (x, y)`` in [-1, 1] picks ``input[n, :, y, x]``.

    Args:
        input: ``(N, C, H, W)``.
        grid: ``(N, Hout, Wout, 2)``.
        mode: ``"bilinear"`` or ``"nearest"``.
        padding_mode: ``"zeros"`` or ``"border"`` for points outside.
        align_corners: as :func:`affine_grid`.

    Returns:
        Tensor: ``(N, C, Hout, Wout)``; gradients reach ``input`` and (bilinear) ``grid``.

    Raises:
        NotImplementedError: 5-D inputs, ``mode="bicubic"``, ``padding_mode="reflection"``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> img = tb.tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
        >>> F.grid_sample(img, tb.zeros(1, 1, 1, 2), align_corners=True).item()
        2.5
    """
    if input.ndim != 4 or mode not in ("bilinear", "nearest") or \
            padding_mode not in ("zeros", "border"):
        raise NotImplementedError(f"grid_sample: TensorBrain supports 4-D inputs, mode "
                                  f"'bilinear'/'nearest', padding_mode 'zeros'/'border' (got "
                                  f"{input.ndim}-D, {mode!r}, {padding_mode!r})")
    n, c, h, w = input.shape
    ho, wo = grid.shape[1], grid.shape[2]
    gx, gy = CB.select(grid, -1, 0), CB.select(grid, -1, 1)

    def unnormalise(v, size):
        if align_corners:
            return E.mul(E.add(v, 1), (size - 1) / 2)
        return E.div(E.sub(E.mul(E.add(v, 1), size), 1), 2)
    ix, iy = unnormalise(gx, w), unnormalise(gy, h)
    if padding_mode == "border":
        ix, iy = E.clamp(ix, 0, w - 1), E.clamp(iy, 0, h - 1)
    flat = S.reshape(input, n, c, h * w)
    xp = get_array_module(input._data)

    def corner(yy, xx):
        """input at integer (yy, xx) arrays (N, Ho, Wo), zero outside."""
        inside = (xx >= 0) & (xx <= w - 1) & (yy >= 0) & (yy <= h - 1)
        idx = (xp.clip(yy, 0, h - 1) * w + xp.clip(xx, 0, w - 1)).astype(np.int64)
        idx = xp.broadcast_to(idx.reshape(n, 1, ho * wo), (n, c, ho * wo))
        vals = S.reshape(S.gather(flat, 2, Tensor._wrap(xp.ascontiguousarray(idx))),
                         n, c, ho, wo)
        return E.mul(vals, Tensor._wrap(inside[:, None].astype(input._data.dtype)))
    if mode == "nearest":
        xr = xp.round(ix._data).astype(np.int64)   # round half to even, as torch's nearbyint
        yr = xp.round(iy._data).astype(np.int64)
        return corner(yr, xr)
    x0 = xp.floor(ix._data).astype(np.int64)
    y0 = xp.floor(iy._data).astype(np.int64)
    wx1 = E.sub(ix, Tensor._wrap(x0.astype(ix._data.dtype)))
    wy1 = E.sub(iy, Tensor._wrap(y0.astype(iy._data.dtype)))
    wx0, wy0 = E.sub(1.0, wx1), E.sub(1.0, wy1)
    out = None
    for yy, xx, wgt in ((y0, x0, E.mul(wy0, wx0)), (y0, x0 + 1, E.mul(wy0, wx1)),
                        (y0 + 1, x0, E.mul(wy1, wx0)), (y0 + 1, x0 + 1, E.mul(wy1, wx1))):
        term = E.mul(corner(yy, xx), S.unsqueeze(wgt, 1))
        out = term if out is None else E.add(out, term)
    return out


# ***** activations *****
def glu(input, dim=-1):
    """``a * sigmoid(b)`` for the two halves ``a, b`` of ``input`` along ``dim``, as
    ``F.glu``.

    Args:
        input: the input (even size along ``dim``).
        dim: the dimension to split.

    Returns:
        Tensor: half as large along ``dim``.

    Raises:
        RuntimeError: an odd size along ``dim``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.glu(tb.tensor([2.0, 0.0])).tolist()
        [1.0]
    """
    n = input.shape[dim]
    if n % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {dim} is size "
                           f"{n}")
    a, b = S.split(input, n // 2, dim)
    return E.mul(a, E.sigmoid(b))


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))``, as ``F.selu``.

    Args:
        input: the input.
        inplace: accepted (the result is a new tensor).

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.selu(tb.tensor([0.0])).tolist()
        [0.0]
    """
    neg = E.mul(E.expm1(E.clamp(input, max=0.0)), _SELU_ALPHA)
    return E.mul(E.add(E.relu(input), neg), _SELU_SCALE)


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``, as ``F.celu``.

    Args:
        input: the input.
        alpha: the scale of the negative part.
        inplace: accepted.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.celu(tb.tensor([1.0])).tolist()
        [1.0]
    """
    neg = E.mul(E.expm1(E.div(E.clamp(input, max=0.0), alpha)), alpha)
    return E.add(E.relu(input), neg)


def softsign(input):
    """``x / (1 + |x|)``, as ``F.softsign``.

    Args:
        input: the input.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.softsign(tb.tensor([1.0])).tolist()
        [0.5]
    """
    return E.div(input, E.add(E.abs(input), 1.0))


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, else 0, as
    ``F.softshrink``.

    Args:
        input: the input.
        lambd: the threshold.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.softshrink(tb.tensor([1.0, 0.2, -1.0])).tolist()
        [0.5, 0.0, -0.5]
    """
    return E.sub(input, E.clamp(input, -lambd, lambd))


def tanhshrink(input):
    """``x - tanh(x)``, as ``F.tanhshrink``.

    Args:
        input: the input.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.tanhshrink(tb.tensor([0.0])).tolist()
        [0.0]
    """
    return E.sub(input, E.tanh(input))


def threshold(input, threshold, value, inplace=False):  # noqa: A002  (torch's names)
    """``x`` where ``x > threshold``, else ``value``, as ``F.threshold``.

    Args:
        input: the input.
        threshold: the threshold.
        value: the replacement.
        inplace: accepted.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.threshold(tb.tensor([0.5, 2.0]), 1.0, -1.0).tolist()
        [-1.0, 2.0]
    """
    return E.where(E.gt_(input, threshold), input, value)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """A sample of the Gumbel-softmax distribution over ``dim``, as ``F.gumbel_softmax``;
    ``hard`` returns one-hot samples whose gradient is the soft sample's (straight-through).

    Args:
        logits: unnormalised log-probabilities.
        tau: the temperature.
        hard: one-hot samples.
        eps: accepted (torch's deprecated argument).
        dim: the dimension of the categories.

    Returns:
        Tensor: ``logits``' shape, summing to 1 over ``dim``.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.gumbel_softmax(tb.zeros(2, 3), hard=True).sum(-1).tolist()
        [1.0, 1.0]
    """
    from .._factories import empty_like
    from .softmax import softmax
    gumbels = E.neg(E.log(empty_like(logits).exponential_()))
    y = softmax(E.div(E.add(logits, gumbels), tau), dim)
    if not hard:
        return y
    xp = get_array_module(y._data)
    hot = xp.zeros(y.shape, dtype=y._data.dtype)
    xp.put_along_axis(hot, xp.expand_dims(y._data.argmax(axis=dim), dim), 1, axis=dim)
    return E.add(E.sub(Tensor._wrap(hot), y.detach()), y)


# ***** losses *****
def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """The negative log-likelihood of ``target`` under ``Normal(input, var)``, as
    ``F.gaussian_nll_loss``: ``0.5 * (log(var) + (input - target)**2 / var)`` (+ const).

    Args:
        input: the means.
        target: the observations.
        var: the variances (clamped to ``eps``), broadcastable.
        full: add ``0.5 * log(2 pi)``.
        eps: the smallest variance.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Returns:
        Tensor: the loss.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.gaussian_nll_loss(tb.zeros(2), tb.zeros(2), tb.ones(2)).item()
        0.0
    """
    v = E.clamp(var, min=eps) if isinstance(var, Tensor) else max(var, eps)
    if isinstance(v, Tensor) and v.ndim == input.ndim - 1:
        v = S.unsqueeze(v, -1)
    d = E.sub(input, target)
    loss = E.mul(E.add(E.log(v) if isinstance(v, Tensor) else math.log(v),
                       E.div(E.mul(d, d), v)), 0.5)
    if full:
        loss = E.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, eps=1e-8, reduction="mean"):
    """The Poisson negative log-likelihood, as ``F.poisson_nll_loss``: ``exp(input) - target
    * input`` with ``log_input``, else ``input - target * log(input + eps)`` (+ Stirling's term
    with ``full``).

    Args:
        input: the (log-)rates.
        target: the counts.
        log_input: ``input`` holds log-rates.
        full: add Stirling's approximation of ``log(target!)``.
        eps: added inside the log.
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Returns:
        Tensor: the loss.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.poisson_nll_loss(tb.zeros(2), tb.zeros(2)).item()
        1.0
    """
    if log_input:
        loss = E.sub(E.exp(input), E.mul(target, input))
    else:
        loss = E.sub(input, E.mul(target, E.log(E.add(input, eps))))
    if full:
        t = target._data
        xp = get_array_module(t)
        with np.errstate(divide="ignore", invalid="ignore"):
            stirling = xp.where(t > 1, t * xp.log(t) - t + 0.5 * xp.log(2 * math.pi * t), 0)
        loss = E.add(loss, Tensor._wrap(stirling.astype(loss._data.dtype)))
    return _reduce(loss, reduction)


def _reduce(loss, reduction):
    if reduction == "mean":
        return R.mean(loss)
    if reduction == "sum":
        return R.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{reduction} is not a valid value for reduction")


# ***** grouped matrix products (mixture-of-experts layers) *****
def grouped_mm(mat_a, mat_b, *, offs=None, bias=None, out_dtype=None):
    """Matrix products of groups, as ``F.grouped_mm`` (mixture-of-experts layers):

    - ``(G, M, K) @ (G, K, N)``: a batched product;
    - ``(sum M, K)`` with ``(G, K, N)`` and ``offs``: rows ``offs[g-1]:offs[g]`` times expert g;
    - ``(M, sum K)`` with ``(sum K, N)`` and ``offs``: ``(G, M, N)``, the K blocks apart;
    - ``(G, M, K)`` with ``(K, sum N)`` and ``offs``: ``(M, sum N)``, column block g by g.

    Args:
        mat_a: the left operand.
        mat_b: the right operand.
        offs: the groups' cumulative end offsets (int32), where an operand is 2-D.
        bias: not supported (must be None, as torch's).
        out_dtype: the result's dtype.

    Returns:
        Tensor: the products, differentiable.

    Raises:
        RuntimeError: a shape combination without ``offs``, or a bias.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.grouped_mm(tb.ones(4, 2), tb.ones(2, 2, 3), offs=tb.tensor([1, 4])).shape
        tb.Size([4, 3])
    """
    if bias is not None:
        raise RuntimeError("grouped_mm: bias is not supported")
    if mat_a.ndim == 3 and mat_b.ndim == 3:
        out = S.matmul(mat_a, mat_b)
    else:
        if offs is None:
            raise RuntimeError(f"grouped_mm: offs is needed when an operand is 2-D (got "
                               f"{mat_a.ndim}-D and {mat_b.ndim}-D)")
        ends = [int(v) for v in offs.tolist()]
        starts = [0] + ends[:-1]
        if mat_a.ndim == 2 and mat_b.ndim == 3:
            out = S.cat([S.matmul(S.narrow(mat_a, 0, s, e - s), CB.select(mat_b, 0, g))
                         for g, (s, e) in enumerate(zip(starts, ends))], 0)
        elif mat_a.ndim == 2 and mat_b.ndim == 2:
            out = S.stack([S.matmul(S.narrow(mat_a, 1, s, e - s), S.narrow(mat_b, 0, s, e - s))
                           for s, e in zip(starts, ends)])
        else:
            out = S.cat([S.matmul(CB.select(mat_a, 0, g), S.narrow(mat_b, 1, s, e - s))
                         for g, (s, e) in enumerate(zip(starts, ends))], 1)
    return out if out_dtype is None else out.to(out_dtype)


# ***** in-place activations (F.relu_ ...): the tensor takes the activation's value *****
def _inplace_activation(name, fn):
    def op(input, *args, **kwargs):
        return input._inplace(name, lambda t: fn(t, *args, **kwargs))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"In-place ``F.{name[:-1]}``: ``input`` becomes ``F.{name[:-1]}(input, ...)``, "
                  f"as ``torch.nn.functional.{name}``.\n\nArgs:\n    input: the tensor.\n"
                  f"    *args: the activation's arguments.\n    **kwargs: its keyword "
                  f"arguments.\n\nReturns:\n    Tensor: ``input``.\n")
    return op


def _elu(t, alpha=1.0):
    return celu(t, alpha) if alpha == 1.0 else E.add(E.relu(t), E.mul(E.expm1(
        E.clamp(t, max=0.0)), alpha))


def _leaky(t, negative_slope=0.01):
    return E.where(E.gt_(t, 0), t, E.mul(t, negative_slope))


def _hardtanh(t, min_val=-1.0, max_val=1.0):
    return E.clamp(t, min_val, max_val)


relu_ = _inplace_activation("relu_", E.relu)
elu_ = _inplace_activation("elu_", _elu)
leaky_relu_ = _inplace_activation("leaky_relu_", _leaky)
hardtanh_ = _inplace_activation("hardtanh_", _hardtanh)
threshold_ = _inplace_activation("threshold_", threshold)
selu_ = _inplace_activation("selu_", selu)
celu_ = _inplace_activation("celu_", celu)
