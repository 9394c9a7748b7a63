"""Shape ops (views where NumPy gives views), joining/splitting, indexing and matmul."""
from __future__ import annotations

import numpy as np

from .. import _dtype
from .._xp import get_array_module
from .._xp import matmul as array_matmul
from .._tensor_base import TensorBase as Tensor
from .core import make, make_view, unbroadcast
from ..autograd.graph import SliceGrad
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def reshape(a, *shape):
    shape = _shape_arg(shape)
    x = a._data
    try:
        out = x.reshape(shape)
    except ValueError:
        raise RuntimeError(f"shape {list(shape)} is invalid for input of size {x.size} "
                           f"(shape {tuple(x.shape)})") from None
    in_shape = x.shape
    return make_view(out, a, lambda g: (g.reshape(in_shape),), "ReshapeBackward")


def view(a, *shape):
    """``Tensor.view``: a reshape that never copies, under torch's stride rule.

    A view is possible when every group of dims being merged is contiguous among itself (each
    dim's stride equals the next one's stride times its size), which is exactly when NumPy can
    reshape without a copy: ``x.transpose(1, 2).contiguous().view(B, T, C)`` works, a view of a
    transposed tensor across the swapped dims does not.

    Args:
        a: the input tensor.
        *shape: the new shape, as ints or one tuple; one -1 is inferred.

    Returns:
        Tensor: a view sharing ``a``'s memory.

    Raises:
        RuntimeError: the shape does not hold ``a``'s elements, or the view would need a copy
            (use ``reshape``).

    Example:
        >>> import tensorbrain as tb
        >>> tb.arange(6).view(3, 2).shape
        tb.Size([3, 2])
    """
    shape = _shape_arg(shape)
    x = a._data
    try:
        if isinstance(x, np.ndarray):
            np.reshape(x, shape, copy=False)
        elif not x.flags.c_contiguous:  # CuPy: only a contiguous array is known to view safely
            raise ValueError("not contiguous")
    except ValueError:
        if x.size != int(np.prod([d for d in shape if d != -1])) and -1 not in shape:
            return reshape(a, *shape)  # raises reshape's 'invalid for input of size' error
        raise RuntimeError(f"view size is not compatible with input tensor's size and stride "
                           f"(shape {tuple(x.shape)}, strides {a.stride()}): at least one "
                           f"dimension spans across two contiguous subspaces. Use "
                           f".reshape(...) instead.") from None
    return reshape(a, *shape)


def flatten(a, start_dim=0, end_dim=-1):
    shape = a._data.shape
    if not shape:
        return reshape(a, 1)
    s, e = start_dim % len(shape), end_dim % len(shape)
    new = shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:]
    return reshape(a, new)


def unflatten(a, dim, sizes):
    shape = a._data.shape
    d = dim % len(shape)
    return reshape(a, shape[:d] + tuple(sizes) + shape[d + 1:])


def permute(a, *dims):
    dims = _shape_arg(dims)
    x = a._data
    if sorted(d % x.ndim for d in dims) != list(range(x.ndim)):
        raise RuntimeError(f"permute: dims {list(dims)} are not a permutation of {x.ndim} dims")
    inv = np.argsort([d % x.ndim for d in dims])
    return make_view(x.transpose(dims), a, lambda g: (g.transpose(inv),), "PermuteBackward")


def transpose(a, dim0, dim1):
    x = a._data
    if x.ndim < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return make_view(x, a, lambda g: (g,), "TransposeBackward")
    out = get_array_module(x).swapaxes(x, dim0, dim1)
    return make_view(out, a, lambda g: (get_array_module(g).swapaxes(g, dim0, dim1),), "TransposeBackward")


def t(a):
    if a._data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a._data.ndim}D")
    return transpose(a, 0, -1) if a._data.ndim == 2 else a


def squeeze(a, dim=None):
    x = a._data
    if dim is None:
        out = x.squeeze()
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(d % max(x.ndim, 1) for d in dims if x.ndim and x.shape[d] == 1)
        out = x.squeeze(axis=dims) if dims else x
    in_shape = x.shape
    return make_view(out, a, lambda g: (g.reshape(in_shape),), "SqueezeBackward")


def unsqueeze(a, dim):
    x = a._data
    d = dim if dim >= 0 else dim + x.ndim + 1
    if not 0 <= d <= x.ndim:
        raise IndexError(f"unsqueeze: dim {dim} out of range for a {x.ndim}-d tensor")
    out = get_array_module(x).expand_dims(x, d)
    return make_view(out, a, lambda g: (g.squeeze(axis=d),), "UnsqueezeBackward")


def expand(a, *sizes):
    sizes = _shape_arg(sizes)
    x = a._data
    lead = len(sizes) - x.ndim
    if lead < 0:
        raise RuntimeError(f"expand: the number of sizes ({len(sizes)}) must be at least the "
                           f"tensor's dims ({x.ndim})")
    shape = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(sizes))
    try:
        out = get_array_module(x).broadcast_to(x, shape)
    except ValueError:
        raise RuntimeError(f"expand: shape {tuple(x.shape)} cannot be expanded to {shape}") from None
    in_shape = x.shape
    return make_view(out, a, lambda g: (unbroadcast(g, in_shape),), "ExpandBackward")


def expand_as(a, other):
    return expand(a, *other.shape)


def contiguous(a):
    x = a._data
    if x.flags.c_contiguous:
        return a
    return make(get_array_module(x).ascontiguousarray(x), (a,), lambda g: (g,), "CloneBackward")


def clone(a):
    return make(a._data.copy(), (a,), lambda g: (g,), "CloneBackward")


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of tensors")
    datas = [t._data for t in tensors]
    xp = get_array_module(datas[0])
    if any(type(d) is not type(datas[0]) for d in datas):
        raise RuntimeError("cat(): expected all tensors to be on the same device, got "
                           + ", ".join(str(t.device) for t in tensors))
    try:
        out = xp.concatenate(datas, axis=dim)
    except ValueError:
        raise RuntimeError("cat(): sizes of tensors must match except in dimension "
                           f"{dim}; got shapes {[tuple(d.shape) for d in datas]}") from None
    ax = dim % out.ndim
    bounds = np.cumsum([d.shape[ax] for d in datas])[:-1]

    def backward(g):
        return tuple(xp.split(g, bounds, axis=ax))
    return make(out, tuple(tensors), backward, "CatBackward")


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack(): expected a non-empty list of tensors")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"stack(): expects each tensor to be equal size, but got shapes "
                           f"{[tuple(t.shape) for t in tensors]}")
    return cat([unsqueeze(t, dim) for t in tensors], dim)


def split(a, split_size_or_sections, dim=0):
    n = a.shape[dim]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        sizes = [min(step, n - i) for i in range(0, n, step)]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(f"split: sizes {sizes} do not sum to dim {dim}'s size {n}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(a, dim, start, s))
        start += s
    return tuple(out)


def chunk(a, chunks, dim=0):
    n = a.shape[dim]
    step = -(-n // chunks)
    return split(a, step, dim)


def narrow(a, dim, start, length):
    idx = [slice(None)] * a._data.ndim
    idx[dim] = slice(start, start + length)
    return getitem(a, tuple(idx))


def _index_data(index):
    if isinstance(index, Tensor):
        return index._data
    if isinstance(index, tuple):
        return tuple(i._data if isinstance(i, Tensor) else i for i in index)
    if isinstance(index, list):
        return [i._data if isinstance(i, Tensor) else i for i in index]
    return index


def _is_basic(index):
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, slice)) or i is None or i is Ellipsis for i in items)


def getitem(a, index):
    x = a._data
    idx = _index_data(index)
    try:
        out = x[idx]
    except IndexError as exc:
        raise IndexError(f"{exc} (tensor of shape {tuple(x.shape)})") from None
    xp = get_array_module(x)

    def backward(g):
        if _is_basic(idx):   # zero but the slice: the engine writes sibling slices into one array
            return (SliceGrad(x.shape, idx, g),)
        gx = xp.zeros(x.shape, dtype=g.dtype)
        # Advanced indexing may repeat elements: accumulate, do not overwrite.
        if xp is np:
            np.add.at(gx, idx, g)
        else:
            import cupyx  # type: ignore
            cupyx.scatter_add(gx, idx, g)
        return (gx,)
    if _is_basic(idx):
        t = make_view(out, a, backward, "SliceBackward")
        if t.grad_fn is not None and t._base is not None:
            t._view_of = (a, idx)   # lets an in-place op on t write back into a (CopySlices)
        return t
    return make(out, (a,), backward, "IndexBackward")


@autocast_op("matmul")
def matmul(a, b):
    if a.__class__ is not Tensor and getattr(a, "is_sparse", False):
        return a.mm(b)   # a sparse COO tensor (tensorbrain/sparse.py): no densifying
    x, y = a._data, b._data
    if type(x) is not type(y):
        raise RuntimeError(f"matmul: expected both tensors on the same device, got {a.device} "
                           f"and {b.device}")
    try:
        out = array_matmul(x, y)
    except ValueError:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_fmt(x.shape)} and "
                           f"{_fmt(y.shape)})") from None
    xp = get_array_module(x)

    def backward(g):
        ga = gb = None
        xc, yc = (x.conj(), y.conj()) if "c" in (x.dtype.kind, y.dtype.kind) else (x, y)
        if x.ndim == 1 and y.ndim == 1:   # complex: conjugate Wirtinger gradients, as torch
            return (g * yc if a.requires_grad else None, g * xc if b.requires_grad else None)
        xx = xc[None, :] if x.ndim == 1 else xc
        yy = yc[:, None] if y.ndim == 1 else yc
        gg = xp.ascontiguousarray(g)   # a stride-0 broadcast g would make matmul skip BLAS
        if x.ndim == 1:
            gg = xp.expand_dims(gg, -2)
        if y.ndim == 1:
            gg = xp.expand_dims(gg, -1)
        if a.requires_grad:
            ga = array_matmul(gg, xp.swapaxes(yy, -1, -2))
            ga = unbroadcast(ga, xx.shape).reshape(x.shape)
        if b.requires_grad:
            gb = array_matmul(xp.swapaxes(xx, -1, -2), gg)
            gb = unbroadcast(gb, yy.shape).reshape(y.shape)
        return ga, gb
    return make(out, (a, b), backward, "MmBackward", (a, b))


def _fmt(shape):
    return "x".join(str(s) for s in shape)


def to_dtype(a, dtype):
    x = a._data
    if x.dtype == dtype:
        return a
    out = x.astype(dtype)
    src = x.dtype
    if not _dtype.is_float_or_complex(dtype) or not _dtype.is_float_or_complex(src):
        return Tensor._wrap(out)
    return make(out, (a,), lambda g: (g.astype(src),), "ToCopyBackward")


def _index_add(xp, target, idx, values):
    """target[idx] += values, accumulating repeated indices (np.add.at / cupyx.scatter_add)."""
    if xp is np:
        np.add.at(target, idx, values)
    else:
        import cupyx  # type: ignore
        cupyx.scatter_add(target, idx, values)


def gather(a, dim, index):
    x, idx = a._data, index._data
    if idx.ndim != x.ndim:
        raise RuntimeError(f"gather: index of shape {tuple(idx.shape)} must have as many dims as "
                           f"the input of shape {tuple(x.shape)}")
    xp = get_array_module(x)
    d = dim % x.ndim
    out = xp.take_along_axis(x, idx, axis=d)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        grid = list(xp.ix_(*[xp.arange(s) for s in idx.shape]))
        grid[d] = idx
        _index_add(xp, gx, tuple(grid), g)
        return (gx,)
    return make(out, (a,), backward, "GatherBackward")


def index_select(a, dim, index):
    x, idx = a._data, index._data
    if idx.ndim > 1:
        raise IndexError(f"index_select: index must be 1-D, got shape {tuple(idx.shape)}")
    xp = get_array_module(x)
    d = dim % x.ndim
    out = xp.take(x, idx, axis=d)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        _index_add(xp, gx, (slice(None),) * d + (idx,), g)
        return (gx,)
    return make(out, (a,), backward, "IndexSelectBackward")


def _tri(name, keep):
    def op(a, diagonal=0):
        x = a._data
        xp = get_array_module(x)
        mask = keep(xp.ones(x.shape[-2:], dtype=bool), diagonal)
        return make(xp.where(mask, x, 0).astype(x.dtype, copy=False), (a,),
                    lambda g: (xp.where(mask, g, 0).astype(g.dtype, copy=False),), name + "Backward")
    op.__name__ = op.__qualname__ = name.lower()   # its docstring: docs_shape.py
    return op


tril = _tri("Tril", lambda m, k: get_array_module(m).tril(m, k))
triu = _tri("Triu", lambda m, k: get_array_module(m).triu(m, k))


def repeat(a, *sizes):
    """``a`` tiled ``sizes[i]`` times along each dimension, as ``Tensor.repeat``.

    Args:
        a: the input tensor.
        *sizes: repetitions per dimension, as ints or one tuple; more of them than ``a`` has
            dimensions add leading dimensions.

    Returns:
        Tensor: a copy of shape ``a.shape[i] * sizes[i]``.

    Raises:
        RuntimeError: fewer sizes than ``a`` has dimensions.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([1, 2]).repeat(2, 2).tolist()
        [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    sizes = _shape_arg(sizes)
    x = a._data
    if len(sizes) < x.ndim:
        raise RuntimeError(f"repeat: number of repeat dims ({len(sizes)}) can not be smaller than "
                           f"number of tensor dims ({x.ndim})")
    xs = x.reshape((1,) * (len(sizes) - x.ndim) + x.shape)
    out = get_array_module(x).tile(xs, sizes)

    def backward(g):
        inter = []
        for r, s in zip(sizes, xs.shape):
            inter += [r, s]
        gg = g.reshape(inter).sum(axis=tuple(range(0, 2 * len(sizes), 2)))
        return (gg.reshape(x.shape),)
    return make(out, (a,), backward, "RepeatBackward")


def flip(a, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    xp = get_array_module(a._data)
    return make(xp.flip(a._data, dims), (a,), lambda g: (xp.flip(g, dims),), "FlipBackward")


def sort(a, dim=-1, descending=False, stable=False):
    """``a`` sorted along ``dim`` and the indices that sort it, as ``torch.sort``.

    Args:
        a: the input tensor.
        dim: the dimension to sort along.
        descending: largest first.
        stable: accepted for torch's signature; the sort is always stable.

    Returns:
        A named tuple ``(values, indices)``; the values carry the gradient back to their
        positions.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([3.0, 1.0, 2.0]).sort(descending=True).values.tolist()
        [3.0, 2.0, 1.0]
    """
    x = a._data
    xp = get_array_module(x)
    d = dim % max(x.ndim, 1)
    if descending and x.dtype.kind in "fi":
        idx = xp.argsort(-x, axis=d, kind="stable")
    else:
        idx = xp.argsort(x, axis=d, kind="stable")
        if descending:
            idx = xp.flip(idx, d)
    from ..return_types import Sort
    return Sort(gather(a, d, Tensor._wrap(idx)), Tensor._wrap(idx))


def argsort(a, dim=-1, descending=False, stable=False):
    return sort(a, dim, descending, stable).indices


def topk(a, k, dim=-1, largest=True, sorted=True):
    x = a._data
    d = dim % max(x.ndim, 1)
    if k > x.shape[d]:
        raise RuntimeError(f"topk: k={k} is larger than dim {dim} of size {x.shape[d]}")
    vals, idx = sort(a, d, descending=largest)
    sl = tuple(slice(None) if i != d else slice(0, k) for i in range(x.ndim))
    from ..return_types import Sort
    return Sort(getitem(vals, sl), Tensor._wrap(idx._data[sl]))


def dot(a, b):
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"dot: 1D tensors expected, but got {a._data.ndim}D and {b._data.ndim}D tensors")
    return matmul(a, b)


def outer(a, b):
    return matmul(unsqueeze(a, 1), unsqueeze(b, 0))
