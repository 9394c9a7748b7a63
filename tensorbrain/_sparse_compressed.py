"""Sparse CSR and CSC tensors (torch's ``sparse_csr`` / ``sparse_csc`` layouts), 2-D:
``tb.sparse_csr_tensor``, ``tb.sparse_csc_tensor``, ``Tensor.to_sparse_csr`` /
``to_sparse_csc`` (and ``to_sparse(layout=...)``), ``crow_indices`` / ``col_indices`` /
``ccol_indices`` / ``row_indices`` / ``values``, ``to_dense``, ``to_sparse_coo``, ``t()``
(CSR <-> CSC), and ``tb.sparse.mm`` / ``@`` with a dense right operand.

A compressed tensor is a :class:`~tensorbrain.sparse.SparseTensor` whose entries are kept in
the layout's order (row-major for CSR, column-major for CSC); the compressed index
(``crow_indices``) is computed from the row indices when asked (``np.bincount`` + cumsum). So
``sparse.mm``'s kernel and its gradients (to the dense operand and to the values) are the COO
ones, and ``to_dense`` is differentiable with respect to the values, as in torch. Like torch,
``is_sparse`` is False (that means COO) and ``is_sparse_csr`` is True for CSR; ``indices()``
raises. Batched and hybrid (dense-dimension) compressed tensors and BSR/BSC are not supported
(``NotImplementedError`` naming them).

>>> import tensorbrain as tb
>>> c = tb.tensor([[0.0, 2.0, 0.0], [3.0, 0.0, 4.0]]).to_sparse_csr()
>>> c.crow_indices().tolist(), c.col_indices().tolist(), c.values().tolist()
([0, 1, 3], [1, 0, 2], [2.0, 3.0, 4.0])
>>> (c @ tb.ones(3, 1)).tolist()
[[2.0], [7.0]]
"""
from __future__ import annotations

import numpy as np

from . import _layout, _xp
from ._factories import tensor as _tensor
from ._tensor_sparse import compressed_only_message, layout_name
from ._sparse_coo import SparseTensor
from .tensor import Tensor

__all__ = ["SparseCompressedTensor", "sparse_csc_tensor", "sparse_csr_tensor"]

# layout -> (compressed dim, name of the compressed index, name of the plain index)
_NAMES = {_layout.sparse_csr: (0, "crow_indices", "col_indices"),
          _layout.sparse_csc: (1, "ccol_indices", "row_indices")}


class SparseCompressedTensor(SparseTensor, made_compressed=True):
    """A 2-D CSR or CSC tensor (see the module docstring). Make one with
    :func:`sparse_csr_tensor`, :func:`sparse_csc_tensor` or ``dense.to_sparse_csr()``.

    Args:
        indices: COO indices ``(2, nnz)`` in the layout's order.
        values: a Tensor ``(nnz,)``.
        shape: the 2-D shape.
        layout: ``tb.sparse_csr`` or ``tb.sparse_csc``.
    """

    def __init__(self, indices, values: Tensor, shape, layout):
        super().__init__(indices, values, shape, coalesced=layout is _layout.sparse_csr)
        self._layout = layout

    @property
    def layout(self):
        """``tb.sparse_csr`` or ``tb.sparse_csc``."""
        return self._layout

    is_sparse = property(lambda self: False, doc="False: ``is_sparse`` means COO (as torch).")

    @property
    def is_sparse_csr(self) -> bool:
        """True for the CSR layout."""
        return self._layout is _layout.sparse_csr

    def _compressed(self, want, name: str) -> int:
        if self._layout is not want:
            raise RuntimeError(compressed_only_message(self, name))
        return _NAMES[want][0]

    def _compressed_index(self, dim: int) -> Tensor:
        idx = self._indices_arr[dim]
        xp = _xp.get_array_module(idx)
        counts = xp.bincount(idx, minlength=self._shape[dim])
        return Tensor._wrap(xp.concatenate([xp.zeros(1, np.int64),
                                            xp.cumsum(counts).astype(np.int64)]))

    def crow_indices(self) -> Tensor:
        """The compressed row index (``nrows + 1`` offsets) of a CSR tensor."""
        return self._compressed_index(self._compressed(_layout.sparse_csr, "crow_indices"))

    def col_indices(self) -> Tensor:
        """The column of each value of a CSR tensor."""
        self._compressed(_layout.sparse_csr, "col_indices")
        return Tensor._wrap(self._indices_arr[1])

    def ccol_indices(self) -> Tensor:
        """The compressed column index (``ncols + 1`` offsets) of a CSC tensor."""
        return self._compressed_index(self._compressed(_layout.sparse_csc, "ccol_indices"))

    def row_indices(self) -> Tensor:
        """The row of each value of a CSC tensor."""
        self._compressed(_layout.sparse_csc, "row_indices")
        return Tensor._wrap(self._indices_arr[0])

    def values(self) -> Tensor:
        """The stored values in the layout's order (in the autograd graph)."""
        return self._values_t

    def indices(self):
        """Raises RuntimeError: a compressed tensor has no COO indices (torch's error)."""
        raise RuntimeError(f"indices expected sparse coordinate tensor layout but got "
                           f"{layout_name(self)}")

    _from = staticmethod(lambda t, layout: to_compressed(t, layout))

    def to_sparse(self, *args, layout=None, **kwargs):
        """As COO (default), or the layout asked for.

        Args:
            *args: ``sparse_dim`` (accepted).
            layout: the layout (``tb.sparse_coo`` by default).
            **kwargs: accepted.
        """
        if layout in (None, _layout.sparse_coo):
            return self.to_sparse_coo()
        return to_compressed(self, layout)

    def to_sparse_coo(self, *args, **kwargs) -> SparseTensor:
        """The same entries as a COO tensor in this layout's order (coalesced from CSR; from
        CSC column-major, so not coalesced: torch's result too).

        Args:
            *args: accepted.
            **kwargs: accepted.
        """
        return SparseTensor(self._indices_arr, self._values_t, self._shape, self.is_sparse_csr)

    def t(self) -> SparseCompressedTensor:
        """The transpose, in the other compressed layout (CSR <-> CSC, no data moved)."""
        other = _layout.sparse_csc if self.is_sparse_csr else _layout.sparse_csr
        return SparseCompressedTensor(self._indices_arr[::-1].copy(), self._values_t,
                                      self._shape[::-1], other)

    def transpose(self, dim0, dim1) -> SparseCompressedTensor:
        """``t()`` for ``(0, 1)`` / ``(1, 0)``.

        Args:
            dim0: a dimension.
            dim1: the other.
        """
        if {dim0 % 2, dim1 % 2} == {0, 1}:
            return self.t()
        return self

    def _with_values(self, values: Tensor) -> SparseCompressedTensor:
        return SparseCompressedTensor(self._indices_arr, values, self._shape, self._layout)

    def to(self, *args, **kwargs) -> SparseCompressedTensor:
        """The tensor with its values moved or converted (see ``Tensor.to``).

        Args:
            *args: what ``Tensor.to`` takes.
            **kwargs: what ``Tensor.to`` takes.
        """
        moved = super().to(*args, **kwargs)
        return SparseCompressedTensor(moved._indices_arr, moved._values_t, self._shape,
                                      self._layout)

    def clone(self, *args, **kwargs) -> SparseCompressedTensor:
        """A copy.

        Args:
            *args: accepted.
            **kwargs: accepted.
        """
        return SparseCompressedTensor(self._indices_arr.copy(), self._values_t.clone(),
                                      self._shape, self._layout)

    def __repr__(self):
        _, comp, plain = _NAMES[self._layout]
        return (f"tensor({comp}={getattr(self, comp)()!r},\n       {plain}="
                f"{getattr(self, plain)()!r},\n       values={self._values_t!r}, "
                f"size={self._shape}, nnz={self._nnz()},\n       layout={self._layout!r})")


def to_compressed(t, layout) -> SparseCompressedTensor:
    """A dense or sparse 2-D tensor in the compressed ``layout`` (values stay in the graph).

    Args:
        t: the tensor.
        layout: ``tb.sparse_csr`` or ``tb.sparse_csc``.

    Raises:
        NotImplementedError: BSR/BSC, or a tensor that is not 2-D.
    """
    if layout not in _NAMES:
        raise NotImplementedError(f"the {layout} layout is not supported by TensorBrain: CSR "
                                  f"and CSC only (2-D)")
    if t.dim() != 2:
        raise NotImplementedError(f"to_sparse({layout}): TensorBrain's compressed tensors are "
                                  f"2-D; got {t.dim()} dimensions (batched and hybrid ones are "
                                  f"not supported)")
    coo = t.to_sparse_coo() if t.layout is not _layout.sparse_coo else t.coalesce()
    idx, vals = coo._indices_arr, coo._values_t
    if layout is _layout.sparse_csc:
        xp = _xp.get_array_module(idx)
        order = xp.lexsort((idx[0], idx[1]))   # by column, then row
        idx, vals = idx[:, order], vals[Tensor._wrap(order)]
    return SparseCompressedTensor(idx, vals, coo._shape, layout)


def _compressed_tensor(layout, compressed, plain, values, size, dtype, device, requires_grad):
    dim = _NAMES[layout][0]
    comp = _xp.to_numpy(compressed._data if isinstance(compressed, Tensor)
                        else np.asarray(compressed))
    other = _xp.to_numpy(plain._data if isinstance(plain, Tensor) else np.asarray(plain))
    vals = values if isinstance(values, Tensor) else _tensor(values, dtype=dtype)
    if dtype is not None and vals.dtype != np.dtype(dtype):
        vals = vals.to(dtype)
    if device is not None:
        vals = vals.to(device)
    _, cname, pname = _NAMES[layout]
    if comp.ndim != 1 or other.ndim != 1 or vals.ndim != 1:
        raise NotImplementedError(f"sparse_{layout.name[7:]}_tensor: TensorBrain's compressed "
                                  f"tensors are 2-D ({cname}, {pname} and values 1-D); got "
                                  f"shapes {comp.shape}, {other.shape}, {tuple(vals.shape)}")
    if comp.size == 0 or comp[0] != 0 or comp[-1] != other.size or (np.diff(comp) < 0).any():
        raise RuntimeError(f"{cname} must start at 0, be non-decreasing and end at nnz "
                           f"({other.size}); got {comp.tolist()}")
    if other.size != vals.shape[0]:
        raise RuntimeError(f"{pname} and values must have the same number of elements, but got "
                           f"{other.size} and {vals.shape[0]}")
    n_comp = comp.size - 1
    if size is None:
        n_plain = int(other.max()) + 1 if other.size else 0
        size = (n_comp, n_plain) if dim == 0 else (n_plain, n_comp)
    size = tuple(int(s) for s in size)
    if len(size) != 2 or size[dim] != n_comp or (other.size and (other.min() < 0 or
                                                                  other.max() >= size[1 - dim])):
        raise RuntimeError(f"size {size} is inconsistent with {cname} (length {comp.size}) and "
                           f"{pname} (max {other.max() if other.size else None})")
    rep = np.repeat(np.arange(n_comp, dtype=np.int64), np.diff(comp))
    idx = np.stack([rep, other.astype(np.int64)] if dim == 0 else [other.astype(np.int64), rep])
    if vals.is_cuda:
        idx = _xp.cupy().asarray(idx)
    if requires_grad:
        vals.requires_grad_(True)
    return SparseCompressedTensor(idx, vals, size, layout)


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """A CSR tensor, as ``torch.sparse_csr_tensor``.

    Args:
        crow_indices: ``nrows + 1`` offsets into ``col_indices``/``values``.
        col_indices: the column of each value.
        values: the values (a Tensor that requires grad keeps its graph).
        size: ``(nrows, ncols)``; None infers it.
        dtype: the values' dtype.
        device: the device.
        pin_memory: accepted.
        requires_grad: make the values require grad.
        check_invariants: accepted (the invariants are always checked).

    Returns:
        SparseCompressedTensor: layout ``tb.sparse_csr``.

    Raises:
        RuntimeError: offsets that are not a valid compressed index, or indices outside
            ``size``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.sparse_csr_tensor([0, 1, 2], [1, 0], [5.0, 6.0]).to_dense().tolist()
        [[0.0, 5.0], [6.0, 0.0]]
    """
    del pin_memory, check_invariants
    return _compressed_tensor(_layout.sparse_csr, crow_indices, col_indices, values, size,
                              dtype, device, requires_grad)


def sparse_csc_tensor(ccol_indices, row_indices, values, size=None, *, dtype=None, device=None,
                      pin_memory=False, requires_grad=False, check_invariants=None):
    """A CSC tensor, as ``torch.sparse_csc_tensor``.

    Args:
        ccol_indices: ``ncols + 1`` offsets into ``row_indices``/``values``.
        row_indices: the row of each value.
        values: the values.
        size: ``(nrows, ncols)``; None infers it.
        dtype: the values' dtype.
        device: the device.
        pin_memory: accepted.
        requires_grad: make the values require grad.
        check_invariants: accepted.

    Returns:
        SparseCompressedTensor: layout ``tb.sparse_csc``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.sparse_csc_tensor([0, 1, 2], [1, 0], [5.0, 6.0]).to_dense().tolist()
        [[0.0, 6.0], [5.0, 0.0]]
    """
    del pin_memory, check_invariants
    return _compressed_tensor(_layout.sparse_csc, ccol_indices, row_indices, values, size,
                              dtype, device, requires_grad)
