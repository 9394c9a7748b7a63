"""Small ops real programs reach for, written from the other ops (so their gradients are those
ops'): ``amin``, ``clamp_min`` / ``clamp_max``, ``logical_and`` / ``or`` / ``xor``, ``isclose``,
``unbind``. Each follows the torch function of the same name."""
from __future__ import annotations

from .._xp import get_array_module
from .._tensor_base import Tensor
from . import elementwise as E
from . import reduce as R


def amin(a, dim=None, keepdim=False):
    """The minimum over ``dim`` (all dimensions when None), as ``torch.amin``; the gradient is
    shared evenly among tied minima."""
    return E.neg(R.amax(E.neg(a), dim, keepdim))


def clamp_min(a, min):
    """``clamp(a, min=min)``."""
    return E.clamp(a, min=min)


def clamp_max(a, max):
    """``clamp(a, max=max)``."""
    return E.clamp(a, max=max)


def _data(x):
    return x._data if isinstance(x, Tensor) else x


def _logical(a, b, fn):
    x = _data(a)
    return Tensor._wrap(fn(get_array_module(x))(x.astype(bool), get_array_module(x).asarray(_data(b)).astype(bool)))


def logical_and(a, b):
    """Elementwise ``a and b`` (nonzero is True); a bool tensor."""
    return _logical(a, b, lambda xp: xp.logical_and)


def logical_or(a, b):
    """Elementwise ``a or b`` (nonzero is True); a bool tensor."""
    return _logical(a, b, lambda xp: xp.logical_or)


def logical_xor(a, b):
    """Elementwise ``a xor b`` (nonzero is True); a bool tensor."""
    return _logical(a, b, lambda xp: xp.logical_xor)


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|a - b| <= atol + rtol * |b|``; a bool tensor."""
    x = _data(a)
    xp = get_array_module(x)
    return Tensor._wrap(xp.isclose(x, _data(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def unbind(a, dim=0):
    """The slices of ``a`` along ``dim``, as a tuple (each a view; gradients flow back)."""
    dim = dim + a.dim() if dim < 0 else dim
    index = (slice(None),) * dim
    return tuple(a[index + (i,)] for i in range(a.shape[dim]))
