"""Reshaping and view ops written from the shape ops (so their gradients are those ops'):
``movedim``, ``ravel``, ``tile``, ``broadcast_to``, ``select``, ``diagonal``, ``unfold``,
``as_strided``, ``fliplr``, ``flipud``, ``rot90``, ``broadcast_tensors``, ``block_diag``,
``cartesian_prod``, ``combinations``, ``diag_embed``, ``diagflat``, ``narrow_copy``; each follows
the torch function of the same name. Joining and splitting (``vstack``, ``tensor_split``...) are
in ``joining.py``.
"""
from __future__ import annotations

import itertools
import numbers

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from . import shape as S
from .core import make, make_view


def _dim(d, ndim):
    if not -max(ndim, 1) <= d < max(ndim, 1):
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-max(ndim, 1)}, {max(ndim, 1) - 1}], but got {d})")
    return d % max(ndim, 1)


def movedim(a, source, destination):
    """``a`` with dimension(s) ``source`` moved to ``destination``, as ``torch.movedim``.

    Args:
        a: the input tensor.
        source: a dimension or a sequence of them.
        destination: where they go (as many).

    Returns:
        Tensor: a view with the dimensions permuted.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(2, 3, 4).movedim(0, -1).shape
        tb.Size([3, 4, 2])
    """
    src = [source] if isinstance(source, numbers.Integral) else list(source)
    dst = [destination] if isinstance(destination, numbers.Integral) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({src} dims) "
                           f"should contain the same number of dims as destination ({dst} dims)")
    n = a.ndim
    src, dst = [_dim(s, n) for s in src], [_dim(d, n) for d in dst]
    order = [i for i in range(n) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return S.permute(a, *order)


def ravel(a):
    """``a`` flattened to 1-D (a view when possible), as ``torch.ravel``.

    Args:
        a: the input tensor.

    Returns:
        Tensor: 1-D.

    Example:
        >>> import tensorbrain as tb
        >>> tb.ones(2, 2).ravel().shape
        tb.Size([4])
    """
    return S.reshape(a, -1)


def tile(a, dims):
    """``a`` repeated along each dimension, as ``torch.tile`` (fewer ``dims`` than dimensions
    are padded with ones in front).

    Args:
        a: the input tensor.
        dims: the repetitions per dimension.

    Returns:
        Tensor: the tiled tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([1, 2]).tile((2,)).tolist()
        [1, 2, 1, 2]
    """
    dims = (dims,) if isinstance(dims, numbers.Integral) else tuple(dims)
    if len(dims) < a.ndim:
        dims = (1,) * (a.ndim - len(dims)) + dims
    return S.repeat(a, *dims)


def broadcast_to(a, size):
    """``a`` expanded to ``size`` (a view), as ``torch.broadcast_to``.

    Args:
        a: the input tensor.
        size: the shape; -1 keeps a dimension.

    Returns:
        Tensor: the broadcast view.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([1, 2]).broadcast_to((2, 2)).tolist()
        [[1, 2], [1, 2]]
    """
    return S.expand(a, *size)


def select(a, dim, index):
    """The slice of ``a`` at ``index`` along ``dim`` (that dimension removed), as
    ``torch.select``.

    Args:
        a: the input tensor.
        dim: the dimension.
        index: the position (negative counts from the end).

    Returns:
        Tensor: a view with one dimension fewer.

    Raises:
        IndexError: ``index`` out of range.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[1, 2], [3, 4]]).select(1, 0).tolist()
        [1, 3]
    """
    d = _dim(dim, a.ndim)
    n = a.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{tuple(a.shape)} at dimension {dim}")
    return S.getitem(a, (slice(None),) * d + (int(index),))


def diagonal(a, offset=0, dim1=0, dim2=1):
    """The diagonal of the ``(dim1, dim2)`` planes, as the last dimension, as
    ``torch.diagonal``.

    Args:
        a: a tensor of at least 2 dimensions.
        offset: above (> 0) or below (< 0) the main diagonal.
        dim1: the first dimension of the planes.
        dim2: the second.

    Returns:
        Tensor: a view; gradients flow back to the diagonal positions.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[1, 2], [3, 4]]).diagonal().tolist()
        [1, 4]
    """
    x = a._data
    xp = get_array_module(x)
    d1, d2 = _dim(dim1, x.ndim), _dim(dim2, x.ndim)
    out = xp.diagonal(x, offset, d1, d2)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        k = xp.arange(out.shape[-1])
        xp.moveaxis(gx, (d1, d2), (-2, -1))[..., k + max(-offset, 0), k + max(offset, 0)] = g
        return (gx,)
    return make_view(out, a, backward, "DiagonalBackward")


def unfold(a, dimension, size, step):
    """Every window of ``size`` elements along ``dimension``, ``step`` apart, as a new last
    dimension, as ``Tensor.unfold``.

    Args:
        a: the input tensor.
        dimension: the dimension to slide along.
        size: the window length.
        step: the distance between windows.

    Returns:
        Tensor: shape ``a.shape`` with ``dimension`` replaced by the window count and a last
        dimension of ``size``; a view (overlapping windows share memory).

    Raises:
        RuntimeError: ``size`` larger than the dimension, or ``step`` < 1.

    Example:
        >>> import tensorbrain as tb
        >>> tb.arange(5).unfold(0, 2, 2).tolist()
        [[0, 1], [2, 3]]
    """
    x = a._data
    xp = get_array_module(x)
    d = _dim(dimension, x.ndim) if x.ndim else 0
    n = x.shape[d] if x.ndim else 1
    if size > n:
        raise RuntimeError(f"maximum size for tensor at dimension {dimension} is {n} but size "
                           f"is {size}")
    if step < 1:
        raise RuntimeError(f"step is {step} but must be > 0")
    count = (n - size) // step + 1
    shape = x.shape[:d] + (count,) + x.shape[d + 1:] + (size,)
    strides = x.strides[:d] + (x.strides[d] * step,) + x.strides[d + 1:] + (x.strides[d],)
    out = xp.lib.stride_tricks.as_strided(x, shape, strides) if x.ndim else x.reshape(1, 1)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        for w in range(size):   # add each window position back (windows may overlap)
            sl = [slice(None)] * x.ndim
            sl[d] = slice(w, w + step * (count - 1) + 1, step)
            gx[tuple(sl)] += xp.moveaxis(g[..., w], d, d)
        return (gx,)
    return make_view(out, a, backward, "UnfoldBackward")


def as_strided(a, size, stride, storage_offset=None):
    """A view of ``a``'s memory with the given shape and strides (in elements), as
    ``torch.as_strided``; the offset counts from ``a``'s first element.

    Args:
        a: the input tensor (contiguous, as torch reads its storage).
        size: the shape.
        stride: the strides, in elements.
        storage_offset: where the view starts, in elements (default 0).

    Returns:
        Tensor: the view; gradients add back to every position read.

    Raises:
        RuntimeError: the view would read past the end of ``a``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.arange(6).as_strided((2, 2), (3, 1)).tolist()
        [[0, 1], [3, 4]]
    """
    x = a._data
    xp = get_array_module(x)
    contiguous = x.flags.c_contiguous
    base = x.reshape(-1) if contiguous else xp.ascontiguousarray(x).reshape(-1)
    off = int(storage_offset or 0)
    size, stride = tuple(int(s) for s in size), tuple(int(s) for s in stride)
    last = off - 1 if any(n == 0 for n in size) else \
        off + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= base.size or off < 0:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)} and storage "
                           f"offset {off} require {last + 1} elements, the tensor has "
                           f"{base.size}")
    out = xp.lib.stride_tricks.as_strided(base[off:], size,
                                          tuple(s * x.itemsize for s in stride))

    def backward(g):
        flat = xp.arange(base.size)
        pos = xp.lib.stride_tricks.as_strided(flat[off:], size,
                                              tuple(s * flat.itemsize for s in stride))
        gx = xp.zeros(base.size, dtype=g.dtype)
        S._index_add(xp, gx, pos.reshape(-1), g.reshape(-1))
        return (gx.reshape(x.shape),)
    if contiguous:   # a view of a's memory, as torch's
        return make_view(out, a, backward, "AsStridedBackward")
    return make(out, (a,), backward, "AsStridedBackward")


def fliplr(a):
    """``a`` with its columns reversed (dimension 1), as ``torch.fliplr``.

    Args:
        a: a tensor of at least 2 dimensions.

    Returns:
        Tensor: the flipped tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[1, 2]]).fliplr().tolist()
        [[2, 1]]
    """
    return S.flip(a, (1,))


def flipud(a):
    """``a`` with its rows reversed (dimension 0), as ``torch.flipud``.

    Args:
        a: the input tensor.

    Returns:
        Tensor: the flipped tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([1, 2]).flipud().tolist()
        [2, 1]
    """
    return S.flip(a, (0,))


def rot90(a, k=1, dims=(0, 1)):
    """``a`` rotated by 90 degrees ``k`` times in the plane of ``dims`` (from the first axis
    towards the second), as ``torch.rot90``.

    Args:
        a: the input tensor.
        k: the number of quarter turns (negative turns the other way).
        dims: the two dimensions of the plane.

    Returns:
        Tensor: the rotated tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[1, 2], [3, 4]]).rot90().tolist()
        [[2, 4], [1, 3]]
    """
    d0, d1 = (_dim(d, a.ndim) for d in dims)
    k %= 4
    if k == 0:
        return S.clone(a)
    if k == 2:
        return S.flip(a, (d0, d1))
    if k == 1:
        return S.transpose(S.flip(a, (d1,)), d0, d1)
    return S.flip(S.transpose(a, d0, d1), (d1,))


def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape (views), as ``torch.broadcast_tensors``.

    Args:
        *tensors: the tensors.

    Returns:
        tuple[Tensor, ...]: one view per tensor.

    Example:
        >>> import tensorbrain as tb
        >>> [t.shape for t in tb.broadcast_tensors(tb.ones(2, 1), tb.ones(3))]
        [tb.Size([2, 3]), tb.Size([2, 3])]
    """
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(S.expand(t, *shape) for t in tensors)


def block_diag(*tensors):
    """A block-diagonal matrix of the given matrices (scalars and 1-D tensors count as one
    row), as ``torch.block_diag``.

    Args:
        *tensors: 0-, 1- or 2-D tensors.

    Returns:
        Tensor: 2-D; gradients flow to each block.

    Example:
        >>> import tensorbrain as tb
        >>> tb.block_diag(tb.tensor([[1]]), tb.tensor([[2, 3]])).tolist()
        [[1, 0, 0], [0, 2, 3]]
    """
    mats = [S.reshape(t, 1, -1) if t.ndim < 2 else t for t in tensors]
    cols = [m.shape[1] for m in mats]
    rows = []
    from .._factories import zeros
    for i, m in enumerate(mats):
        parts = []
        for j, c in enumerate(cols):
            parts.append(m if i == j else zeros(m.shape[0], c, dtype=m.dtype, device=m.device))
        rows.append(S.cat(parts, 1))
    return S.cat(rows, 0)


def cartesian_prod(*tensors):
    """The cartesian product of 1-D tensors as rows, as ``torch.cartesian_prod`` (one tensor:
    itself).

    Args:
        *tensors: 1-D tensors.

    Returns:
        Tensor: ``(prod(len), len(tensors))``, or the one tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.cartesian_prod(tb.tensor([1, 2]), tb.tensor([3, 4])).tolist()
        [[1, 3], [1, 4], [2, 3], [2, 4]]
    """
    if len(tensors) == 1:
        return tensors[0]
    from .rearrange import meshgrid
    grids = meshgrid(*tensors, indexing="ij")
    return S.stack([S.reshape(g, -1) for g in grids], 1)


def combinations(a, r=2, with_replacement=False):
    """The ``r``-element combinations of a 1-D tensor's elements as rows, as
    ``torch.combinations`` (``itertools`` order).

    Args:
        a: a 1-D tensor.
        r: the combination length.
        with_replacement: allow repeated elements.

    Returns:
        Tensor: ``(count, r)``; gradients flow to the elements.

    Example:
        >>> import tensorbrain as tb
        >>> tb.combinations(tb.tensor([1, 2, 3])).tolist()
        [[1, 2], [1, 3], [2, 3]]
    """
    n = a.shape[0]
    pick = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(pick(range(n), r)), dtype=np.int64).reshape(-1, r)
    xp = get_array_module(a._data)
    flat = S.index_select(a, 0, Tensor._wrap(xp.asarray(idx.reshape(-1))))
    return S.reshape(flat, idx.shape[0], r)


def diag_embed(a, offset=0, dim1=-2, dim2=-1):
    """Matrices whose diagonals (in the planes of ``dim1``, ``dim2`` of the output) are the last
    dimension of ``a``, as ``torch.diag_embed``.

    Args:
        a: the diagonals, ``(..., n)``.
        offset: which diagonal.
        dim1: the first dimension of the planes in the output.
        dim2: the second.

    Returns:
        Tensor: one more dimension than ``a``; gradients flow to the diagonals.

    Example:
        >>> import tensorbrain as tb
        >>> tb.diag_embed(tb.tensor([1, 2])).tolist()
        [[1, 0], [0, 2]]
    """
    x = a._data
    xp = get_array_module(x)
    n = x.shape[-1] + abs(offset)
    out_nd = x.ndim + 1
    d1, d2 = _dim(dim1, out_nd), _dim(dim2, out_nd)
    k = xp.arange(x.shape[-1])
    r, c = k + max(-offset, 0), k + max(offset, 0)
    base = xp.zeros(x.shape[:-1] + (n, n), dtype=x.dtype)
    base[..., r, c] = x
    out = xp.moveaxis(base, (-2, -1), (d1, d2))
    return make(out, (a,), lambda g: (xp.moveaxis(g, (d1, d2), (-2, -1))[..., r, c],),
                "DiagEmbedBackward")


def diagflat(a, offset=0):
    """A 2-D matrix with the flattened ``a`` on a diagonal, as ``torch.diagflat``.

    Args:
        a: the input tensor.
        offset: which diagonal.

    Returns:
        Tensor: 2-D.

    Example:
        >>> import tensorbrain as tb
        >>> tb.diagflat(tb.tensor([[1, 2]])).tolist()
        [[1, 0], [0, 2]]
    """
    return diag_embed(S.reshape(a, -1), offset)


def narrow_copy(a, dim, start, length):
    """A copy (not a view) of ``a.narrow(dim, start, length)``, as ``torch.narrow_copy``.

    Args:
        a: the input tensor.
        dim: the dimension.
        start: the first position.
        length: how many.

    Returns:
        Tensor: a new tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.arange(5).narrow_copy(0, 1, 2).tolist()
        [1, 2]
    """
    return S.clone(S.narrow(a, dim, start, length))
