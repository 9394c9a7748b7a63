"""Small ops real programs reach for, written from the other ops (so their gradients are those
ops'): ``amin``, ``clamp_min`` / ``clamp_max``, ``logical_and`` / ``or`` / ``xor``, ``isclose``,
``unbind``, ``nan_to_num``, ``allclose``, ``equal``. Each follows the torch function of the same name."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from .._xp import get_array_module
from .._tensor_base import TensorBase as Tensor
from . import elementwise as E
from . import reduce as R


def amin(a, dim=None, keepdim=False):
    """The minimum over ``dim``, as ``torch.amin``.

    The gradient is shared evenly among tied minima (as torch's).

    Args:
        a: the input tensor.
        dim: a dimension or a tuple of them; None for all.
        keepdim: keep the reduced dimensions with size 1.

    Returns:
        Tensor: the minima.

    Example:
        >>> import tensorbrain as tb
        >>> tb.amin(tb.tensor([[1.0, 3.0], [0.0, 2.0]]), 1).tolist()
        [1.0, 0.0]
    """
    return E.neg(R.amax(E.neg(a), dim, keepdim))


def clamp_min(a, min):
    """``clamp(a, min=min)``, as ``torch.clamp_min``.

    Args:
        a: the input tensor.
        min: the lower bound (a number or a tensor).

    Returns:
        Tensor: a tensor of ``a``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([-1.0, 2.0]).clamp_min(0.5).tolist()
        [0.5, 2.0]
    """
    return E.clamp(a, min=min)


def clamp_max(a, max):
    """``clamp(a, max=max)``, as ``torch.clamp_max``.

    Args:
        a: the input tensor.
        max: the upper bound (a number or a tensor).

    Returns:
        Tensor: a tensor of ``a``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([-1.0, 2.0]).clamp_max(0.5).tolist()
        [-1.0, 0.5]
    """
    return E.clamp(a, max=max)


def _data(x):
    return x._data if isinstance(x, Tensor) else x


def _logical(a, b, fn):
    x = _data(a)
    xp = get_array_module(x)
    return Tensor._wrap(fn(xp)(x.astype(bool), xp.asarray(_data(b)).astype(bool)))


def logical_and(a, b):
    """Elementwise ``a and b``, nonzero counting as True (``torch.logical_and``).

    Args:
        a: a tensor.
        b: a tensor (or number) broadcast with ``a``.

    Returns:
        Tensor: a bool tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.logical_and(tb.tensor([1, 0, 2]), tb.tensor([True, True, False])).tolist()
        [True, False, False]
    """
    return _logical(a, b, lambda xp: xp.logical_and)


def logical_or(a, b):
    """Elementwise ``a or b``, nonzero counting as True (``torch.logical_or``).

    Args:
        a: a tensor.
        b: a tensor (or number) broadcast with ``a``.

    Returns:
        Tensor: a bool tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.logical_or(tb.tensor([1, 0, 0]), tb.tensor([False, True, False])).tolist()
        [True, True, False]
    """
    return _logical(a, b, lambda xp: xp.logical_or)


def logical_xor(a, b):
    """Elementwise ``a xor b``, nonzero counting as True (``torch.logical_xor``).

    Args:
        a: a tensor.
        b: a tensor (or number) broadcast with ``a``.

    Returns:
        Tensor: a bool tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.logical_xor(tb.tensor([1, 0, 1]), tb.tensor([True, True, False])).tolist()
        [False, True, True]
    """
    return _logical(a, b, lambda xp: xp.logical_xor)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (``torch.isclose``).

    Args:
        a: a tensor.
        b: a tensor (or number) broadcast with ``a``.
        rtol: relative tolerance.
        atol: absolute tolerance.
        equal_nan: count NaNs in the same place as equal.

    Returns:
        Tensor: a bool tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.isclose(tb.tensor([1.0, 2.0]), tb.tensor([1.0 + 1e-9, 2.1])).tolist()
        [True, False]
    """
    x = _data(a)
    xp = get_array_module(x)
    return Tensor._wrap(xp.isclose(x, _data(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def unbind(a, dim=0):
    """The slices of ``a`` along ``dim`` (``torch.unbind``); gradients flow back through each.

    Args:
        a: the input tensor.
        dim: the dimension to split into its slices.

    Returns:
        tuple: ``a.shape[dim]`` tensors, each without that dimension.

    Example:
        >>> import tensorbrain as tb
        >>> [t.tolist() for t in tb.tensor([[1, 2], [3, 4]]).unbind(1)]
        [[1, 3], [2, 4]]
    """
    dim = dim + a.dim() if dim < 0 else dim
    index = (slice(None),) * dim
    return tuple(a[index + (i,)] for i in range(a.shape[dim]))


def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    """``a`` with NaN, +inf and -inf replaced by finite numbers, as ``torch.nan_to_num``.

    Args:
        a: the input tensor.
        nan: the value for NaN.
        posinf: the value for +inf; None: the dtype's largest finite value.
        neginf: the value for -inf; None: the dtype's lowest finite value.

    Returns:
        Tensor: a tensor of ``a``'s shape and dtype; the gradient flows to the finite elements
        (zero at the replaced ones). Integer tensors come back unchanged.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([float("nan"), float("inf"), -1.0]).nan_to_num(posinf=9.0).tolist()
        [0.0, 9.0, -1.0]
    """
    x = a._data
    if x.dtype.kind != "f":
        return a.clone()
    info = ml_dtypes.finfo(x.dtype)   # NumPy's finfo does not know bfloat16
    out = E.masked_fill(a, E.isnan(a), nan)
    out = E.masked_fill(out, E.eq_(a, float("inf")), info.max if posinf is None else posinf)
    return E.masked_fill(out, E.eq_(a, float("-inf")), info.min if neginf is None else neginf)


def allclose(a, b, rtol=1e-5, atol=1e-8, equal_nan=False) -> bool:
    """Whether ``a`` and ``b`` are equal within ``atol + rtol * |b|`` elementwise.

    Args:
        a: a tensor.
        b: a tensor broadcastable with ``a``.
        rtol: relative tolerance.
        atol: absolute tolerance.
        equal_nan: count NaNs in the same places as equal.

    Returns:
        A bool (not a tensor), as ``torch.allclose``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.allclose(tb.tensor([1.0, 2.0]), tb.tensor([1.0, 2.0 + 1e-9]))
        True
    """
    from .._xp import to_numpy
    return bool(np.allclose(to_numpy(_data(a)), to_numpy(_data(b)), rtol=rtol, atol=atol,
                            equal_nan=equal_nan))


def equal(a, b) -> bool:
    """Whether ``a`` and ``b`` have the same shape and the same elements, as ``torch.equal``.

    Args:
        a: a tensor.
        b: a tensor.

    Returns:
        A bool.

    Example:
        >>> import tensorbrain as tb
        >>> tb.equal(tb.tensor([1, 2]), tb.tensor([1, 2])), tb.ones(2).equal(tb.ones(3))
        (True, False)
    """
    from .._xp import to_numpy
    return tuple(a.shape) == tuple(b.shape) and bool(np.array_equal(to_numpy(_data(a)),
                                                                   to_numpy(_data(b))))
