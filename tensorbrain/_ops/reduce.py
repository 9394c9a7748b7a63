"""Reductions over dims with ``keepdim``, as PyTorch names them."""
from __future__ import annotations

import builtins

import numpy as np

from .. import _dtype
from .._dtype import bfloat16 as _BF16
from .._xp import get_array_module
from .._tensor_base import TensorBase as Tensor
from .core import make
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py


def _axes(dim, ndim):
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    out = []
    for d in dims:
        if not -builtins.max(ndim, 1) <= d < builtins.max(ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-builtins.max(ndim, 1)}, {builtins.max(ndim, 1) - 1}], but got {d})")
        out.append(d % builtins.max(ndim, 1))
    return tuple(out)


def _expand_back(g, shape, axes, keepdim):
    """Reshape a reduced gradient so it broadcasts against the input's ``shape``."""
    xp = get_array_module(g)
    if axes is None:
        return xp.broadcast_to(g.reshape((1,) * len(shape)) if len(shape) else g, shape)
    if not keepdim:
        g = xp.expand_dims(g, axes)
    return xp.broadcast_to(g, shape)


@autocast_op("sum")
def sum(a, dim=None, keepdim=False, dtype=None):
    x = a._data
    axes = _axes(dim, x.ndim)
    if x.ndim == 0:
        axes = None
    if dtype is None and x.dtype.kind in "biu":
        dtype = "int64"  # PyTorch sums integers and bools as int64
    if x.dtype.char == "E" and dtype is None:   # E: bfloat16
        # ml_dtypes adds bfloat16 in bfloat16 (70,000 ones sum to 256); PyTorch accumulates in float32
        out = x.sum(axis=axes, keepdims=keepdim, dtype=np.float32).astype(_BF16)
    else:
        out = x.sum(axis=axes, keepdims=keepdim, dtype=dtype)
    shape = x.shape
    return make(out, (a,), lambda g: (_expand_back(g, shape, axes, keepdim).astype(x.dtype, copy=False),),
                "SumBackward")


def mean(a, dim=None, keepdim=False, dtype=None):
    x = a._data
    if not _dtype.is_float_or_complex(x.dtype) and dtype is None:
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be floating "
                           f"point, but got {x.dtype}")
    axes = _axes(dim, x.ndim)
    if x.ndim == 0:
        axes = None
    if x.dtype.char == "E" and dtype is None:   # bfloat16: accumulate in float32, as sum
        out = x.mean(axis=axes, keepdims=keepdim, dtype=np.float32).astype(_BF16)
    else:
        out = x.mean(axis=axes, keepdims=keepdim, dtype=dtype)
    n = x.size // builtins.max(out.size, 1) if x.size else 1
    shape = x.shape
    return make(out, (a,), lambda g: (_expand_back(g / n, shape, axes, keepdim).astype(x.dtype, copy=False),),
                "MeanBackward")


def _minmax(name, a, dim, keepdim, pick, argpick):
    x = a._data
    xp = get_array_module(x)
    if dim is None:
        out = pick(x)

        def backward(g):
            mask = x == out
            return (mask * (g / mask.sum()),)
        return make(out, (a,), backward, name + "Backward")
    axis = _axes(dim, x.ndim)[0] if x.ndim else None
    idx = argpick(x, axis=axis)
    vals = xp.take_along_axis(x, xp.expand_dims(idx, axis), axis) if x.ndim else x
    out = vals if keepdim else vals.squeeze(axis) if x.ndim else vals

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        gg = g if keepdim or not x.ndim else xp.expand_dims(g, axis)
        if x.ndim:
            xp.put_along_axis(gx, xp.expand_dims(idx, axis), gg, axis)
        else:
            gx[...] = gg
        return (gx,)
    values = make(out, (a,), backward, name + "Backward")
    indices = Tensor._wrap(idx if keepdim is False or not x.ndim else xp.expand_dims(idx, axis))
    from ..return_types import MinMax
    return MinMax(values, indices)


def max(a, dim=None, keepdim=False):
    """The largest element; with ``dim``, the largest values and their indices; with a tensor,
    the elementwise maximum, as ``torch.max``.

    Args:
        a: the input tensor.
        dim: the dimension to reduce (None: all elements), or a tensor for ``tb.maximum``.
        keepdim: keep the reduced dimension with size 1.

    Returns:
        The maximum (0-d) without ``dim``; a named tuple ``(values, indices)`` with ``dim``.

    Example:
        >>> import tensorbrain as tb
        >>> x = tb.tensor([[1.0, 5.0], [3.0, 2.0]])
        >>> x.max().item(), x.max(dim=1).indices.tolist()
        (5.0, [1, 0])
    """
    if dim is not None and not isinstance(dim, (int, tuple, list)):
        from .elementwise import maximum
        return maximum(a, dim)
    return _minmax("Max", a, dim, keepdim, lambda x: x.max(), lambda x, axis: x.argmax(axis=axis))


def min(a, dim=None, keepdim=False):
    if dim is not None and not isinstance(dim, (int, tuple, list)):
        from .elementwise import minimum
        return minimum(a, dim)
    return _minmax("Min", a, dim, keepdim, lambda x: x.min(), lambda x, axis: x.argmin(axis=axis))


def amax(a, dim=None, keepdim=False):
    x = a._data
    axes = _axes(dim, x.ndim)
    out = x.max(axis=axes, keepdims=keepdim)

    def backward(g):
        o = out if keepdim or axes is None else get_array_module(x).expand_dims(out, axes)
        mask = x == o
        gk = g if keepdim or axes is None else get_array_module(x).expand_dims(g, axes)
        return (mask * (gk / mask.sum(axis=axes, keepdims=True)),)
    return make(out, (a,), backward, "AmaxBackward")


def _arg_index(a, dim, keepdim, method):
    """The index tensor of the array method ``method`` ("argmax"/"argmin"), over all elements
    when ``dim`` is None (a 0-d result), else along ``dim``."""
    x = a._data
    if dim is None:
        return Tensor._wrap(get_array_module(x).asarray(getattr(x, method)()))
    return Tensor._wrap(getattr(x, method)(axis=_axes(dim, x.ndim)[0], keepdims=keepdim))


def argmax(a, dim=None, keepdim=False):
    return _arg_index(a, dim, keepdim, "argmax")


def argmin(a, dim=None, keepdim=False):
    return _arg_index(a, dim, keepdim, "argmin")


def var(a, dim=None, unbiased=None, keepdim=False, correction=None):
    """The variance over ``dim``, as ``torch.var``.

    Args:
        a: the input tensor.
        dim: the dimension or tuple of dimensions to reduce; None: all of them.
        unbiased: False for the population variance (``correction=0``); torch's old spelling.
        keepdim: keep the reduced dimensions with size 1.
        correction: subtract this from the count (default 1, Bessel's correction); NaN when
            the count is not larger than it.

    Returns:
        Tensor: the reduced tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([1.0, 3.0]).var().item(), tb.tensor([1.0, 3.0]).var(correction=0).item()
        (2.0, 1.0)
    """
    if correction is None:
        correction = 0 if unbiased is False else 1
    x = a._data
    axes = _axes(dim, x.ndim)
    mu = x.mean(axis=axes, keepdims=True)
    d = x - mu
    n = x.size // builtins.max(mu.size, 1)
    denom = n - correction
    out = (d * d).sum(axis=axes, keepdims=keepdim) / denom if denom > 0 else \
        (d * d).sum(axis=axes, keepdims=keepdim) * float("nan")
    shape = x.shape
    return make(out.astype(x.dtype, copy=False), (a,),
                lambda g: ((_expand_back(g, shape, axes, keepdim) * (2.0 / denom) * d).astype(x.dtype, copy=False),),
                "VarBackward", (a,))


def std(a, dim=None, unbiased=None, keepdim=False, correction=None):
    from .elementwise import sqrt
    return sqrt(var(a, dim, unbiased, keepdim, correction))


@autocast_op("logsumexp")
def logsumexp(a, dim, keepdim=False):
    x = a._data
    xp = get_array_module(x)
    axes = _axes(dim, x.ndim)
    m = x.max(axis=axes, keepdims=True)
    m = xp.where(xp.isfinite(m), m, 0)
    s = xp.exp(x - m).sum(axis=axes, keepdims=True)
    out_k = xp.log(s) + m
    out = out_k if keepdim else out_k.squeeze(axis=axes)
    shape = x.shape

    def backward(g):
        return (_expand_back(g, shape, axes, keepdim) * xp.exp(x - out_k),)
    return make(out, (a,), backward, "LogsumexpBackward", (a,))


@autocast_op("prod")
def prod(a, dim=None, keepdim=False):
    x = a._data
    axes = _axes(dim, x.ndim)
    out = x.prod(axis=axes, keepdims=keepdim)
    shape = x.shape

    def backward(g):
        # Gradient of a product is product / x; exact only where x != 0 (documented limit).
        o = out if keepdim or axes is None else get_array_module(x).expand_dims(out, axes)
        return (_expand_back(g, shape, axes, keepdim) * o / x,)
    return make(out, (a,), backward, "ProdBackward", (a,))


@autocast_op("cumsum")
def cumsum(a, dim, dtype=None):
    x = a._data
    d = _axes(dim, x.ndim)[0] if x.ndim else 0
    if dtype is None and x.dtype.kind in "biu":
        dtype = "int64"
    out = x.cumsum(axis=d, dtype=dtype) if x.ndim else x.astype(dtype or x.dtype)
    xp = get_array_module(x)

    def backward(g):  # reverse cumulative sum
        if not x.ndim:
            return (g,)
        return (xp.flip(xp.flip(g, d).cumsum(axis=d), d).astype(x.dtype, copy=False),)
    return make(out, (a,), backward, "CumsumBackward")


@autocast_op("cumprod")
def cumprod(a, dim, *, dtype=None):
    """The cumulative product along ``dim``, as ``torch.cumprod``.

    Args:
        a: the input tensor.
        dim: the dimension (negative counts from the end).
        dtype: the result's dtype; default ``a``'s, int64 for integers and bools (as torch).

    Returns:
        Tensor: a tensor of ``a``'s shape; differentiable, zeros included.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([1.0, 2.0, 3.0, 0.0, 5.0]).cumprod(0).tolist()
        [1.0, 2.0, 6.0, 0.0, 0.0]
    """
    x = a._data
    xp = get_array_module(x)
    d = _axes(dim, x.ndim)[0] if x.ndim else 0
    if dtype is None and x.dtype.kind in "biu":
        dtype = "int64"
    out = x.cumprod(axis=d, dtype=dtype) if x.ndim else x.astype(dtype or x.dtype)

    def backward(g):
        if not x.ndim:
            return (g,)
        if (x != 0).all():   # d out_j / d x_i = out_j / x_i for j >= i: a reverse cumsum
            rev = xp.flip(xp.flip(g * out, d).cumsum(axis=d), d)
            return ((rev / x).astype(x.dtype, copy=False),)
        # with zeros, out / x is undefined: for each i, the products with x_i set to 1
        # (n cumprods; O(n^2) but exact, as torch's own fallback for this case)
        gm, xm = xp.moveaxis(g, d, -1), xp.moveaxis(x, d, -1)
        gx = xp.zeros(xm.shape, dtype=g.dtype)
        for i in range(xm.shape[-1]):
            y = xm.copy()
            y[..., i] = 1
            gx[..., i] = (gm[..., i:] * y.cumprod(axis=-1)[..., i:]).sum(axis=-1)
        return (xp.moveaxis(gx, -1, d).astype(x.dtype, copy=False),)
    return make(out, (a,), backward, "CumprodBackward0")


def all(a, dim=None, keepdim=False):
    x = a._data
    return Tensor._wrap(x.all(axis=_axes(dim, x.ndim), keepdims=keepdim))


def any(a, dim=None, keepdim=False):
    x = a._data
    return Tensor._wrap(x.any(axis=_axes(dim, x.ndim), keepdims=keepdim))


@autocast_op("norm")
def norm(a, p="fro", dim=None, keepdim=False):
    """The vector p-norm over ``dim``, as ``torch.norm`` for vectors.

    Args:
        a: the input tensor.
        p: the order: ``'fro'`` or 2, 1, ``inf``, or any other number.
        dim: the dimension or tuple of dimensions; None: all elements as one vector (so
            ``'fro'`` is the Frobenius norm of a matrix).
        keepdim: keep the reduced dimensions with size 1.

    Returns:
        Tensor: the norm.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([3.0, 4.0]).norm().item(), tb.tensor([3.0, -4.0]).norm(p=1).item()
        (5.0, 7.0)
    """
    from .elementwise import abs as _abs, mul, pow, sqrt
    if p in ("fro", 2, 2.0):
        return sqrt(sum(mul(a, a), dim, keepdim))
    if p in (float("inf"), "inf"):
        return amax(_abs(a), dim, keepdim)
    if p == 1:
        return sum(_abs(a), dim, keepdim)
    return pow(sum(pow(_abs(a), p), dim, keepdim), 1.0 / p)
