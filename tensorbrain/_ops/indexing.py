"""Reading and writing at indices, the ops the other modules lack: ``index_copy``,
``index_fill``, ``index_put``, ``masked_scatter``, ``take``, ``put``, ``select_scatter``,
``slice_scatter``, ``diagonal_scatter``, ``scatter_reduce``, ``index_reduce`` (the index
queries, ``searchsorted``..., are in ``index_queries.py``). Each follows the torch function of the same name; the
writing ops return a new tensor (the op table makes their in-place ``*_`` forms) with gradients
to the input (zero where overwritten) and to the written values.
"""
from __future__ import annotations

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from . import shape as S
from .core import make, unbroadcast


def _data(x):
    return x._data if isinstance(x, Tensor) else x


def _along(d, idx):
    return (slice(None),) * d + (idx,)


def index_copy(a, dim, index, source):
    """``a`` with ``source``'s slices copied to the positions ``index`` along ``dim``, as
    ``torch.index_copy``.

    Args:
        a: the input tensor.
        dim: the dimension.
        index: 1-D int64 positions, one per slice of ``source``.
        source: the slices, ``a``'s shape with ``len(index)`` along ``dim``.

    Returns:
        Tensor: a new tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(3).index_copy(0, tb.tensor([2, 0]), tb.tensor([5.0, 7.0])).tolist()
        [7.0, 0.0, 5.0]
    """
    x, idx, s = a._data, _data(index).reshape(-1), source._data
    d = dim % max(x.ndim, 1)
    out = x.copy()
    out[_along(d, idx)] = s

    def backward(g):
        ga = g.copy()
        ga[_along(d, idx)] = 0
        return ga, g[_along(d, idx)]
    return make(out, (a, source), backward, "IndexCopyBackward")


def index_fill(a, dim, index, value):
    """``a`` with ``value`` at the positions ``index`` along ``dim``, as ``torch.index_fill``.

    Args:
        a: the input tensor.
        dim: the dimension.
        index: 1-D int64 positions.
        value: a number or a 0-d tensor.

    Returns:
        Tensor: a new tensor; no gradient reaches the filled slices.

    Example:
        >>> import tensorbrain as tb
        >>> tb.ones(3).index_fill(0, tb.tensor([1]), -1.0).tolist()
        [1.0, -1.0, 1.0]
    """
    x, idx = a._data, _data(index).reshape(-1)
    d = dim % max(x.ndim, 1)
    out = x.copy()
    out[_along(d, idx)] = _data(value)

    def backward(g):
        ga = g.copy()
        ga[_along(d, idx)] = 0
        return (ga,)
    return make(out, (a,), backward, "IndexFillBackward")


def index_put(a, indices, values, accumulate=False):
    """``a`` with ``values`` written (or, with ``accumulate``, added) at ``a[indices]``, as
    ``torch.index_put``.

    Args:
        a: the input tensor.
        indices: a tuple of index tensors (advanced indexing).
        values: broadcast to the indexed shape.
        accumulate: add instead of write (repeated positions add up).

    Returns:
        Tensor: a new tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(3).index_put((tb.tensor([0, 0]),), tb.tensor(1.0), accumulate=True).tolist()
        [2.0, 0.0, 0.0]
    """
    x = a._data
    xp = get_array_module(x)
    where = tuple(_data(i) for i in indices)
    v = _data(values)
    out = x.copy()
    if accumulate:
        sel_shape = out[where].shape
        S._index_add(xp, out, where, xp.broadcast_to(xp.asarray(v, dtype=x.dtype), sel_shape))
    else:
        out[where] = v

    def backward(g):
        ga = g if accumulate else g.copy()
        if not accumulate:
            ga[where] = 0
        gv = None
        if isinstance(values, Tensor) and values.requires_grad:
            gv = unbroadcast(g[where], values._data.shape)
        return ga, gv
    return make(out, (a, values if isinstance(values, Tensor) else None), backward,
                "IndexPutBackward")


def masked_scatter(a, mask, source):
    """``a`` with the positions where ``mask`` is True filled, in row-major order, from
    ``source``'s first elements, as ``torch.masked_scatter``.

    Args:
        a: the input tensor.
        mask: a bool tensor broadcastable to ``a``.
        source: at least as many elements as ``mask`` has True values.

    Returns:
        Tensor: a new tensor.

    Raises:
        RuntimeError: ``source`` has too few elements.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(3).masked_scatter(tb.tensor([True, False, True]), tb.tensor([1.0, 2.0])).tolist()
        [1.0, 0.0, 2.0]
    """
    x, s = a._data, source._data
    xp = get_array_module(x)
    m = xp.broadcast_to(_data(mask), x.shape)
    k = int(m.sum())
    if k > s.size:
        raise RuntimeError(f"masked_scatter: expected source to have at least {k} elements, "
                           f"got {s.size}")
    out = x.copy()
    out[m] = s.reshape(-1)[:k]

    def backward(g):
        gs = xp.zeros(s.size, dtype=g.dtype)
        gs[:k] = g[m]
        return xp.where(m, 0, g).astype(g.dtype, copy=False), gs.reshape(s.shape)
    return make(out, (a, source), backward, "MaskedScatterBackward")


def take(a, index):
    """The elements of ``a`` (read as 1-D) at ``index``, in ``index``'s shape, as
    ``torch.take``.

    Args:
        a: the input tensor.
        index: int64 positions into the flattened ``a``.

    Returns:
        Tensor: ``index``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[1, 2], [3, 4]]).take(tb.tensor([0, 3])).tolist()
        [1, 4]
    """
    return S.reshape(S.index_select(S.reshape(a, -1), 0, Tensor._wrap(_data(index).reshape(-1))),
                     *index.shape)


def put(a, index, source, accumulate=False):
    """``a`` (read as 1-D) with ``source`` written (or added) at ``index``, as ``torch.put``.

    Args:
        a: the input tensor.
        index: int64 positions into the flattened ``a``.
        source: as many values as ``index``.
        accumulate: add instead of write.

    Returns:
        Tensor: a new tensor of ``a``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(2, 2).put(tb.tensor([3]), tb.tensor([9.0])).tolist()
        [[0.0, 0.0], [0.0, 9.0]]
    """
    flat = S.reshape(a, -1)
    out = index_put(flat, (Tensor._wrap(_data(index).reshape(-1)),), S.reshape(source, -1),
                    accumulate)
    return S.reshape(out, *a.shape)


def select_scatter(a, src, dim, index):
    """``a`` with ``src`` written at ``index`` along ``dim``, as ``torch.select_scatter``.

    Args:
        a: the input tensor.
        src: the slice (``a``'s shape without ``dim``).
        dim: the dimension.
        index: the position.

    Returns:
        Tensor: a new tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(2, 2).select_scatter(tb.ones(2), 0, 1).tolist()
        [[0.0, 0.0], [1.0, 1.0]]
    """
    d = dim % a.ndim
    return _write(a, src, _along(d, int(index)), "SelectScatterBackward")


def slice_scatter(a, src, dim=0, start=None, end=None, step=1):
    """``a`` with ``src`` written at the slice ``start:end:step`` of ``dim``, as
    ``torch.slice_scatter``.

    Args:
        a: the input tensor.
        src: the values (the slice's shape).
        dim: the dimension.
        start: the slice's start.
        end: its end.
        step: its step.

    Returns:
        Tensor: a new tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(4).slice_scatter(tb.ones(2), start=2).tolist()
        [0.0, 0.0, 1.0, 1.0]
    """
    d = dim % a.ndim
    return _write(a, src, _along(d, slice(start, end, step)), "SliceScatterBackward")


def diagonal_scatter(a, src, offset=0, dim1=0, dim2=1):
    """``a`` with ``src`` written on the diagonal (as ``diagonal`` reads it), as
    ``torch.diagonal_scatter``.

    Args:
        a: the input tensor.
        src: the diagonal's values.
        offset: which diagonal.
        dim1: the first dimension of the planes.
        dim2: the second.

    Returns:
        Tensor: a new tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(2, 2).diagonal_scatter(tb.tensor([1.0, 2.0])).tolist()
        [[1.0, 0.0], [0.0, 2.0]]
    """
    x, s = a._data, src._data
    xp = get_array_module(x)
    d1, d2 = dim1 % x.ndim, dim2 % x.ndim
    k = xp.arange(s.shape[-1])
    r, c = k + max(-offset, 0), k + max(offset, 0)
    out = x.copy()
    xp.moveaxis(out, (d1, d2), (-2, -1))[..., r, c] = s

    def backward(g):
        ga = g.copy()
        xp.moveaxis(ga, (d1, d2), (-2, -1))[..., r, c] = 0
        return ga, xp.moveaxis(g, (d1, d2), (-2, -1))[..., r, c]
    return make(out, (a, src), backward, "DiagonalScatterBackward")


def _write(a, src, where, name):
    x, s = a._data, src._data
    out = x.copy()
    out[where] = s

    def backward(g):
        ga = g.copy()
        ga[where] = 0
        return ga, g[where]
    return make(out, (a, src), backward, name)


_REDUCE = {"sum": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum,
           "mean": np.add}


def scatter_reduce(a, dim, index, src, reduce, *, include_self=True):
    """``a`` with ``src``'s values reduced into the positions ``index`` along ``dim``, as
    ``torch.scatter_reduce`` (for ``dim=0``: ``out[index[i][j]][j] = reduce(..., src[i][j])``).

    Args:
        a: the input tensor.
        dim: the dimension.
        index: int64, as many dimensions as ``a``.
        src: the values (at least ``index``'s extent in every dimension).
        reduce: ``"sum"``, ``"prod"``, ``"mean"``, ``"amax"`` or ``"amin"``.
        include_self: whether ``a``'s own values at the written positions take part.

    Returns:
        Tensor: a new tensor; gradients as torch's (ties of amax/amin share evenly).

    Raises:
        RuntimeError: an unknown ``reduce``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(2).scatter_reduce(0, tb.tensor([0, 0, 1]), tb.tensor([1.0, 4.0, 2.0]), "amax").tolist()
        [4.0, 2.0]
    """
    if reduce not in _REDUCE:
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    x, idx, s = a._data, index._data, src._data
    xp = get_array_module(x)
    d = dim % max(x.ndim, 1)
    grid = list(xp.ix_(*[xp.arange(n) for n in idx.shape]))
    grid[d] = idx
    where = tuple(grid)
    vals = s[tuple(slice(0, n) for n in idx.shape)]
    touched = xp.zeros(x.shape, dtype=bool)
    touched[where] = True
    init = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce]
    out = x.astype(np.float64 if reduce == "mean" and x.dtype.kind in "biu" else x.dtype,
                   copy=True)
    if not include_self:
        out[touched] = init if x.dtype.kind == "f" or reduce in ("sum", "mean", "prod") else \
            (np.iinfo(x.dtype).min if reduce == "amax" else np.iinfo(x.dtype).max)
    ufunc = _REDUCE[reduce]
    if xp is np:
        ufunc.at(out, where, vals)
    else:   # CuPy: scatter_add / scatter_max / scatter_min
        import cupyx  # type: ignore
        {"sum": cupyx.scatter_add, "mean": cupyx.scatter_add, "amax": cupyx.scatter_max,
         "amin": cupyx.scatter_min}[reduce](out, where, vals)
    counts = None
    if reduce == "mean":
        counts = xp.zeros(x.shape, dtype=np.int64)
        S._index_add(xp, counts, where, xp.ones(vals.shape, dtype=np.int64))
        counts = counts + (1 if include_self else 0)
        out = xp.where(touched, out / xp.maximum(counts, 1), out)
        if x.dtype.kind in "biu":
            out = xp.floor(out)
    out = out.astype(x.dtype, copy=False)

    def backward(g):
        ga = g.copy()
        gs = xp.zeros(s.shape, dtype=g.dtype)
        sl = tuple(slice(0, n) for n in idx.shape)
        if reduce == "sum":
            if not include_self:
                ga[touched] = 0
            gs[sl] = g[where]
        elif reduce == "mean":
            share = g / xp.maximum(counts, 1)
            ga = xp.where(touched, share if include_self else 0, g)
            gs[sl] = share[where]
        elif reduce == "prod":
            with np.errstate(divide="ignore", invalid="ignore"):
                ga = xp.where(touched, g * out / x, g) if include_self else xp.where(touched, 0, g)
                gs[sl] = (g * out)[where] / vals
        else:   # amax / amin: the elements equal to the result share the gradient
            hit_self = touched & (x == out) if include_self else xp.zeros(x.shape, dtype=bool)
            hit_src = vals == out[where]
            n = hit_self.astype(g.dtype)
            S._index_add(xp, n, where, hit_src.astype(g.dtype))
            share = g / xp.maximum(n, 1)
            ga = xp.where(touched, xp.where(hit_self, share, 0), g)
            gs[sl] = xp.where(hit_src, share[where], 0)
        return ga.astype(g.dtype, copy=False), gs
    return make(out, (a, src), backward, "ScatterReduceBackward")


def index_reduce(a, dim, index, source, reduce, *, include_self=True):
    """``a`` with ``source``'s slices reduced into the positions ``index`` along ``dim``, as
    ``torch.index_reduce`` (``reduce``: ``"prod"``, ``"mean"``, ``"amax"``, ``"amin"``).

    Args:
        a: the input tensor.
        dim: the dimension.
        index: 1-D int64, one position per slice of ``source``.
        source: the slices.
        reduce: the reduction.
        include_self: whether ``a``'s own values take part.

    Returns:
        Tensor: a new tensor (gradients as :func:`scatter_reduce`'s).

    Example:
        >>> import tensorbrain as tb
        >>> tb.ones(2).index_reduce(0, tb.tensor([0, 0]), tb.tensor([2.0, 3.0]), "prod").tolist()
        [6.0, 1.0]
    """
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    d = dim % max(a.ndim, 1)
    xp = get_array_module(a._data)
    shape = [1] * source.ndim
    shape[d] = -1
    idx = xp.broadcast_to(_data(index).reshape(shape), source.shape)
    return scatter_reduce(a, d, Tensor._wrap(xp.ascontiguousarray(idx)), source, reduce,
                          include_self=include_self)
