"""Sparse COO tensors, as torch's ``sparse_coo`` layout: ``tb.sparse_coo_tensor``,
``Tensor.to_sparse``, ``tb.sparse.mm`` / ``tb.spmm`` / ``tb.mm`` with a sparse left operand,
``to_dense``, ``coalesce``, ``indices``, ``values`` (graph networks build their adjacency
this way).

A :class:`SparseTensor` holds ``indices`` (int64, ``(sparse_dim, nnz)``) and ``values`` (a
Tensor of shape ``(nnz, *dense_dims)``); it is a :class:`~tensorbrain.tensor.Tensor`
(``isinstance(adj, tb.Tensor)`` is True, as in torch) with ``is_sparse`` True and ``layout``
``tb.sparse_coo``. ``sparse.mm`` multiplies without densifying (gathers of the dense rows and
an indexed add; ``np.add.at`` or CuPy's ``scatter_add``) and gives gradients to the dense
operand and to the values. Other ops on a sparse tensor see its dense form (computed on use):
the results are right but dense, and they carry no gradient to the values; ``to_dense()`` does.

>>> import tensorbrain as tb
>>> a = tb.sparse_coo_tensor(tb.tensor([[0, 1], [1, 0]]), tb.tensor([2.0, 3.0]), (2, 2))
>>> tb.sparse.mm(a, tb.ones(2, 1)).tolist(), a.to_dense().tolist()
([[2.0], [3.0]], [[0.0, 2.0], [3.0, 0.0]])
"""
from __future__ import annotations

import numpy as np

from . import _dtype, _xp
from ._factories import tensor as _tensor
from ._sparse_coo import SparseTensor, _sum_rows, mm, spmm
from ._tensor_sparse import dense_to_sparse
from .tensor import Tensor

__all__ = ["SparseTensor", "addmm", "mm", "softmax", "log_softmax", "sum", "FloatTensor",
           "DoubleTensor", "LongTensor", "spdiags", "spmm", "sparse_coo_tensor", "to_sparse"]


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None, pin_memory=False,
                      requires_grad=False, check_invariants=None, is_coalesced=None):
    """A sparse COO tensor from ``indices`` and ``values``, as ``torch.sparse_coo_tensor``.

    Args:
        indices: ``(sparse_dim, nnz)`` integers (a tensor, array or nested list).
        values: ``(nnz, *dense_dims)`` values; a Tensor that requires grad keeps its graph.
        size: the full shape; None infers the smallest one that holds the indices.
        dtype: the values' dtype; None keeps (or infers) it.
        device: the device; None keeps the values'.
        pin_memory: accepted.
        requires_grad: make the values require grad.
        check_invariants: check that the indices are within ``size`` (done always).
        is_coalesced: declare the indices sorted and unique.

    Returns:
        SparseTensor: the tensor.

    Raises:
        RuntimeError: indices not 2-D, their count not matching the values, or an index out of
            ``size``.

    Example:
        >>> import tensorbrain as tb
        >>> s = tb.sparse_coo_tensor([[0, 0], [1, 1]], [1.0, 2.0], (1, 2))
        >>> s.coalesce().values().tolist(), s.to_dense().tolist()
        ([3.0], [[0.0, 3.0]])
    """
    idx = indices._data if isinstance(indices, Tensor) else np.asarray(indices)
    vals = values if isinstance(values, Tensor) else _tensor(values, dtype=dtype)
    if dtype is not None and vals.dtype != np.dtype(dtype):
        vals = vals.to(dtype)
    if device is not None:
        vals = vals.to(device)
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"indices must be an int64 tensor, got {idx.dtype}")
    idx = idx.astype(np.int64, copy=False)
    if idx.ndim != 2:
        raise RuntimeError(f"indices must be sparse_dim x nnz, but got: {tuple(idx.shape)}")
    if vals.ndim == 0 or vals.shape[0] != idx.shape[1]:
        raise RuntimeError(f"indices and values must have same nnz, but got nnz from indices: "
                           f"{idx.shape[1]}, nnz from values: "
                           f"{vals.shape[0] if vals.ndim else 0}")
    host = _xp.to_numpy(idx)
    if size is None:
        size = tuple(int(m) + 1 for m in (host.max(axis=1) if host.shape[1] else
                                          np.zeros(idx.shape[0], dtype=np.int64)))
        size = size + tuple(vals.shape[1:])
    size = tuple(int(s) for s in size)
    sdim = idx.shape[0]
    if len(size) != sdim + vals.ndim - 1:
        raise RuntimeError(f"number of dimensions must be sparse_dim ({sdim}) + dense_dim "
                           f"({vals.ndim - 1}), but got {len(size)}")
    if host.shape[1] and ((host < 0).any() or (host.max(axis=1) >= np.array(size[:sdim])).any()):
        raise RuntimeError(f"size is inconsistent with indices: for dim d, index must be less "
                           f"than size[d] (size {size}, max indices "
                           f"{host.max(axis=1).tolist()})")
    if vals.is_cuda and not _xp.is_cupy_array(idx):
        idx = _xp.cupy().asarray(idx)
    if requires_grad:
        vals.requires_grad_(True)
    return SparseTensor(idx, vals, size, bool(is_coalesced))


def spdiags(diagonals, offsets, shape, layout=None):
    """A sparse 2-D tensor with the rows of ``diagonals`` on the diagonals ``offsets``, as
    ``torch.sparse.spdiags`` (SciPy's rule: the element in column ``j`` of a diagonal is
    ``diagonals[d, j]``; explicit zeros are kept).

    Args:
        diagonals: ``(len(offsets), n)`` values, one row per diagonal.
        offsets: the diagonals, 0 the main one, > 0 above it, < 0 below (no repeats).
        shape: ``(rows, cols)`` of the result.
        layout: ``tb.sparse_coo`` (the default; the compressed layouts are not here).

    Returns:
        SparseTensor: the COO tensor, entries diagonal by diagonal, columns ascending; the
        values keep ``diagonals``' graph.

    Raises:
        ValueError: the shapes do not match, or an offset repeats.
        NotImplementedError: a compressed layout.

    Example:
        >>> import tensorbrain as tb
        >>> tb.sparse.spdiags(tb.tensor([[1.0, 2.0], [3.0, 4.0]]), tb.tensor([0, -1]),
        ...                   (2, 2)).to_dense().tolist()
        [[1.0, 0.0], [3.0, 2.0]]
    """
    from ._layout import sparse_coo
    if layout is not None and layout is not sparse_coo:
        raise NotImplementedError(f"torch.sparse.spdiags(layout={layout}): TensorBrain builds "
                                  f"sparse_coo only; convert the result where needed")
    offs = [int(o) for o in (offsets.tolist() if hasattr(offsets, "tolist") else offsets)]
    rows, cols = (int(n) for n in shape)
    if diagonals.dim() != 2 or diagonals.shape[0] != len(offs):
        raise ValueError(f"spdiags: diagonals must be 2-D with one row per offset: shape "
                         f"{tuple(diagonals.shape)}, {len(offs)} offsets")
    if len(set(offs)) != len(offs):
        raise ValueError(f"spdiags: offset tensor contains duplicate values: {offs}")
    rr, cc, dd = [], [], []
    for d, k in enumerate(offs):
        j = np.arange(max(0, k), min(cols, rows + k, diagonals.shape[1]))
        rr.append(j - k)
        cc.append(j)
        dd.append(d * diagonals.shape[1] + j)
    idx = np.stack([np.concatenate(rr), np.concatenate(cc)]).astype(np.int64)
    values = diagonals.reshape(-1)[Tensor._wrap(np.concatenate(dd).astype(np.int64))]
    return sparse_coo_tensor(idx, values, (rows, cols))


def to_sparse(a, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """A dense tensor as a sparse COO tensor of its nonzero entries, as ``Tensor.to_sparse``.

    Args:
        a: the dense tensor.
        sparse_dim: how many leading dimensions to index (default all).
        layout: ``tb.sparse_coo`` or None; the compressed layouts are not supported.
        blocksize: not supported (compressed layouts).
        dense_dim: accepted when it agrees with ``sparse_dim``.

    Returns:
        SparseTensor: coalesced; its values are in ``a``'s graph.

    Raises:
        NotImplementedError: a compressed layout.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensor([[0.0, 5.0]]).to_sparse().indices().tolist()
        [[0], [1]]
    """
    return dense_to_sparse(a, sparse_dim, layout=layout, blocksize=blocksize,
                           dense_dim=dense_dim)


def addmm(mat, mat1, mat2, *, beta=1.0, alpha=1.0) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with a sparse ``mat1``, as
    ``torch.sparse.addmm``.

    Args:
        mat: the dense tensor added.
        mat1: a 2-D sparse tensor.
        mat2: a dense 2-D tensor.
        beta: the factor on ``mat``.
        alpha: the factor on the product.

    Returns:
        Tensor: dense.
    """
    return mat * beta + mm(mat1, mat2) * alpha


def sum(input, dim=None, dtype=None):  # noqa: A001  (torch.sparse.sum)
    """The sum of a sparse tensor's values, over all or some dimensions (a dense result, or a
    0-d tensor), as ``torch.sparse.sum``; differentiable with respect to the values.

    Args:
        input: a sparse tensor.
        dim: a dimension or tuple of them; None for all.
        dtype: accumulate in this dtype.

    Returns:
        Tensor: the sum.
    """
    dense = input.to_dense() if isinstance(input, SparseTensor) else input
    out = dense.sum() if dim is None else dense.sum(dim)
    return out if dtype is None else out.to(dtype)


def _softmax_op(name: str, log: bool):
    def op(input, dim, dtype=None):
        return _masked_softmax(input, dim, dtype, log)
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"{'Log-softmax' if log else 'Softmax'} over ``dim`` of the stored entries "
                  f"only (absent entries stay absent), as ``torch.sparse.{name}``.\n\nArgs:\n"
                  f"    input: a 2-D sparse tensor.\n    dim: the dimension to normalise over "
                  f"(0 or 1).\n    dtype: compute in this dtype.\n\nReturns:\n    "
                  f"SparseTensor: the same pattern, new values.\n")
    return op


softmax = _softmax_op("softmax", log=False)
log_softmax = _softmax_op("log_softmax", log=True)


def _masked_softmax(input, dim, dtype, log):
    s = input.coalesce()
    vals = s._values_t if dtype is None else s._values_t.to(dtype)
    groups = s._indices_arr[1 - dim % 2] if len(s._shape) == 2 else None
    if groups is None:
        raise NotImplementedError("sparse softmax: TensorBrain supports 2-D sparse tensors")
    xp = _xp.get_array_module(vals._data)
    n = s._shape[1 - dim % 2]
    g = Tensor._wrap(groups)
    # a stable softmax per group: subtract the group max (a constant: no gradient needed)
    mx = xp.full(n, -np.inf, dtype=vals._data.dtype)
    if xp is np:
        np.maximum.at(mx, groups, vals._data)
    else:
        import cupyx  # type: ignore
        cupyx.scatter_max(mx, groups, vals._data)
    shifted = vals - Tensor._wrap(mx[groups])
    e = shifted.exp()
    denom = _sum_rows(e, g, n)
    from ._ops.shape import index_select
    den = index_select(denom, 0, g)
    out = shifted - den.log() if log else e / den
    return s._with_values(out)


def _legacy(name, dtype):
    def make_sparse(*args, size=None, device=None):
        if len(args) >= 2:
            shape = args[2] if len(args) > 2 else size
            return sparse_coo_tensor(args[0], args[1], shape, dtype=dtype, device=device)
        shape = tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) \
            else (tuple(args) or tuple(size or (0,)))
        return sparse_coo_tensor(np.zeros((len(shape), 0), np.int64),
                                 _tensor(np.zeros((0,)), dtype=dtype), shape)
    make_sparse.__name__ = make_sparse.__qualname__ = name
    make_sparse.__doc__ = (f"``torch.sparse.{name}``, the legacy constructor: ``(indices, "
                           f"values, size)`` makes a sparse COO tensor of dtype {dtype} (an "
                           f"empty one from a size alone).\n\nArgs:\n    *args: indices, "
                           f"values and size, or a size.\n    size: the size by keyword.\n"
                           f"    device: the device.\n\nReturns:\n    SparseTensor: the "
                           f"tensor.\n")
    return make_sparse


FloatTensor = _legacy("FloatTensor", _dtype.float32)
DoubleTensor = _legacy("DoubleTensor", _dtype.float64)
LongTensor = _legacy("LongTensor", _dtype.int64)
