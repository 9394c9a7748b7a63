"""Shape ops (views where NumPy gives views), joining/splitting, indexing and matmul."""
from __future__ import annotations

import numpy as np

from .._xp import get_array_module
from .core import make, make_view, tensor_cls, unbroadcast


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def reshape(a, *shape):
    shape = _shape_arg(shape)
    x = a.data
    try:
        out = x.reshape(shape)
    except ValueError:
        raise RuntimeError(f"shape {list(shape)} is invalid for input of size {x.size} "
                           f"(shape {tuple(x.shape)})") from None
    in_shape = x.shape
    return make_view(out, a, lambda g: (g.reshape(in_shape),), "ReshapeBackward")


def view(a, *shape):
    x = a.data
    if not (x.flags.c_contiguous):
        raise RuntimeError(f"view size is not compatible with input tensor's size and stride "
                           f"(shape {tuple(x.shape)} is not contiguous). Use .reshape(...) instead.")
    return reshape(a, *shape)


def flatten(a, start_dim=0, end_dim=-1):
    shape = a.data.shape
    if not shape:
        return reshape(a, 1)
    s, e = start_dim % len(shape), end_dim % len(shape)
    new = shape[:s] + (int(np.prod(shape[s:e + 1])),) + shape[e + 1:]
    return reshape(a, new)


def unflatten(a, dim, sizes):
    shape = a.data.shape
    d = dim % len(shape)
    return reshape(a, shape[:d] + tuple(sizes) + shape[d + 1:])


def permute(a, *dims):
    dims = _shape_arg(dims)
    x = a.data
    if sorted(d % x.ndim for d in dims) != list(range(x.ndim)):
        raise RuntimeError(f"permute: dims {list(dims)} are not a permutation of {x.ndim} dims")
    inv = np.argsort([d % x.ndim for d in dims])
    return make_view(x.transpose(dims), a, lambda g: (g.transpose(inv),), "PermuteBackward")


def transpose(a, dim0, dim1):
    x = a.data
    if x.ndim < 2 and dim0 in (0, -1) and dim1 in (0, -1):
        return make_view(x, a, lambda g: (g,), "TransposeBackward")
    out = get_array_module(x).swapaxes(x, dim0, dim1)
    return make_view(out, a, lambda g: (get_array_module(g).swapaxes(g, dim0, dim1),), "TransposeBackward")


def t(a):
    if a.data.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {a.data.ndim}D")
    return transpose(a, 0, -1) if a.data.ndim == 2 else a


def squeeze(a, dim=None):
    x = a.data
    if dim is None:
        out = x.squeeze()
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        dims = tuple(d % max(x.ndim, 1) for d in dims if x.ndim and x.shape[d] == 1)
        out = x.squeeze(axis=dims) if dims else x
    in_shape = x.shape
    return make_view(out, a, lambda g: (g.reshape(in_shape),), "SqueezeBackward")


def unsqueeze(a, dim):
    x = a.data
    d = dim if dim >= 0 else dim + x.ndim + 1
    if not 0 <= d <= x.ndim:
        raise IndexError(f"unsqueeze: dim {dim} out of range for a {x.ndim}-d tensor")
    out = get_array_module(x).expand_dims(x, d)
    return make_view(out, a, lambda g: (g.squeeze(axis=d),), "UnsqueezeBackward")


def expand(a, *sizes):
    sizes = _shape_arg(sizes)
    x = a.data
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
    x = a.data
    if x.flags.c_contiguous:
        return a
    return make(get_array_module(x).ascontiguousarray(x), (a,), lambda g: (g,), "CloneBackward")


def clone(a):
    return make(a.data.copy(), (a,), lambda g: (g,), "CloneBackward")


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("cat(): expected a non-empty list of tensors")
    datas = [t.data for t in tensors]
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
    idx = [slice(None)] * a.data.ndim
    idx[dim] = slice(start, start + length)
    return getitem(a, tuple(idx))


def _index_data(index):
    Tensor = tensor_cls()
    if isinstance(index, Tensor):
        return index.data
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    if isinstance(index, list):
        return [i.data if isinstance(i, Tensor) else i for i in index]
    return index


def _is_basic(index):
    items = index if isinstance(index, tuple) else (index,)
    return all(isinstance(i, (int, slice)) or i is None or i is Ellipsis for i in items)


def getitem(a, index):
    x = a.data
    idx = _index_data(index)
    try:
        out = x[idx]
    except IndexError as exc:
        raise IndexError(f"{exc} (tensor of shape {tuple(x.shape)})") from None
    xp = get_array_module(x)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        if _is_basic(idx):
            gx[idx] = g
        else:
            # Advanced indexing may repeat elements: accumulate, do not overwrite.
            if xp is np:
                np.add.at(gx, idx, g)
            else:
                import cupyx  # type: ignore
                cupyx.scatter_add(gx, idx, g)
        return (gx,)
    if _is_basic(idx):
        return make_view(out, a, backward, "SliceBackward")
    return make(out, (a,), backward, "IndexBackward")


def matmul(a, b):
    x, y = a.data, b.data
    if type(x) is not type(y):
        raise RuntimeError(f"matmul: expected both tensors on the same device, got {a.device} "
                           f"and {b.device}")
    try:
        out = x @ y
    except ValueError:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_fmt(x.shape)} and "
                           f"{_fmt(y.shape)})") from None
    xp = get_array_module(x)

    def backward(g):
        ga = gb = None
        if x.ndim == 1 and y.ndim == 1:
            return (g * y if a.requires_grad else None, g * x if b.requires_grad else None)
        xx = x[None, :] if x.ndim == 1 else x
        yy = y[:, None] if y.ndim == 1 else y
        gg = g
        if x.ndim == 1:
            gg = xp.expand_dims(gg, -2)
        if y.ndim == 1:
            gg = xp.expand_dims(gg, -1)
        if a.requires_grad:
            ga = gg @ xp.swapaxes(yy, -1, -2)
            ga = unbroadcast(ga, xx.shape).reshape(x.shape)
        if b.requires_grad:
            gb = xp.swapaxes(xx, -1, -2) @ gg
            gb = unbroadcast(gb, yy.shape).reshape(y.shape)
        return ga, gb
    return make(out, (a, b), backward, "MmBackward", (a, b))


def _fmt(shape):
    return "x".join(str(s) for s in shape)


def to_dtype(a, dtype):
    x = a.data
    if x.dtype == dtype:
        return a
    out = x.astype(dtype)
    src = x.dtype
    if np.dtype(dtype).kind not in "fc":
        from ..tensor import Tensor
        return Tensor._wrap(out)
    return make(out, (a,), lambda g: (g.astype(src),), "ToCopyBackward")
