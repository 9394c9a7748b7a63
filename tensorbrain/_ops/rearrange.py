"""Moving and repeating elements, and the diagonal: ``roll``, ``diag``, ``trace``,
``repeat_interleave``, ``meshgrid``, ``kron``. Each follows the torch function of the same name
and is differentiable where torch's is; ``meshgrid`` and ``kron`` are written from reshape,
expand and mul, so their gradients are those ops'."""
from __future__ import annotations

import numpy as np

from .._xp import get_array_module
from .._tensor_base import TensorBase as Tensor
from . import elementwise as E
from . import shape as S
from .core import make
from .shape import _index_add


def roll(a, shifts, dims=None):
    """``a`` shifted circularly by ``shifts`` along ``dims``, as ``torch.roll``.

    Args:
        a: the input tensor.
        shifts: an int, or a tuple of ints (one per dimension of ``dims``).
        dims: a dimension or a tuple of them; None: roll the flattened tensor and restore the
            shape.

    Returns:
        Tensor: a tensor of ``a``'s shape and dtype.

    Example:
        >>> import tensorbrain as tb
        >>> tb.arange(5).roll(2).tolist()
        [3, 4, 0, 1, 2]
        >>> tb.tensor([[1, 2], [3, 4]]).roll(1, dims=1).tolist()
        [[2, 1], [4, 3]]
    """
    x = a._data
    xp = get_array_module(x)
    if isinstance(shifts, (tuple, list)) != isinstance(dims, (tuple, list)) and dims is not None:
        shifts, dims = tuple(np.atleast_1d(shifts)), tuple(np.atleast_1d(dims))
    if isinstance(shifts, (tuple, list)) and dims is not None and len(shifts) != len(dims):
        raise RuntimeError(f"roll: shifts and dims must align, got {len(shifts)} shifts and "
                           f"{len(dims)} dims")
    back = tuple(-s for s in shifts) if isinstance(shifts, (tuple, list)) else -shifts
    return make(xp.roll(x, shifts, axis=dims), (a,), lambda g: (xp.roll(g, back, axis=dims),),
                "RollBackward0")


def _diag_positions(xp, shape, k):
    """Row and column indices of diagonal ``k`` of a matrix of ``shape``."""
    rows, cols = shape
    n = max(0, min(rows + min(k, 0), cols - max(k, 0)))
    r = xp.arange(n) - min(k, 0)
    return r, r + k


def diag(a, diagonal=0):
    """The matrix with ``a`` on a diagonal (1-D ``a``), or a matrix's diagonal (2-D ``a``), as
    ``torch.diag``.

    Args:
        a: a 1-D or 2-D tensor.
        diagonal: which diagonal: 0 the main one, > 0 above it, < 0 below it.

    Returns:
        Tensor: a square 2-D tensor (of side ``len(a) + |diagonal|``) or a 1-D copy of the
        diagonal.

    Raises:
        RuntimeError: ``a`` is neither 1-D nor 2-D.

    Example:
        >>> import tensorbrain as tb
        >>> tb.diag(tb.tensor([1, 2])).tolist()
        [[1, 0], [0, 2]]
        >>> tb.arange(9).reshape(3, 3).diag(1).tolist()
        [1, 5]
    """
    x = a._data
    xp = get_array_module(x)
    if x.ndim == 1:
        out = xp.diag(x, diagonal)
        return make(out, (a,), lambda g: (xp.diagonal(g, diagonal).copy(),), "DiagEmbedBackward0")
    if x.ndim != 2:
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {x.ndim}D")
    r, c = _diag_positions(xp, x.shape, diagonal)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        gx[r, c] = g
        return (gx,)
    return make(x[r, c], (a,), backward, "DiagonalBackward0")


def trace(a):
    """The sum of a matrix's main diagonal, as ``torch.trace``.

    Args:
        a: a 2-D tensor.

    Returns:
        Tensor: a 0-d tensor; int64 for an integer or bool ``a``.

    Raises:
        RuntimeError: ``a`` is not 2-D.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[1.0, 2.0], [3.0, 4.0]]).trace().item()
        5.0
    """
    x = a._data
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {x.ndim}")
    xp = get_array_module(x)
    r, c = _diag_positions(xp, x.shape, 0)
    out = x[r, c].sum(dtype=np.int64 if x.dtype.kind in "biu" else None)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        gx[r, c] = g
        return (gx,)
    return make(out, (a,), backward, "TraceBackward0")


def repeat_interleave(a, repeats=None, dim=None, *, output_size=None):
    """Each element of ``a`` repeated ``repeats`` times in a row, as ``torch.repeat_interleave``.

    ``tb.repeat_interleave(r)`` with one int64 tensor ``r`` repeats ``arange(len(r))`` (the
    form that turns counts into segment ids).

    Args:
        a: the input tensor.
        repeats: an int, or an int64 tensor with one count per element along ``dim`` (or one
            count for all).
        dim: the dimension to repeat along; None: the flattened tensor.
        output_size: accepted for torch's signature (the total length; checked when given).

    Returns:
        Tensor: the repeated tensor; the gradient of each element is the sum over its copies.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[1, 2], [3, 4]]).repeat_interleave(2).tolist()
        [1, 1, 2, 2, 3, 3, 4, 4]
        >>> tb.tensor([[1, 2], [3, 4]]).repeat_interleave(tb.tensor([1, 2]), dim=0).tolist()
        [[1, 2], [3, 4], [3, 4]]
        >>> tb.repeat_interleave(tb.tensor([2, 0, 1])).tolist()
        [0, 0, 2]
    """
    if repeats is None:
        r = a._data
        xp = get_array_module(r)
        return Tensor._wrap(xp.repeat(xp.arange(r.shape[0], dtype=np.int64), r))
    if dim is None:
        a, dim = S.reshape(a, -1), 0
    x = a._data
    xp = get_array_module(x)
    d = dim % max(x.ndim, 1)
    r = repeats._data if isinstance(repeats, Tensor) else repeats
    if getattr(r, "ndim", 0) == 1 and r.shape[0] == 1:
        r = r[0]
    out = xp.repeat(x, r, axis=d)
    if output_size is not None and out.shape[d] != output_size:
        raise RuntimeError(f"repeat_interleave: output_size {output_size} does not match the "
                           f"total of repeats {out.shape[d]}")
    source = xp.repeat(xp.arange(x.shape[d]), r)   # which input element each output one copies

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        _index_add(xp, gx, (slice(None),) * d + (source,), g)
        return (gx,)
    return make(out, (a,), backward, "RepeatInterleaveBackward0")


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids from 1-D tensors, as ``torch.meshgrid``.

    Args:
        *tensors: 1-D (or 0-d) tensors, or one list of them.
        indexing: ``'ij'`` (torch's default: output dimension i runs over ``tensors[i]``) or
            ``'xy'`` (NumPy's default: the first two dimensions swapped).

    Returns:
        tuple: one tensor per input, all of shape ``(len(t0), len(t1), ...)`` (``'xy'``:
        ``(len(t1), len(t0), ...)``); gradients sum back to the inputs.

    Example:
        >>> import tensorbrain as tb
        >>> rows, cols = tb.meshgrid(tb.tensor([1, 2]), tb.tensor([5, 6, 7]), indexing="ij")
        >>> rows.tolist(), cols.tolist()
        ([[1, 1, 1], [2, 2, 2]], [[5, 6, 7], [5, 6, 7]])
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"torch.meshgrid: indexing must be one of 'xy' or 'ij', got {indexing!r}")
    flat = [S.reshape(t, -1) for t in tensors]
    axis = list(range(len(flat)))      # the output dimension each input runs along
    if indexing == "xy" and len(flat) >= 2:
        axis[0], axis[1] = 1, 0
    shape = [0] * len(flat)
    for t, ax in zip(flat, axis):
        shape[ax] = t.shape[0]
    out = []
    for t, ax in zip(flat, axis):
        view = [1] * len(flat)
        view[ax] = -1
        out.append(S.expand(S.reshape(t, *view), *shape))
    return tuple(out)


def kron(a, b):
    """The Kronecker product, as ``torch.kron``: block ``(i, j)`` of the result is
    ``a[i, j] * b`` (in any number of dimensions).

    Args:
        a: a tensor.
        b: a tensor (the one with fewer dimensions gets leading size-1 ones).

    Returns:
        Tensor: of shape ``a.shape[i] * b.shape[i]`` per dimension, the dtype ``a * b`` has.

    Example:
        >>> import tensorbrain as tb
        >>> tb.kron(tb.tensor([[1, 2], [3, 4]]), tb.tensor([[1, 10]])).tolist()
        [[1, 10, 2, 20], [3, 30, 4, 40]]
    """
    n = max(a.dim(), b.dim())
    sa = (1,) * (n - a.dim()) + tuple(a.shape)
    sb = (1,) * (n - b.dim()) + tuple(b.shape)
    # interleave: a as (a0, 1, a1, 1, ...), b as (1, b0, 1, b1, ...); the product's pairs of
    # dimensions then merge into (a0 * b0, a1 * b1, ...)
    ia = [s for d in sa for s in (d, 1)]
    ib = [s for d in sb for s in (1, d)]
    prod = E.mul(S.reshape(a, *ia), S.reshape(b, *ib))
    return S.reshape(prod, *[x * y for x, y in zip(sa, sb)])
