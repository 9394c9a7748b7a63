"""Joining and splitting ops written from the shape ops (so their gradients are those ops'):
``atleast_1d/2d/3d``, ``vstack``/``row_stack``/``hstack``/``dstack``/``column_stack``,
``tensor_split``/``hsplit``/``vsplit``/``dsplit`` and ``split_with_sizes``; each follows the
torch function of the same name.
"""
from __future__ import annotations

import numbers


from .._tensor_base import TensorBase as Tensor
from . import shape as S
from .combine import _dim


# ***** joining *****
def atleast_1d(*tensors):
    """Each tensor with at least one dimension, as ``torch.atleast_1d``.

    Args:
        *tensors: tensors, or one sequence of them.

    Returns:
        Tensor or tuple[Tensor, ...]: one tensor for one argument.

    Example:
        >>> import tensorbrain as tb
        >>> tb.atleast_1d(tb.tensor(3)).shape
        tb.Size([1])
    """
    return _atleast(tensors, 1)


def atleast_2d(*tensors):
    """Each tensor with at least two dimensions (new ones in front), as ``torch.atleast_2d``.

    Args:
        *tensors: tensors, or one sequence of them.

    Returns:
        Tensor or tuple[Tensor, ...]: one tensor for one argument.

    Example:
        >>> import tensorbrain as tb
        >>> tb.atleast_2d(tb.tensor([1, 2])).shape
        tb.Size([1, 2])
    """
    return _atleast(tensors, 2)


def atleast_3d(*tensors):
    """Each tensor with at least three dimensions, as ``torch.atleast_3d`` (a 2-D ``(m, n)``
    becomes ``(m, n, 1)``).

    Args:
        *tensors: tensors, or one sequence of them.

    Returns:
        Tensor or tuple[Tensor, ...]: one tensor for one argument.

    Example:
        >>> import tensorbrain as tb
        >>> tb.atleast_3d(tb.ones(2, 3)).shape
        tb.Size([2, 3, 1])
    """
    return _atleast(tensors, 3)


def _atleast(tensors, n):
    single = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    seq = tensors[0] if len(tensors) == 1 and not single else tensors
    out = []
    for t in seq:
        if t.ndim >= n:
            out.append(t)
        elif n == 3 and t.ndim == 2:
            out.append(S.unsqueeze(t, -1))
        elif n == 3 and t.ndim == 1:
            out.append(S.reshape(t, 1, -1, 1))
        else:
            out.append(S.reshape(t, *((1,) * (n - t.ndim - (0 if t.ndim else 1))),
                                 *(t.shape or (1,))) if n > 1 or t.ndim == 0 else t)
    return out[0] if single else tuple(out)


def vstack(tensors):
    """Tensors stacked along rows (1-D ones become rows first), as ``torch.vstack``.

    Args:
        tensors: a sequence of tensors.

    Returns:
        Tensor: ``cat(atleast_2d(tensors), 0)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.vstack([tb.tensor([1, 2]), tb.tensor([3, 4])]).tolist()
        [[1, 2], [3, 4]]
    """
    return S.cat(list(_atleast(list(tensors), 2)), 0)


row_stack = vstack


def hstack(tensors):
    """Tensors concatenated along columns (along the only dimension for 1-D ones), as
    ``torch.hstack``.

    Args:
        tensors: a sequence of tensors.

    Returns:
        Tensor: the concatenation.

    Example:
        >>> import tensorbrain as tb
        >>> tb.hstack([tb.tensor([1]), tb.tensor([2, 3])]).tolist()
        [1, 2, 3]
    """
    ts = list(_atleast(list(tensors), 1))
    return S.cat(ts, 0 if ts[0].ndim == 1 else 1)


def dstack(tensors):
    """Tensors stacked along a third dimension, as ``torch.dstack``.

    Args:
        tensors: a sequence of tensors.

    Returns:
        Tensor: ``cat(atleast_3d(tensors), 2)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.dstack([tb.tensor([1, 2]), tb.tensor([3, 4])]).shape
        tb.Size([1, 2, 2])
    """
    return S.cat(list(_atleast(list(tensors), 3)), 2)


def column_stack(tensors):
    """Tensors as columns of a matrix (1-D ones become columns), as ``torch.column_stack``.

    Args:
        tensors: a sequence of tensors.

    Returns:
        Tensor: 2-D.

    Example:
        >>> import tensorbrain as tb
        >>> tb.column_stack([tb.tensor([1, 2]), tb.tensor([3, 4])]).tolist()
        [[1, 3], [2, 4]]
    """
    cols = [S.reshape(t, -1, 1) if t.ndim <= 1 else t for t in tensors]
    return S.cat(cols, 1)


# ***** splitting *****
def tensor_split(a, indices_or_sections, dim=0):
    """``a`` split into ``n`` nearly equal parts, or at the given indices, along ``dim``, as
    ``torch.tensor_split`` (NumPy's ``array_split`` rule: the first parts get one more).

    Args:
        a: the input tensor.
        indices_or_sections: a number of parts, or a sequence of split indices.
        dim: the dimension.

    Returns:
        tuple[Tensor, ...]: views.

    Example:
        >>> import tensorbrain as tb
        >>> [t.tolist() for t in tb.arange(5).tensor_split(2)]
        [[0, 1, 2], [3, 4]]
    """
    d = _dim(dim, a.ndim)
    n = a.shape[d]
    if isinstance(indices_or_sections, Tensor):
        indices_or_sections = indices_or_sections.tolist()
    if isinstance(indices_or_sections, numbers.Integral):
        k = int(indices_or_sections)
        if k < 1:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {k}")
        q, r = divmod(n, k)
        bounds = [i * q + min(i, r) for i in range(k + 1)]
    else:
        bounds = [0] + [min(max(int(i), 0), n) for i in indices_or_sections] + [n]
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        sl = (slice(None),) * d + (slice(lo, max(lo, hi)),)
        parts.append(S.getitem(a, sl))
    return tuple(parts)


def hsplit(a, indices_or_sections):
    """``tensor_split`` along columns (dimension 1, or 0 for 1-D), as ``torch.hsplit``.

    Args:
        a: the input tensor.
        indices_or_sections: parts or indices.

    Returns:
        tuple[Tensor, ...]: the parts.

    Example:
        >>> import tensorbrain as tb
        >>> [t.shape[1] for t in tb.ones(2, 4).hsplit(2)]
        [2, 2]
    """
    return _split_even("hsplit", a, indices_or_sections, 0 if a.ndim == 1 else 1)


def vsplit(a, indices_or_sections):
    """``tensor_split`` along rows (dimension 0), as ``torch.vsplit``.

    Args:
        a: a tensor of at least 2 dimensions.
        indices_or_sections: parts or indices.

    Returns:
        tuple[Tensor, ...]: the parts.

    Example:
        >>> import tensorbrain as tb
        >>> [t.shape[0] for t in tb.ones(4, 2).vsplit(2)]
        [2, 2]
    """
    return _split_even("vsplit", a, indices_or_sections, 0)


def dsplit(a, indices_or_sections):
    """``tensor_split`` along depth (dimension 2), as ``torch.dsplit``.

    Args:
        a: a tensor of at least 3 dimensions.
        indices_or_sections: parts or indices.

    Returns:
        tuple[Tensor, ...]: the parts.

    Example:
        >>> import tensorbrain as tb
        >>> [t.shape[2] for t in tb.ones(1, 1, 4).dsplit(2)]
        [2, 2]
    """
    return _split_even("dsplit", a, indices_or_sections, 2)


def _split_even(name, a, sections, dim):
    if isinstance(sections, numbers.Integral) and a.shape[dim] % sections:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the "
                           f"size of the dimension {a.shape[dim]} is not divisible by the split_"
                           f"size {sections}!")
    return tensor_split(a, sections, dim)


def split_with_sizes(a, split_sizes, dim=0):
    """``a`` split into parts of the given sizes along ``dim``, as
    ``torch.split_with_sizes``.

    Args:
        a: the input tensor.
        split_sizes: the sizes; they must add up to the dimension's size.
        dim: the dimension.

    Returns:
        tuple[Tensor, ...]: views.

    Raises:
        RuntimeError: the sizes do not add up.

    Example:
        >>> import tensorbrain as tb
        >>> [t.tolist() for t in tb.arange(3).split_with_sizes([1, 2])]
        [[0], [1, 2]]
    """
    sizes = [int(s) for s in split_sizes]
    d = _dim(dim, a.ndim)
    if sum(sizes) != a.shape[d]:
        raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to "
                           f"{a.shape[d]} (input tensor's size at dimension {dim}), but got "
                           f"split_sizes={sizes}")
    return tuple(S.split(a, sizes, d))
