"""Index queries, each as the torch function of the same name and without a gradient (they
return indices or booleans): ``searchsorted``, ``bucketize``, ``isin``, ``argwhere``,
``unique_consecutive``, ``tril_indices`` / ``triu_indices`` and ``nonzero_static``.
"""
from __future__ import annotations

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from .indexing import _data


# ***** index queries (no gradient) *****
def searchsorted(sorted_sequence, input, *, out_int32=False, right=False, side=None,
                 sorter=None):
    """The positions where ``input``'s values would go in ``sorted_sequence`` (along its last
    dimension) to keep it sorted, as ``torch.searchsorted``.

    Args:
        sorted_sequence: 1-D, or N-D sorted along the last dimension (one row per input row).
        input: the values (a tensor or a number).
        out_int32: return int32 instead of int64.
        right: the rightmost position among equal values.
        side: ``"left"`` or ``"right"`` (overrides ``right``).
        sorter: indices that sort ``sorted_sequence``, when it is not sorted itself.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.searchsorted(tb.tensor([1, 3, 5]), tb.tensor([0, 3, 6])).tolist()
        [0, 1, 3]
    """
    seq = sorted_sequence._data
    xp = get_array_module(seq)
    v = xp.asarray(_data(input))
    if sorter is not None:
        seq = xp.take_along_axis(seq, _data(sorter), axis=-1)
    how = side or ("right" if right else "left")
    if seq.ndim == 1:
        out = xp.searchsorted(seq, v, side=how)
    else:
        rows = seq.reshape(-1, seq.shape[-1])
        vals = v.reshape(rows.shape[0], -1)
        out = xp.stack([xp.searchsorted(r, q, side=how) for r, q in zip(rows, vals)])
        out = out.reshape(v.shape)
    return Tensor._wrap(xp.asarray(out).astype(np.int32 if out_int32 else np.int64))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each value given sorted ``boundaries``, as ``torch.bucketize``
    (``right=False``: ``boundaries[i-1] < x <= boundaries[i]``).

    Args:
        input: the values.
        boundaries: 1-D, sorted.
        out_int32: return int32.
        right: ``boundaries[i-1] <= x < boundaries[i]`` instead.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.bucketize(tb.tensor([1, 5, 9]), tb.tensor([1, 3, 5, 7])).tolist()
        [0, 2, 4]
    """
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element is among ``test_elements``, as ``torch.isin``.

    Args:
        elements: a tensor (or a number).
        test_elements: a tensor (or a number).
        assume_unique: accepted (a speed hint).
        invert: the opposite.

    Returns:
        Tensor: bool, ``elements``' shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.isin(tb.tensor([1, 2, 3]), tb.tensor([2, 5])).tolist()
        [False, True, False]
    """
    e = _data(elements)
    xp = get_array_module(e if isinstance(elements, Tensor) else _data(test_elements))
    return Tensor._wrap(xp.isin(xp.asarray(e), xp.asarray(_data(test_elements)), invert=invert))


def argwhere(a):
    """The indices of the nonzero elements, one row each, as ``torch.argwhere``.

    Args:
        a: the input tensor.

    Returns:
        Tensor: int64, ``(count, a.ndim)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.argwhere(tb.tensor([[0, 1], [1, 0]])).tolist()
        [[0, 1], [1, 0]]
    """
    x = a._data
    return Tensor._wrap(get_array_module(x).argwhere(x).astype(np.int64))


def unique_consecutive(a, return_inverse=False, return_counts=False, dim=None):
    """``a`` with each run of equal consecutive elements reduced to one, as
    ``torch.unique_consecutive``.

    Args:
        a: the input tensor.
        return_inverse: also return, for each element, its run's position.
        return_counts: also return each run's length.
        dim: the dimension whose slices are compared; None flattens first.

    Returns:
        Tensor or tuple: the values, then the inverse and/or counts when asked.

    Example:
        >>> import tensorbrain as tb
        >>> tb.unique_consecutive(tb.tensor([1, 1, 2, 2, 1])).tolist()
        [1, 2, 1]
    """
    x = a._data
    xp = get_array_module(x)
    if dim is None:
        flat = x.reshape(-1)
        change = xp.concatenate([xp.ones(min(flat.size, 1), dtype=bool), flat[1:] != flat[:-1]])
        vals = flat[change]
    else:
        d = dim % x.ndim
        moved = xp.moveaxis(x, d, 0).reshape(x.shape[d], -1)
        diff = (moved[1:] != moved[:-1]).any(axis=1)
        change = xp.concatenate([xp.ones(min(moved.shape[0], 1), dtype=bool), diff])
        vals = xp.compress(change, x, axis=d)
    out = [Tensor._wrap(vals)]
    run = xp.cumsum(change) - 1
    if return_inverse:
        out.append(Tensor._wrap(run.reshape(x.shape if dim is None else (-1,)).astype(np.int64)))
    if return_counts:
        starts = xp.flatnonzero(change)
        out.append(Tensor._wrap(xp.diff(xp.append(starts, change.size)).astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def _tri_indices(upper):
    def indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
        mask = np.triu(np.ones((row, col), dtype=bool), offset) if upper else \
            np.tril(np.ones((row, col), dtype=bool), offset)
        out = np.stack(np.nonzero(mask)).astype(dtype or np.int64)
        return Tensor._wrap(out) if device in (None, "cpu") else Tensor._wrap(out).to(device)
    name = "triu_indices" if upper else "tril_indices"
    indices.__name__ = indices.__qualname__ = name
    part = "upper" if upper else "lower"
    indices.__doc__ = (f"The row and column indices of the {part} triangle of a ``row x col`` "
                       f"matrix (``offset`` shifts the diagonal), as ``torch.{name}``.\n\nArgs:\n"
                       f"    row: the number of rows.\n    col: the number of columns.\n"
                       f"    offset: the diagonal's offset.\n    dtype: the dtype (int64).\n"
                       f"    device: the device.\n    layout: accepted.\n\nReturns:\n"
                       f"    Tensor: ``(2, count)``.\n\nExample:\n"
                       f"    >>> import tensorbrain as tb\n    >>> tb.{name}(2, 2).tolist()\n"
                       f"    {'[[0, 0, 1], [0, 1, 1]]' if upper else '[[0, 1, 1], [0, 0, 1]]'}\n")
    return indices


triu_indices = _tri_indices(True)
tril_indices = _tri_indices(False)


def nonzero_static(a, *, size, fill_value=-1):
    """The indices of the nonzero elements, padded with ``fill_value`` (or cut) to ``size``
    rows, as ``torch.nonzero_static``.

    Args:
        a: the input tensor.
        size: the number of rows.
        fill_value: the padding.

    Returns:
        Tensor: int64 ``(size, a.ndim)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nonzero_static(tb.tensor([0, 3, 0]), size=2).tolist()
        [[1], [-1]]
    """
    x = a._data
    xp = get_array_module(x)
    idx = xp.argwhere(x).astype(np.int64)[:size]
    out = xp.full((size, x.ndim), fill_value, dtype=np.int64)
    out[:idx.shape[0]] = idx
    return Tensor._wrap(out)
