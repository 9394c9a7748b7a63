"""Where values fall: ``quantile``/``nanquantile`` and ``histc``/``histogram``, each as the torch
function of the same name (quantiles are written from sort and gather, so their gradients are
those ops'; histograms have none, as in torch).
"""
from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from . import elementwise as E
from . import shape as S


class Histogram(NamedTuple):
    """``(hist, bin_edges)`` returned by ``histogram``."""
    hist: Any
    bin_edges: Any


def quantile(a, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-th quantiles along ``dim``, as ``torch.quantile``.

    Args:
        a: the input tensor (floating point).
        q: a number in [0, 1] or a 1-D tensor of them (a leading output dimension).
        dim: the dimension; None for all elements.
        keepdim: keep ``dim`` with size 1.
        interpolation: ``"linear"``, ``"lower"``, ``"higher"``, ``"midpoint"`` or
            ``"nearest"``.

    Returns:
        Tensor: the quantiles; differentiable (through the two neighbours interpolated).

    Raises:
        RuntimeError: ``q`` outside [0, 1].

    Example:
        >>> import tensorbrain as tb
        >>> tb.quantile(tb.tensor([1.0, 2.0, 3.0, 4.0]), 0.5).item()
        2.5
    """
    return _quantile(a, q, dim, keepdim, interpolation, ignore_nan=False)


def nanquantile(a, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` of the non-NaN elements, as ``torch.nanquantile``.

    Args:
        a: the input tensor.
        q: a number in [0, 1] or a 1-D tensor of them.
        dim: the dimension; None for all elements.
        keepdim: keep ``dim`` with size 1.
        interpolation: as :func:`quantile`.

    Returns:
        Tensor: the quantiles.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nanquantile(tb.tensor([1.0, float("nan"), 3.0]), 0.5).item()
        2.0
    """
    return _quantile(a, q, dim, keepdim, interpolation, ignore_nan=True)


def _quantile(a, q, dim, keepdim, interpolation, ignore_nan):
    x = a._data
    xp = get_array_module(x)
    scalar_q = isinstance(q, numbers.Number)
    qs = np.atleast_1d(np.asarray(q._data if isinstance(q, Tensor) else q, dtype=np.float64))
    if ((qs < 0) | (qs > 1)).any():
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    if dim is None:
        a, dim, keepdim_shape = S.reshape(a, -1), 0, (1,) * x.ndim
        x = a._data
    else:
        keepdim_shape = None
    d = dim % max(x.ndim, 1)
    nan = xp.isnan(x)
    key = xp.where(nan, xp.inf, x)
    order = xp.argsort(key, axis=d, kind="stable")
    srt = S.gather(a, d, Tensor._wrap(order))
    n_valid = (~nan).sum(axis=d, keepdims=True) if ignore_nan else \
        xp.full(tuple(1 if i == d else s for i, s in enumerate(x.shape)), x.shape[d])
    outs = []
    for qi in qs:
        pos = qi * (n_valid - 1)
        lo = xp.floor(pos).astype(np.int64)
        hi = xp.ceil(pos).astype(np.int64)
        if interpolation == "lower":
            hi = lo
        elif interpolation == "higher":
            lo = hi
        elif interpolation == "nearest":
            lo = hi = xp.round(pos).astype(np.int64)   # round half to even, as torch
        lo, hi = xp.clip(lo, 0, x.shape[d] - 1), xp.clip(hi, 0, x.shape[d] - 1)
        vlo = S.gather(srt, d, Tensor._wrap(lo))
        vhi = S.gather(srt, d, Tensor._wrap(hi))
        frac = 0.5 if interpolation == "midpoint" else (pos - xp.floor(pos)).astype(x.dtype)
        if interpolation in ("lower", "higher", "nearest"):
            v = vlo
        else:
            v = E.add(vlo, E.mul(E.sub(vhi, vlo), Tensor._wrap(xp.asarray(frac, dtype=x.dtype))))
        if not ignore_nan:   # a NaN anywhere in the slice makes the quantile NaN, as torch
            anynan = nan.any(axis=d, keepdims=True)
            if anynan.any():
                v = E.where(Tensor._wrap(anynan), float("nan"), v)
        elif (n_valid == 0).any():
            v = E.where(Tensor._wrap(n_valid == 0), float("nan"), v)
        if keepdim_shape is not None:
            v = S.reshape(v, *keepdim_shape) if keepdim else S.reshape(v)
        elif not keepdim:
            v = S.squeeze(v, d)
        outs.append(v)
    return outs[0] if scalar_q or (isinstance(q, Tensor) and q.ndim == 0) else S.stack(outs)


def histc(a, bins=100, min=0, max=0):  # noqa: A002  (torch's names)
    """A histogram of ``bins`` equal bins between ``min`` and ``max`` (the data's range when
    both are 0); elements outside are ignored, as ``torch.histc``.

    Args:
        a: the input tensor.
        bins: the number of bins.
        min: the lower edge.
        max: the upper edge.

    Returns:
        Tensor: the counts, ``a``'s dtype.

    Example:
        >>> import tensorbrain as tb
        >>> tb.histc(tb.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3).tolist()
        [0.0, 2.0, 1.0, 0.0]
    """
    x = a._data
    xp = get_array_module(x)
    lo, hi = float(min), float(max)
    if lo == hi == 0 and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts, _ = xp.histogram(x.reshape(-1), bins=int(bins), range=(lo, hi))
    return Tensor._wrap(counts.astype(x.dtype))


def histogram(a, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    """A histogram and its bin edges, as ``torch.histogram``.

    Args:
        a: the input tensor.
        bins: a number of equal bins, or a 1-D tensor of edges.
        range: ``(min, max)`` of the equal bins; the data's range by default.
        weight: a weight per element.
        density: normalise so the histogram integrates to 1.

    Returns:
        (hist, bin_edges): a named tuple.

    Example:
        >>> import tensorbrain as tb
        >>> tb.histogram(tb.tensor([1.0, 2.0, 1.0]), bins=2).hist.tolist()
        [2.0, 1.0]
    """
    x = a._data
    xp = get_array_module(x)
    edges = bins._data if isinstance(bins, Tensor) else int(bins)
    w = None if weight is None else weight._data.reshape(-1)
    hist, out_edges = xp.histogram(x.reshape(-1), bins=edges, range=range, weights=w,
                                   density=density)
    return Histogram(Tensor._wrap(hist.astype(x.dtype)), Tensor._wrap(out_edges.astype(x.dtype)))
