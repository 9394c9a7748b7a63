"""Reductions and statistics the reduction module lacks, mostly written from other ops (so
their gradients are those ops'): ``mode``, ``cummax``/``cummin``, ``logcumsumexp``,
``nansum``/``nanmean``/``nanmedian``, ``std_mean``/``var_mean``, ``aminmax``, ``dist``, ``diff``,
``cov``/``corrcoef``, ``renorm``, ``trapezoid``, ``msort``, ``sum_to_size``; each follows the
torch function of the same name.
Quantiles and histograms are in ``quantiles.py``.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from ..return_types import MinMax
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .complex import conj


class AMinMax(NamedTuple):
    """``(min, max)`` returned by ``aminmax``."""
    min: Any
    max: Any


def _gather_result(a, idx, d, keepdim):
    values = S.gather(a, d, Tensor._wrap(idx))
    if not keepdim:
        values, idx = S.squeeze(values, d), get_array_module(idx).squeeze(idx, d)
    return MinMax(values, Tensor._wrap(idx))


def mode(a, dim=-1, keepdim=False):
    """The most frequent value along ``dim`` (the smallest among ties) and an index of it, as
    ``torch.mode``.

    Args:
        a: the input tensor.
        dim: the dimension to reduce.
        keepdim: keep ``dim`` with size 1.

    Returns:
        (values, indices): a named tuple; the gradient goes to the chosen elements.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[1, 2, 2, 3], [4, 4, 1, 1]]).mode(1).values.tolist()
        [2, 1]
    """
    x = a._data
    xp = get_array_module(x)
    if x.ndim == 0:
        return MinMax(a, Tensor._wrap(xp.zeros((), dtype=np.int64)))
    d = dim % x.ndim
    moved = xp.moveaxis(x, d, -1)
    order = xp.argsort(moved, axis=-1, kind="stable")
    srt = xp.take_along_axis(moved, order, axis=-1)
    n = srt.shape[-1]
    new_run = xp.concatenate([xp.ones(srt.shape[:-1] + (1,), dtype=bool),
                              srt[..., 1:] != srt[..., :-1]], axis=-1)
    run_id = xp.cumsum(new_run, axis=-1) - 1
    pos = xp.arange(n)
    start = xp.maximum.accumulate(xp.where(new_run, pos, 0), axis=-1)
    length = pos - start + 1                   # the run's length so far, at each position
    best = xp.argmax(length, axis=-1)          # the first longest run ends here (smallest value)
    best_run = xp.take_along_axis(run_id, best[..., None], axis=-1)
    last = xp.where(run_id == best_run, pos, -1).max(axis=-1)   # torch: the last index of it
    idx = xp.take_along_axis(order, last[..., None], axis=-1).astype(np.int64)
    idx = xp.moveaxis(idx, -1, d)
    return _gather_result(a, idx, d, keepdim)


def _cum_extreme(a, dim, take):
    x = a._data
    xp = get_array_module(x)
    d = dim % max(x.ndim, 1)
    if x.ndim == 0:
        return MinMax(a, Tensor._wrap(xp.zeros((), dtype=np.int64)))
    moved = xp.moveaxis(x, d, -1)
    n = moved.shape[-1]
    best = take.accumulate(moved, axis=-1)
    pos = xp.broadcast_to(xp.arange(n), moved.shape)
    hit = moved == best                        # torch: the last position of the running extreme
    if moved.dtype.kind == "f":
        hit |= xp.isnan(moved)
    idx = xp.maximum.accumulate(xp.where(hit, pos, -1), axis=-1).astype(np.int64)
    idx = xp.moveaxis(idx, -1, d)
    return MinMax(S.gather(a, d, Tensor._wrap(idx)), Tensor._wrap(idx))


def cummax(a, dim):
    """The running maximum along ``dim`` and where it was reached, as ``torch.cummax``.

    Args:
        a: the input tensor.
        dim: the dimension.

    Returns:
        (values, indices): a named tuple; the gradient goes to the chosen elements.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([1, 3, 2, 5]).cummax(0).values.tolist()
        [1, 3, 3, 5]
    """
    return _cum_extreme(a, dim, np.maximum)


def cummin(a, dim):
    """The running minimum along ``dim`` and where it was reached, as ``torch.cummin``.

    Args:
        a: the input tensor.
        dim: the dimension.

    Returns:
        (values, indices): a named tuple.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([3, 1, 2, 0]).cummin(0).indices.tolist()
        [0, 1, 1, 3]
    """
    return _cum_extreme(a, dim, np.minimum)


def logcumsumexp(a, dim):
    """``log(cumsum(exp(a)))`` along ``dim``, computed stably, as ``torch.logcumsumexp``.

    Args:
        a: the input tensor.
        dim: the dimension.

    Returns:
        Tensor: ``a``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.logcumsumexp(tb.tensor([0.0, 0.0]), 0).tolist()[1] > 0.69
        True
    """
    x = a._data
    xp = get_array_module(x)
    m = xp.max(x, axis=dim, keepdims=True) if x.size else x
    m = xp.where(xp.isfinite(m), m, 0)
    shift = Tensor._wrap(m)
    return E.add(E.log(R.cumsum(E.exp(E.sub(a, shift)), dim)), shift)


def nansum(a, dim=None, keepdim=False, dtype=None):
    """The sum with NaNs counted as zero, as ``torch.nansum``.

    Args:
        a: the input tensor.
        dim: the dimension(s); None for all.
        keepdim: keep the reduced dimensions.
        dtype: accumulate in this dtype.

    Returns:
        Tensor: the sum; NaN positions get no gradient.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nansum(tb.tensor([1.0, float("nan"), 2.0])).item()
        3.0
    """
    return R.sum(_nan_to_zero(a), dim, keepdim, dtype)


def _nan_to_zero(a):
    x = a._data
    if x.dtype.kind not in "fc":
        return a
    return E.where(Tensor._wrap(get_array_module(x).isnan(x)), 0.0, a)


def nanmean(a, dim=None, keepdim=False, *, dtype=None):
    """The mean of the non-NaN elements, as ``torch.nanmean``.

    Args:
        a: the input tensor (floating point).
        dim: the dimension(s); None for all.
        keepdim: keep the reduced dimensions.
        dtype: compute in this dtype.

    Returns:
        Tensor: the mean.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nanmean(tb.tensor([1.0, float("nan"), 3.0])).item()
        2.0
    """
    x = a._data
    count = R.sum(Tensor._wrap((~get_array_module(x).isnan(x)).astype(x.dtype)), dim, keepdim)
    return E.div(nansum(a, dim, keepdim, dtype), count)


def nanmedian(a, dim=None, keepdim=False):
    """The median of the non-NaN elements (the lower middle one), as ``torch.nanmedian``.

    Args:
        a: the input tensor.
        dim: the dimension; None for all elements (no indices).
        keepdim: keep ``dim`` with size 1.

    Returns:
        Tensor or (values, indices): as ``median``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nanmedian(tb.tensor([3.0, float("nan"), 1.0, 2.0])).item()
        2.0
    """
    x = a._data
    xp = get_array_module(x)
    if dim is None:
        flat = S.reshape(a, -1)
        return S.reshape(nanmedian(flat, 0).values)
    d = dim % max(x.ndim, 1)
    nan = xp.isnan(x) if x.dtype.kind == "f" else xp.zeros(x.shape, dtype=bool)
    key = xp.where(nan, xp.inf, x) if x.dtype.kind == "f" else x
    order = xp.argsort(key, axis=d, kind="stable")
    count = (~nan).sum(axis=d, keepdims=True)
    k = xp.maximum((count - 1) // 2, 0)
    idx = xp.take_along_axis(order, k, axis=d).astype(np.int64)
    return _gather_result(a, idx, d, keepdim)


def std_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std, mean)`` over ``dim``, as ``torch.std_mean``.

    Args:
        a: the input tensor.
        dim: the dimension(s); None for all.
        unbiased: Bessel's correction (torch's old argument).
        keepdim: keep the reduced dimensions.
        correction: the difference ``N - correction`` divides by (default 1).

    Returns:
        tuple[Tensor, Tensor]: the standard deviation and the mean.

    Example:
        >>> import tensorbrain as tb
        >>> [v.item() for v in tb.std_mean(tb.tensor([1.0, 3.0]))]
        [1.4142135381698608, 2.0]
    """
    return (R.std(a, dim, unbiased, keepdim, correction), R.mean(a, dim, keepdim))


def var_mean(a, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var, mean)`` over ``dim``, as ``torch.var_mean``.

    Args:
        a: the input tensor.
        dim: the dimension(s); None for all.
        unbiased: Bessel's correction (torch's old argument).
        keepdim: keep the reduced dimensions.
        correction: the difference ``N - correction`` divides by (default 1).

    Returns:
        tuple[Tensor, Tensor]: the variance and the mean.

    Example:
        >>> import tensorbrain as tb
        >>> [v.item() for v in tb.var_mean(tb.tensor([1.0, 3.0]))]
        [2.0, 2.0]
    """
    return (R.var(a, dim, unbiased, keepdim, correction), R.mean(a, dim, keepdim))


def aminmax(a, *, dim=None, keepdim=False):
    """``(amin, amax)`` over ``dim`` (all elements when None), as ``torch.aminmax``.

    Args:
        a: the input tensor.
        dim: the dimension; None for all.
        keepdim: keep ``dim`` with size 1.

    Returns:
        (min, max): a named tuple.

    Example:
        >>> import tensorbrain as tb
        >>> tuple(v.item() for v in tb.aminmax(tb.tensor([3, 1, 2])))
        (1, 3)
    """
    from .extra import amin
    return AMinMax(amin(a, dim, keepdim), R.amax(a, dim, keepdim))


def dist(a, other, p=2):
    """The ``p``-norm of ``a - other``, as ``torch.dist``.

    Args:
        a: the input tensor.
        other: broadcast with ``a``.
        p: the norm's order.

    Returns:
        Tensor: 0-d.

    Example:
        >>> import tensorbrain as tb
        >>> tb.dist(tb.tensor([0.0, 0.0]), tb.tensor([3.0, 4.0])).item()
        5.0
    """
    return R.norm(E.sub(a, other), p)


def diff(a, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim``, as ``torch.diff``.

    Args:
        a: the input tensor.
        n: how many times to difference.
        dim: the dimension.
        prepend: values put in front of ``a`` along ``dim`` first.
        append: values put after it.

    Returns:
        Tensor: ``n`` shorter along ``dim`` (plus the prepended/appended length).

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([1, 4, 9, 16]).diff().tolist()
        [3, 5, 7]
    """
    parts = [t for t in (prepend, a, append) if t is not None]
    x = S.cat(parts, dim) if len(parts) > 1 else a
    for _ in range(n):
        size = x.shape[dim]
        if size < 2:
            return S.narrow(x, dim, 0, 0)
        later, earlier = S.narrow(x, dim, 1, size - 1), S.narrow(x, dim, 0, size - 1)
        x = E.logical_xor(later, earlier) if x.dtype == np.bool_ else E.sub(later, earlier)
    return x


def cov(a, *, correction=1, fweights=None, aweights=None):
    """The covariance matrix of the variables in ``a``'s rows (observations in columns), as
    ``torch.cov``.

    Args:
        a: 1-D (one variable) or 2-D ``(variables, observations)``.
        correction: subtracted from the (weighted) count in the divisor.
        fweights: integer frequency weights per observation.
        aweights: observation weights.

    Returns:
        Tensor: ``(variables, variables)``, or 0-d for one variable.

    Example:
        >>> import tensorbrain as tb
        >>> tb.cov(tb.tensor([[0.0, 2.0], [3.0, 1.0]])).tolist()
        [[2.0, -2.0], [-2.0, 2.0]]
    """
    x = S.reshape(a, 1, -1) if a.ndim < 2 else a
    w = None
    if fweights is not None:
        w = fweights
    if aweights is not None:
        w = aweights if w is None else E.mul(w, aweights)
    if w is None:
        n = x.shape[1]
        mean = R.mean(x, 1, True)
        xc = E.sub(x, mean)
        out = E.div(S.matmul(xc, S.t(conj(xc))), max(n - correction, 0))
    else:
        wsum = R.sum(w)
        mean = E.div(R.sum(E.mul(x, w), 1, True), wsum)
        xc = E.sub(x, mean)
        if aweights is None:
            norm = E.sub(wsum, correction)
        else:
            norm = E.sub(wsum, E.div(E.mul(R.sum(E.mul(w, aweights)), correction), wsum))
        out = E.div(S.matmul(E.mul(xc, w), S.t(xc)), norm)
    return S.reshape(out) if a.ndim < 2 else out


def corrcoef(a):
    """The Pearson correlation matrix of ``a``'s rows, as ``torch.corrcoef``.

    Args:
        a: 1-D or 2-D ``(variables, observations)``.

    Returns:
        Tensor: the correlations (clipped to [-1, 1]).

    Example:
        >>> import tensorbrain as tb
        >>> tb.corrcoef(tb.tensor([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]])).tolist()
        [[1.0, -1.0], [-1.0, 1.0]]
    """
    c = cov(a)
    if c.ndim == 0:
        return E.div(c, c)
    d = E.sqrt(S.reshape(R.sum(E.mul(c, _eye_like(c)), 1), -1))
    return E.clamp(E.div(E.div(c, S.reshape(d, -1, 1)), S.reshape(d, 1, -1)), -1, 1)


def _eye_like(c):
    return Tensor._wrap(get_array_module(c._data).eye(c.shape[0], dtype=c._data.dtype))


def renorm(a, p, dim, maxnorm):
    """``a`` with each slice along ``dim`` rescaled to ``p``-norm at most ``maxnorm``, as
    ``torch.renorm``.

    Args:
        a: the input tensor.
        p: the norm's order.
        dim: the dimension whose slices are renormalised.
        maxnorm: the largest norm allowed.

    Returns:
        Tensor: ``a``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[3.0, 4.0], [0.3, 0.4]]).renorm(2, 0, 1.0).tolist()[0]
        [0.6000000238418579, 0.800000011920929]
    """
    d = dim % a.ndim
    others = tuple(i for i in range(a.ndim) if i != d)
    norms = R.norm(a, p, others, True)
    scale = E.where(E.gt_(norms, maxnorm), E.div(maxnorm, E.add(norms, 1e-7)), 1.0)
    return E.mul(a, scale)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoid rule's integral of ``y`` along ``dim``, as ``torch.trapezoid``.

    Args:
        y: the values.
        x: the sample points (same length along ``dim``), or None.
        dx: the spacing when ``x`` is None (default 1).
        dim: the dimension.

    Returns:
        Tensor: one dimension fewer.

    Example:
        >>> import tensorbrain as tb
        >>> tb.trapezoid(tb.tensor([1.0, 2.0, 3.0])).item()
        4.0
    """
    n = y.shape[dim]
    mid = E.mul(E.add(S.narrow(y, dim, 1, n - 1), S.narrow(y, dim, 0, n - 1)), 0.5)
    if x is None:
        return E.mul(R.sum(mid, dim), 1.0 if dx is None else dx)
    return R.sum(E.mul(mid, diff(x, dim=dim if x.ndim > 1 else -1)), dim)


trapz = trapezoid


def msort(a):
    """``a`` sorted along its first dimension, as ``torch.msort``.

    Args:
        a: the input tensor.

    Returns:
        Tensor: the sorted values.

    Example:
        >>> import tensorbrain as tb
        >>> tb.msort(tb.tensor([3, 1, 2])).tolist()
        [1, 2, 3]
    """
    return S.sort(a, 0).values


def sum_to_size(a, *size):
    """``a`` summed down to ``size`` (the inverse of broadcasting), as
    ``Tensor.sum_to_size``.

    Args:
        a: the input tensor.
        *size: the shape, as ints or one sequence.

    Returns:
        Tensor: the reduced tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.ones(2, 3).sum_to_size(1, 3).tolist()
        [[2.0, 2.0, 2.0]]
    """
    shape = S._shape_arg(size)
    lead = a.ndim - len(shape)
    out = R.sum(a, tuple(range(lead))) if lead else a
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and out.shape[i] != 1)
    return R.sum(out, axes, True) if axes else out
