"""``nn.functional`` ops real programs use that the other op modules lack, each as torch's:
``instance_norm``, ``unfold``/``fold`` (im2col and its adjoint), ``affine_grid``/``grid_sample``,
``gaussian_nll_loss``/``poisson_nll_loss`` and ``grouped_mm``. The 1-D/3-D and adaptive pools are
in ``pooling.py``, the activations in ``activations.py``. Most are written from other ops, so
their gradients come with them.
"""
from __future__ import annotations

import math

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from . import combine as CB
from . import windows as W
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .core import make


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
    ks = W.ntuple(kernel_size, 2, "kernel_size")
    ds = W.ntuple(dilation, 2, "dilation")
    ps = W.ntuple(padding, 2, "padding")
    ss = W.ntuple(stride, 2, "stride")
    padded = W._pad(xp, x, ps, ps)
    outs = tuple(W._out_size(n, k, s, d, 2 * p) for n, k, s, d, p in
                 zip(x.shape[2:], ks, ss, ds, ps))
    cols = W._im2col(xp, padded, ks, ss, ds, outs, False)     # (N, C*kh*kw, L)

    def backward(g):
        g6 = g.reshape(x.shape[:2] + ks + outs)
        img = W._col2im(xp, g6, padded.shape, ks, ss, ds, outs)
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
    size = W.ntuple(output_size, 2, "output_size")
    ks = W.ntuple(kernel_size, 2, "kernel_size")
    ds = W.ntuple(dilation, 2, "dilation")
    ps = W.ntuple(padding, 2, "padding")
    ss = W.ntuple(stride, 2, "stride")
    outs = tuple(W._out_size(n, k, s, d, 2 * p) for n, k, s, d, p in zip(size, ks, ss, ds, ps))
    c = x.shape[1] // (ks[0] * ks[1])
    if c * ks[0] * ks[1] != x.shape[1] or outs[0] * outs[1] != x.shape[2]:
        raise RuntimeError(f"fold: input of shape {tuple(x.shape)} does not match kernel_size "
                           f"{ks} and output_size {size} ({outs[0] * outs[1]} blocks expected)")
    padded_shape = (x.shape[0], c, size[0] + 2 * ps[0], size[1] + 2 * ps[1])
    img = W._col2im(xp, x.reshape((x.shape[0], c) + ks + outs), padded_shape, ks, ss, ds, outs)
    out = img[:, :, ps[0]:ps[0] + size[0], ps[1]:ps[1] + size[1]]

    def backward(g):
        gp = W._pad(xp, g, ps, ps)
        cols = W._im2col(xp, gp, ks, ss, ds, outs, False)
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
