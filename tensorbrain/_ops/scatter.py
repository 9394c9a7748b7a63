"""Writing into a tensor at indices: ``scatter``, ``scatter_add``, ``index_add`` (and, through
the op table, their in-place forms ``scatter_`` / ``scatter_add_`` / ``index_add_``).

Each follows the torch function of the same name (https://pytorch.org/docs/stable/generated/
torch.Tensor.scatter_.html): ``index`` may be smaller than ``src`` in every dimension, and only
its extent of ``src`` is read.
"""
from __future__ import annotations

from .._xp import get_array_module
from .._tensor_base import TensorBase as Tensor
from .core import make
from .shape import _index_add


def _grid(xp, idx, d):
    """The full index tuple that puts ``idx`` along dimension ``d`` (the others run over idx)."""
    grid = list(xp.ix_(*[xp.arange(s) for s in idx.shape]))
    grid[d] = idx
    return tuple(grid)


def _check(op, x, idx, src=None):
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"{op}(): Expected dtype int64 for index, got {idx.dtype}")
    if idx.ndim != x.ndim or (src is not None and src.ndim != x.ndim):
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as "
                           f"self and src tensors (index {tuple(idx.shape)}, self "
                           f"{tuple(x.shape)})")


def scatter(a, dim, index, src=None, *, value=None, reduce=None):
    """``a`` with ``src`` written at ``index`` along ``dim``, as ``torch.scatter``.

    For ``dim=0``: ``out[index[i][j]][j] = src[i][j]``. Where ``index`` repeats a position, one of
    the writes wins (torch leaves which one unspecified).

    Args:
        a: the input tensor.
        dim: the dimension to index along (negative counts from the end).
        index: an int64 tensor with as many dimensions as ``a``.
        src: a tensor at least as large as ``index`` in every dimension, or a number.
        value: a number to write instead of ``src`` (torch's ``scatter(dim, index, value)``).
        reduce: not supported; raises NotImplementedError.

    Returns:
        Tensor: a new tensor of ``a``'s shape and dtype. Gradients flow to ``a`` (zero at the
        overwritten positions) and to ``src`` (at the positions read).

    Raises:
        NotImplementedError: ``reduce`` is given.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(3).scatter(0, tb.tensor([2, 0]), tb.tensor([5.0, 7.0])).tolist()
        [7.0, 0.0, 5.0]
    """
    if reduce is not None:
        raise NotImplementedError(f"scatter(reduce={reduce!r}) is not supported by TensorBrain "
                                  f"yet: use scatter_add, or scatter_reduce in torch")
    if src is None:
        src = value
    x, idx = a._data, index._data
    xp = get_array_module(x)
    is_tensor = isinstance(src, Tensor)
    s = src._data if is_tensor else None
    _check("scatter", x, idx, s)
    d = dim % max(x.ndim, 1)
    grid = _grid(xp, idx, d)
    out = x.copy()
    if is_tensor:
        out[grid] = s[tuple(slice(0, n) for n in idx.shape)]
    else:
        out[grid] = src

    def backward(g):
        ga = g.copy()
        ga[grid] = 0
        if not is_tensor:
            return (ga,)
        gs = xp.zeros(s.shape, dtype=g.dtype)
        gs[tuple(slice(0, n) for n in idx.shape)] = g[grid]
        return ga, gs
    return make(out, (a, src) if is_tensor else (a,), backward, "ScatterBackward")


def scatter_add(a, dim, index, src):
    """``a`` with ``src`` added at ``index`` along ``dim``, as ``torch.scatter_add``.

    For ``dim=0``: ``out[index[i][j]][j] += src[i][j]``; repeated positions add up.

    Args:
        a: the input tensor.
        dim: the dimension to index along (negative counts from the end).
        index: an int64 tensor with as many dimensions as ``a``.
        src: a tensor at least as large as ``index`` in every dimension.

    Returns:
        Tensor: a new tensor of ``a``'s shape and dtype; the gradient of ``a`` is the incoming
        one, that of ``src`` the incoming one read at ``index``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(3).scatter_add(0, tb.tensor([0, 2, 0]), tb.tensor([1.0, 2.0, 3.0])).tolist()
        [4.0, 0.0, 2.0]
    """
    x, idx, s = a._data, index._data, src._data
    xp = get_array_module(x)
    _check("scatter_add", x, idx, s)
    d = dim % max(x.ndim, 1)
    grid = _grid(xp, idx, d)
    region = tuple(slice(0, n) for n in idx.shape)
    out = x.copy()
    _index_add(xp, out, grid, s[region].astype(x.dtype, copy=False))

    def backward(g):
        gs = xp.zeros(s.shape, dtype=g.dtype)
        gs[region] = g[grid]
        return g, gs
    return make(out, (a, src), backward, "ScatterAddBackward0")


def index_add(a, dim, index, source, *, alpha=1):
    """``a`` with ``alpha * source`` added at ``index`` along ``dim``, as ``torch.index_add``.

    For ``dim=0``: ``out[index[i]] += alpha * source[i]``; repeated indices add up.

    Args:
        a: the input tensor.
        dim: the dimension to index along (negative counts from the end).
        index: a 1-D int64 tensor, as long as ``source`` is along ``dim``.
        source: a tensor of ``a``'s shape except along ``dim``.
        alpha: the factor on ``source``.

    Returns:
        Tensor: a new tensor of ``a``'s shape and dtype.

    Example:
        >>> import tensorbrain as tb
        >>> tb.ones(3, 2).index_add(0, tb.tensor([2, 2]), tb.ones(2, 2), alpha=10).tolist()
        [[1.0, 1.0], [1.0, 1.0], [21.0, 21.0]]
    """
    x, idx, s = a._data, index._data, source._data
    xp = get_array_module(x)
    if idx.ndim > 1 or idx.dtype.kind not in "iu":
        raise IndexError(f"index_add_(): Index is supposed to be a vector of integers, got shape "
                         f"{tuple(idx.shape)} and dtype {idx.dtype}")
    d = dim % max(x.ndim, 1)
    if s.ndim != x.ndim or s.shape[d] != idx.size:
        raise IndexError(f"index_add_(): source of shape {tuple(s.shape)} does not match self "
                         f"{tuple(x.shape)} with {idx.size} indices along dim {dim}")
    where = (slice(None),) * d + (idx.reshape(-1),)
    out = x.copy()
    _index_add(xp, out, where, (s * alpha if alpha != 1 else s).astype(x.dtype, copy=False))

    def backward(g):
        gs = xp.take(g, idx.reshape(-1), axis=d)
        return g, (gs * alpha if alpha != 1 else gs)
    return make(out, (a, source), backward, "IndexAddBackward0")
