"""Picking and counting elements: ``nonzero``, ``masked_select``, ``unique``, ``bincount``,
``count_nonzero``, ``take_along_dim``, ``median``, ``kthvalue``. Each follows the torch function
of the same name; those that return elements of the input are differentiable, the gradient
going to the elements picked."""
from __future__ import annotations

import numpy as np

from .._xp import get_array_module
from .._tensor_base import TensorBase as Tensor
from ..return_types import MinMax
from . import shape as S
from .core import make, unbroadcast
from .reduce import _axes


def nonzero(a, *, as_tuple=False):
    """The indices of the nonzero elements, as ``torch.nonzero``.

    Args:
        a: the input tensor.
        as_tuple: return one 1-D index tensor per dimension instead of one 2-D tensor.

    Returns:
        Tensor: an int64 tensor of shape ``(count, a.dim())``, one row per nonzero element in
        row-major order; or, with ``as_tuple``, a tuple of ``a.dim()`` int64 tensors (one for a
        0-d input).

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[0, 3], [4, 0]]).nonzero().tolist()
        [[0, 1], [1, 0]]
        >>> [t.tolist() for t in tb.nonzero(tb.tensor([0, 5, 6]), as_tuple=True)]
        [[1, 2]]
    """
    x = a._data
    xp = get_array_module(x)
    if as_tuple:
        return tuple(Tensor._wrap(i.astype(np.int64)) for i in xp.nonzero(xp.atleast_1d(x)))
    return Tensor._wrap(xp.argwhere(x).astype(np.int64))


def masked_select(a, mask):
    """The elements of ``a`` where ``mask`` is True, as a 1-D tensor (``torch.masked_select``).

    Args:
        a: the input tensor.
        mask: a bool tensor; ``a`` and ``mask`` are broadcast together.

    Returns:
        Tensor: a 1-D tensor of ``a``'s dtype, in row-major order; the gradient goes to the
        selected elements.

    Raises:
        RuntimeError: ``mask`` is not bool.

    Example:
        >>> import tensorbrain as tb
        >>> x = tb.tensor([[1.0, -2.0], [3.0, -4.0]])
        >>> x.masked_select(x > 0).tolist()
        [1.0, 3.0]
    """
    x, m = a._data, mask._data
    if m.dtype != np.bool_:
        raise RuntimeError(f"masked_select: expected BoolTensor for mask, got {m.dtype}")
    xp = get_array_module(x)
    shape = xp.broadcast_shapes(x.shape, m.shape)
    mb = xp.broadcast_to(m, shape)
    out = xp.broadcast_to(x, shape)[mb]

    def backward(g):
        full = xp.zeros(shape, dtype=g.dtype)
        full[mb] = g
        return (unbroadcast(full, x.shape),)
    return make(out, (a,), backward, "MaskedSelectBackward0")


def unique(a, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """The distinct elements of ``a``, as ``torch.unique`` over the flattened tensor.

    Args:
        a: the input tensor.
        sorted: accepted for torch's signature; the elements always come sorted ascending
            (torch also sorts on CPU).
        return_inverse: also return, for each element of ``a``, the index of its value in the
            result (a tensor of ``a``'s shape).
        return_counts: also return how often each distinct value occurs.
        dim: only None is supported.

    Returns:
        Tensor or tuple: the distinct values (1-D, ``a``'s dtype), followed by the int64
        inverse and counts tensors when asked for.

    Raises:
        NotImplementedError: ``dim`` is given (unique slices along a dimension).

    Example:
        >>> import tensorbrain as tb
        >>> values, inverse = tb.unique(tb.tensor([3, 1, 3, 2]), return_inverse=True)
        >>> values.tolist(), inverse.tolist()
        ([1, 2, 3], [2, 0, 2, 1])
    """
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not supported by TensorBrain yet: only "
                                  "dim=None (the flattened tensor)")
    x = a._data
    xp = get_array_module(x)
    res = xp.unique(x.reshape(-1), return_inverse=True, return_counts=True)
    values, inverse, counts = res[0], res[1], res[2]
    out = [Tensor._wrap(values)]
    if return_inverse:
        out.append(Tensor._wrap(inverse.reshape(x.shape).astype(np.int64)))
    if return_counts:
        out.append(Tensor._wrap(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(a, weights=None, minlength=0):
    """How often each value 0, 1, ... occurs in ``a``, as ``torch.bincount``.

    Args:
        a: a 1-D tensor of non-negative integers.
        weights: a tensor of ``a``'s shape; each occurrence then counts its weight.
        minlength: the least length of the result.

    Returns:
        Tensor: of length ``max(a.max() + 1, minlength)``; int64, or with ``weights`` their
        dtype when float32 or float64 and float64 otherwise (as torch).

    Raises:
        RuntimeError: ``a`` is not 1-D integers, or holds a negative value.

    Example:
        >>> import tensorbrain as tb
        >>> tb.bincount(tb.tensor([0, 2, 2])).tolist()
        [1, 0, 2]
        >>> tb.tensor([0, 2]).bincount(tb.tensor([0.5, 2.0]), minlength=4).tolist()
        [0.5, 0.0, 2.0, 0.0]
    """
    x = a._data
    xp = get_array_module(x)
    if x.ndim != 1 or x.dtype.kind not in "iu":
        raise RuntimeError(f"bincount only supports 1-d non-negative integral inputs, got shape "
                           f"{tuple(x.shape)} and dtype {x.dtype}")
    if x.size and int(x.min()) < 0:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs")
    if weights is None:
        return Tensor._wrap(xp.bincount(x, minlength=minlength).astype(np.int64))
    w = weights._data
    dtype = w.dtype if w.dtype in (np.float32, np.float64) else np.float64
    return Tensor._wrap(xp.bincount(x, weights=w, minlength=minlength).astype(dtype))


def count_nonzero(a, dim=None):
    """The number of nonzero elements over ``dim``, as ``torch.count_nonzero``.

    Args:
        a: the input tensor.
        dim: a dimension or a tuple of them; None for all.

    Returns:
        Tensor: int64 counts, the reduced dimensions removed.

    Example:
        >>> import tensorbrain as tb
        >>> tb.count_nonzero(tb.tensor([[0, 1], [2, 3]]), dim=0).tolist()
        [1, 2]
    """
    x = a._data
    return Tensor._wrap(get_array_module(x).asarray(
        (x != 0).sum(axis=_axes(dim, x.ndim)), dtype=np.int64))


def take_along_dim(a, indices, dim=None):
    """The elements of ``a`` at ``indices`` along ``dim``, as ``torch.take_along_dim``.

    Like :func:`gather`, but ``a`` and ``indices`` broadcast together in the other dimensions,
    and with ``dim=None`` both are flattened first.

    Args:
        a: the input tensor.
        indices: an int64 tensor (as ``argsort`` or ``argmax(keepdim=True)`` gives).
        dim: the dimension to index along; None: the flattened tensor.

    Returns:
        Tensor: the picked elements; the gradient goes to them (adding up at repeats).

    Example:
        >>> import tensorbrain as tb
        >>> x = tb.tensor([[10.0, 30.0, 20.0], [60.0, 40.0, 50.0]])
        >>> tb.take_along_dim(x, x.argsort(dim=1), dim=1).tolist()
        [[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]]
    """
    if dim is None:
        return S.gather(S.reshape(a, -1), 0, Tensor._wrap(indices._data.reshape(-1)))
    x, idx = a._data, indices._data
    xp = get_array_module(x)
    if idx.ndim != x.ndim:
        raise RuntimeError(f"take_along_dim(): input and indices should have the same number of "
                           f"dimensions, but got {x.ndim} and {idx.ndim}")
    d = dim % x.ndim
    xs, ins = list(x.shape), list(idx.shape)
    xs[d] = ins[d] = 1
    common = xp.broadcast_shapes(tuple(xs), tuple(ins))
    a_shape = tuple(x.shape[d] if i == d else n for i, n in enumerate(common))
    i_shape = tuple(idx.shape[d] if i == d else n for i, n in enumerate(common))
    src = a if a_shape == x.shape else S.expand(a, *a_shape)
    return S.gather(src, d, Tensor._wrap(xp.broadcast_to(idx, i_shape)))


def _kth(a, k, dim, keepdim, nan_first):
    """``(values, indices)`` of the k-th smallest (0-based) along ``dim``, as a gather."""
    x = a._data
    xp = get_array_module(x)
    d = dim % x.ndim
    idx = xp.take(xp.argsort(x, axis=d, kind="stable"), [k], axis=d)
    if nan_first and x.dtype.kind == "f":   # torch.median: NaN, at its first position, wins
        nan = xp.isnan(x)
        idx = xp.where(nan.any(axis=d, keepdims=True), nan.argmax(axis=d, keepdims=True), idx)
    idx = idx.astype(np.int64)
    values = S.gather(a, d, Tensor._wrap(idx))
    if not keepdim:
        values, idx = S.squeeze(values, d), xp.squeeze(idx, d)
    return MinMax(values, Tensor._wrap(idx))


def median(a, dim=None, keepdim=False):
    """The median, as ``torch.median``: for an even count, the lower of the two middle values.

    Args:
        a: the input tensor.
        dim: the dimension to reduce; None: the median of all elements, with no indices.
        keepdim: keep ``dim`` with size 1.

    Returns:
        Tensor or (values, indices): with ``dim=None`` a 0-d tensor; else a named tuple of the
        medians and their int64 positions along ``dim``. A NaN in a slice makes its median NaN
        (as torch). The gradient goes to the chosen element.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([4.0, 1.0, 3.0, 2.0]).median().item()
        2.0
        >>> values, indices = tb.tensor([[1.0, 5.0, 2.0], [9.0, 7.0, 8.0]]).median(dim=1)
        >>> values.tolist(), indices.tolist()
        ([2.0, 8.0], [2, 2])
    """
    if dim is None:
        flat = S.reshape(a, -1)
        return S.reshape(_kth(flat, (flat.shape[0] - 1) // 2, 0, False, True).values)
    n = a.shape[dim] if a.dim() else 1
    return _kth(a if a.dim() else S.reshape(a, 1), (n - 1) // 2, dim, keepdim and a.dim() > 0, True)


def kthvalue(a, k, dim=-1, keepdim=False):
    """The k-th smallest element along ``dim`` and its position, as ``torch.kthvalue``.

    Args:
        a: the input tensor.
        k: which one, counting from 1 for the smallest.
        dim: the dimension to reduce.
        keepdim: keep ``dim`` with size 1.

    Returns:
        (values, indices): a named tuple of the values and their int64 positions along ``dim``;
        the gradient goes to the chosen elements.

    Raises:
        RuntimeError: ``k`` is out of range.

    Example:
        >>> import tensorbrain as tb
        >>> tb.kthvalue(tb.tensor([5.0, 1.0, 4.0, 2.0]), 2).values.item()
        2.0
    """
    n = a.shape[dim] if a.dim() else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    return _kth(a if a.dim() else S.reshape(a, 1), k - 1, dim, keepdim and a.dim() > 0, False)
