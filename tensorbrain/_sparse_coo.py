"""The sparse COO tensor type, :class:`SparseTensor` (torch's ``sparse_coo`` layout); what it
is and how its ops run: :mod:`tensorbrain.sparse`, which makes and exports it.
"""
from __future__ import annotations

import numbers
import operator

import numpy as np

from . import _dtype, _layout, _xp
from ._device import as_device
from ._ops.core import make
from ._ops.shape import _index_add
from ._tensor_base import Size
from .tensor import Tensor


def _by_number(op):
    """A SparseTensor operator: a number scales the values; other operands meet the dense form."""
    def method(self, other):
        if isinstance(other, numbers.Number):
            return self._with_values(op(self._values_t, other))
        return op(self.to_dense(), other)
    return method


class SparseTensor(Tensor, made_sparse=True):
    """A sparse COO tensor (see the module docstring). Make one with :func:`sparse_coo_tensor`
    or ``dense.to_sparse()``.

    Args:
        indices: an int64 array ``(sparse_dim, nnz)``.
        values: a Tensor ``(nnz, *dense_dims)``.
        shape: the full shape.
        coalesced: whether the indices are known sorted and unique.
    """

    def __init__(self, indices, values: Tensor, shape, coalesced: bool = False):
        self._indices_arr = indices
        self._values_t = values
        self._shape = tuple(int(s) for s in shape)
        self._coalesced = bool(coalesced)
        self.requires_grad = values.requires_grad
        self.grad = None
        self._fresh_graph_fields()

    # the dense form, for the ops that read a tensor's array (see the module docstring)
    @property
    def _data(self):
        v = self._values_t._data
        xp = _xp.get_array_module(v)
        out = xp.zeros(self._shape, dtype=v.dtype)
        if v.shape[0]:
            _index_add(xp, out, tuple(self._indices_arr), v)
        return out

    @_data.setter
    def _data(self, value):
        raise RuntimeError("a sparse tensor's storage cannot be replaced; build a new one with "
                           "tb.sparse_coo_tensor")

    @property
    def shape(self):
        """The full (dense) shape."""
        return Size(self._shape)

    def size(self, dim=None):
        """The full shape, or the size of dimension ``dim``.

        Args:
            dim: a dimension, or None.
        """
        return Size(self._shape) if dim is None else self._shape[dim]

    @property
    def dtype(self):
        """The values' dtype."""
        return self._values_t.dtype

    @property
    def device(self):
        """The values' device."""
        return self._values_t.device

    @property
    def is_cuda(self) -> bool:
        """True when the values live on a GPU."""
        return self._values_t.is_cuda

    def dim(self):
        """The number of dimensions."""
        return len(self._shape)

    ndim = property(dim, doc="The number of dimensions.")

    def numel(self):
        """The number of elements of the dense form."""
        return int(np.prod(self._shape, dtype=np.int64))

    is_sparse = property(lambda self: True, doc="True.")

    @property
    def layout(self):
        """``tb.sparse_coo``."""
        return _layout.sparse_coo

    def sparse_dim(self) -> int:
        """How many leading dimensions are sparse (indexed)."""
        return int(self._indices_arr.shape[0])

    def dense_dim(self) -> int:
        """How many trailing dimensions each value has."""
        return len(self._shape) - self.sparse_dim()

    def _nnz(self) -> int:
        """The number of stored values (duplicates count until :meth:`coalesce`)."""
        return int(self._indices_arr.shape[1])

    def _indices(self) -> Tensor:
        """The indices as stored (``(sparse_dim, nnz)``, int64), coalesced or not."""
        return Tensor._wrap(self._indices_arr)

    def _values(self) -> Tensor:
        """The values as stored, in the autograd graph."""
        return self._values_t

    def _coalesced_only(self, what: str) -> None:
        if not self._coalesced:
            raise RuntimeError(f"Cannot get {what} on an uncoalesced tensor, please call "
                               ".coalesce() first")

    def indices(self) -> Tensor:
        """The indices of a coalesced tensor, as torch's ``indices()``.

        Raises:
            RuntimeError: the tensor is not coalesced (call :meth:`coalesce` first, as torch).
        """
        self._coalesced_only("indices")
        return self._indices()

    def values(self) -> Tensor:
        """The values of a coalesced tensor (in the autograd graph).

        Raises:
            RuntimeError: the tensor is not coalesced.
        """
        self._coalesced_only("values")
        return self._values_t

    def is_coalesced(self) -> bool:
        """Whether the indices are sorted and unique."""
        return self._coalesced

    def coalesce(self) -> SparseTensor:
        """The same tensor with sorted, unique indices (duplicates summed), as torch's.

        Returns:
            SparseTensor: self when already coalesced.
        """
        if self._coalesced:
            return self
        idx = self._indices_arr
        xp = _xp.get_array_module(idx)
        sdim = idx.shape[0]
        if idx.shape[1] == 0:
            return SparseTensor(idx, self._values_t, self._shape, True)
        flat = xp.ravel_multi_index(tuple(idx), self._shape[:sdim])
        uniq, inverse = xp.unique(flat, return_inverse=True)
        new_idx = xp.stack(xp.unravel_index(uniq, self._shape[:sdim])).astype(np.int64)
        vals = self._values_t
        summed = _sum_rows(vals, Tensor._wrap(inverse.reshape(-1)), int(uniq.shape[0]))
        return SparseTensor(new_idx, summed, self._shape, True)

    def to_dense(self, dtype=None, *, masked_grad=None) -> Tensor:
        """The dense tensor; differentiable with respect to the values.

        Args:
            dtype: convert to this dtype.
            masked_grad: accepted for torch compatibility.

        Returns:
            Tensor: the dense tensor.
        """
        vals = self._values_t
        idx = tuple(self._indices_arr)
        out = make(self._data, (vals,), lambda g: (g[idx],), "ToDenseBackward")
        return out if dtype is None else out.to(dtype)

    def to_sparse(self, *args, layout=None, **kwargs):
        """Self (already sparse COO), or in the compressed ``layout`` asked for.

        Args:
            *args: ``sparse_dim`` (accepted).
            layout: None / ``tb.sparse_coo``, or ``tb.sparse_csr`` / ``tb.sparse_csc``.
            **kwargs: accepted.
        """
        if layout in (None, _layout.sparse_coo):
            return self
        return self._to_compressed(layout)

    def sparse_resize_(self, size, sparse_dim: int, dense_dim: int) -> SparseTensor:
        """Resize in place, as ``torch.Tensor.sparse_resize_``: with stored values, the numbers
        of sparse and dense dimensions stay and no sparse dimension shrinks.

        Args:
            size: the new shape.
            sparse_dim: how many leading dimensions are sparse.
            dense_dim: how many trailing ones are dense.

        Raises:
            RuntimeError: ``len(size) != sparse_dim + dense_dim``, or a change torch refuses
                on a non-empty tensor.
        """
        size = tuple(int(s) for s in size)
        if len(size) != sparse_dim + dense_dim:
            raise RuntimeError(f"number of dimensions must be sparse_dim ({sparse_dim}) + "
                               f"dense_dim ({dense_dim}), but got {len(size)}")
        if self._nnz():
            old = self._shape
            if sparse_dim != self.sparse_dim() or dense_dim != self.dense_dim():
                raise RuntimeError(f"changing the number of sparse ({self.sparse_dim()} -> "
                                   f"{sparse_dim}) or dense ({self.dense_dim()} -> {dense_dim}) "
                                   f"dimensions on a non-empty sparse tensor is not supported.")
            if any(n < o for n, o in zip(size[:sparse_dim], old[:sparse_dim])):
                raise RuntimeError(f"shrinking the size of sparse dimensions (from "
                                   f"{list(old[:sparse_dim])} to {list(size[:sparse_dim])}) on a "
                                   f"non-empty sparse tensor is not supported.")
            if size[sparse_dim:] != old[sparse_dim:]:
                raise RuntimeError(f"shrinking or expanding the size of dense dimensions (from "
                                   f"{list(old[sparse_dim:])} to {list(size[sparse_dim:])}) on a "
                                   f"non-empty sparse tensor is not supported.")
        else:
            xp = _xp.get_array_module(self._indices_arr)
            self._indices_arr = xp.zeros((sparse_dim, 0), np.int64)
            self._values_t = self._values_t.new_zeros((0, *size[sparse_dim:]))
        self._shape = size
        return self

    to_sparse_coo = to_sparse

    def t(self) -> SparseTensor:
        """The transpose of a 2-D sparse tensor (indices swapped), as torch's."""
        return self.transpose(0, 1)

    def transpose(self, dim0, dim1) -> SparseTensor:
        """Two sparse dimensions swapped.

        Args:
            dim0: a sparse dimension.
            dim1: another.
        """
        order = list(range(len(self._shape)))
        d0, d1 = dim0 % len(order), dim1 % len(order)
        order[d0], order[d1] = order[d1], order[d0]
        shape = [self._shape[i] for i in order]
        idx = self._indices_arr[[order[i] for i in range(self.sparse_dim())]]
        return SparseTensor(idx, self._values_t, shape, False)

    def mm(self, other) -> Tensor:
        """``tb.sparse.mm(self, other)``.

        Args:
            other: a dense 2-D tensor.
        """
        return mm(self, other)

    matmul = __matmul__ = mm

    def _with_values(self, values: Tensor) -> SparseTensor:
        return SparseTensor(self._indices_arr, values, self._shape, self._coalesced)

    __mul__ = __rmul__ = _by_number(operator.mul)
    __truediv__ = _by_number(operator.truediv)

    def __neg__(self):
        return self._with_values(-self._values_t)

    def __add__(self, other):
        if isinstance(other, SparseTensor):
            idx = np.concatenate([_xp.to_numpy(self._indices_arr),
                                  _xp.to_numpy(other._indices_arr)], axis=1)
            from ._ops.shape import cat
            vals = cat([self._values_t, other._values_t])
            return SparseTensor(_like(idx, self._indices_arr), vals, self._shape, False)
        return self.to_dense() + other

    __radd__ = __add__

    def to(self, *args, **kwargs) -> SparseTensor:
        """The sparse tensor with its values (and indices) moved or converted.

        Args:
            *args: what ``Tensor.to`` takes.
            **kwargs: what ``Tensor.to`` takes.
        """
        vals = self._values_t.to(*args, **kwargs)
        idx = self._indices_arr
        if vals.is_cuda != _xp.is_cupy_array(idx):
            idx = Tensor._wrap(idx).to(vals.device)._data
        return SparseTensor(idx, vals, self._shape, self._coalesced)

    def cpu(self):
        """The tensor on the CPU."""
        return self.to("cpu")

    def cuda(self, device=None):
        """The tensor on a GPU.

        Args:
            device: the GPU; None for the current one.
        """
        return self.to("cuda" if device is None else as_device(device))

    def float(self):
        """Float32 values."""
        return self.to(_dtype.float32)

    def double(self):
        """Float64 values."""
        return self.to(_dtype.float64)

    def detach(self):
        """The tensor with its values cut from the graph."""
        return self._with_values(self._values_t.detach())

    def clone(self, *args, **kwargs):
        """A copy (indices and values copied).

        Args:
            *args: accepted.
            **kwargs: accepted.
        """
        return SparseTensor(self._indices_arr.copy(), self._values_t.clone(), self._shape,
                            self._coalesced)

    def requires_grad_(self, requires_grad=True):
        """Make the values require grad (gradients reach them through :func:`mm` and
        :meth:`to_dense`).

        Args:
            requires_grad: the flag.
        """
        self._values_t.requires_grad_(requires_grad)
        self.requires_grad = bool(requires_grad)
        return self

    def __repr__(self):
        return (f"tensor(indices={self._indices()!r},\n       values={self._values_t!r},\n"
                f"       size={self._shape}, nnz={self._nnz()}, layout=torch.sparse_coo)")


def _like(arr, like):
    return _xp.cupy().asarray(arr) if _xp.is_cupy_array(like) else arr


def _sum_rows(vals: Tensor, inverse: Tensor, n: int) -> Tensor:
    """``out[inverse[i]] += vals[i]`` into ``n`` rows, differentiable."""
    from ._ops.scatter import index_add
    from ._factories import zeros
    base = zeros(n, *vals.shape[1:], dtype=vals.dtype, device=vals.device)
    return index_add(base, 0, inverse, vals)


def mm(mat1, mat2) -> Tensor:
    """``mat1 @ mat2`` for a 2-D sparse ``mat1`` and a dense 2-D ``mat2``, as
    ``torch.sparse.mm``; gradients reach ``mat2`` and ``mat1``'s values.

    Args:
        mat1: a 2-D :class:`SparseTensor` (a dense tensor works too, as a plain matmul).
        mat2: a dense 2-D tensor.

    Returns:
        Tensor: dense, ``(mat1.shape[0], mat2.shape[1])``.

    Raises:
        RuntimeError: shapes that do not multiply, or a hybrid sparse tensor.

    Example:
        >>> import tensorbrain as tb
        >>> s = tb.tensor([[0.0, 2.0], [1.0, 0.0]]).to_sparse()
        >>> tb.sparse.mm(s, tb.tensor([[1.0], [10.0]])).tolist()
        [[20.0], [1.0]]
    """
    if not isinstance(mat1, SparseTensor):
        from ._ops.shape import matmul
        return matmul(mat1, mat2)
    if isinstance(mat2, SparseTensor):
        mat2 = mat2.to_dense()
    n, m = mat1._shape[0], mat1._shape[1] if len(mat1._shape) > 1 else 1
    d = mat2._data
    if len(mat1._shape) != 2 or mat1.sparse_dim() != 2 or d.ndim != 2 or d.shape[0] != m:
        raise RuntimeError(f"sparse.mm: mat1 {mat1._shape} (sparse_dim {mat1.sparse_dim()}) and "
                           f"mat2 {tuple(d.shape)} cannot be multiplied")
    rows, cols = mat1._indices_arr[0], mat1._indices_arr[1]
    vals = mat1._values_t
    v = vals._data
    xp = _xp.get_array_module(d)
    dtype = np.result_type(v.dtype, d.dtype)
    out = xp.zeros((n, d.shape[1]), dtype=dtype)
    _index_add(xp, out, rows, v[:, None] * d[cols])

    def backward(g):
        gv = (g[rows] * d[cols]).sum(axis=1).astype(v.dtype, copy=False) \
            if vals.requires_grad else None
        gd = None
        if mat2.requires_grad:
            gd = xp.zeros(d.shape, dtype=g.dtype)
            _index_add(xp, gd, cols, v[:, None] * g[rows])
        return gv, gd
    return make(out, (vals, mat2), backward, "SparseMmBackward")


spmm = mm
