"""The sparse side of a dense ``Tensor`` (``to_sparse``, ``sparse_mask``, ``is_sparse``, torch's
errors for a dense tensor's ``indices``/``values``): a mixin of ``tensorbrain.tensor.Tensor``.

The sparse tensor itself, :class:`tensorbrain.sparse.SparseTensor`, subclasses ``Tensor``, so
this module (below Tensor) does not import it: ``to_sparse`` makes the class that declared
itself with ``made_sparse=True`` (``TensorBase._made_sparse``, as ``TensorBase._wrap`` makes
``Tensor``), and ``sparse_mask`` one of its sparse argument's class.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import _layout, _xp
from ._ops.core import make


class SparseMethods:
    """The sparse side of a dense Tensor (a base class of Tensor)."""

    _data: Any   # the Tensor's array (TensorBase defines it)

    def to_sparse(self, *args, **kwargs):
        """This tensor as a sparse COO tensor (see :func:`to_sparse`).

        Args:
            *args: ``sparse_dim``.
            **kwargs: ``layout``, ``blocksize``, ``dense_dim``.
        """
        return dense_to_sparse(self, *args, **kwargs)

    def to_sparse_coo(self):
        """``to_sparse()``."""
        return dense_to_sparse(self)

    def to_dense(self, dtype=None, *, masked_grad=None):
        """The tensor itself (it is dense), converted to ``dtype`` when given.

        Args:
            dtype: a dtype, or None.
            masked_grad: accepted.
        """
        return self if dtype is None else self.to(dtype)

    def sparse_mask(self, mask):
        """This dense tensor's entries at ``mask``'s stored positions, as a sparse tensor
        (``torch.Tensor.sparse_mask``).

        Args:
            mask: a sparse COO tensor.
        """
        m = mask.coalesce()   # a dense mask raises torch's error
        where = tuple(m._indices_arr)
        x = self._data
        xp = _xp.get_array_module(x)
        vals = make(x[where], (self,), lambda g: (_scatter_back(xp, g, where, x.shape),),
                    "SparseMaskBackward")
        return type(m)(m._indices_arr, vals, x.shape, True)

    @property
    def is_sparse(self) -> bool:
        """False: a dense tensor (``SparseTensor`` says True)."""
        return False

    def _not_sparse(self, name):
        raise RuntimeError(f"{name} expected sparse coordinate tensor layout but got Strided: "
                           f"make one with .to_sparse() (as torch)")

    def indices(self):
        """Raises RuntimeError: a dense tensor has no indices (torch's error)."""
        self._not_sparse("indices")

    def values(self):
        """Raises RuntimeError: a dense tensor has no stored values (torch's error)."""
        self._not_sparse("values")

    def coalesce(self):
        """Raises RuntimeError: only sparse tensors coalesce (torch's error)."""
        self._not_sparse("coalesce")

    def is_coalesced(self):
        """Raises RuntimeError (torch's error for a dense tensor)."""
        self._not_sparse("is_coalesced")

    def to_sparse_csr(self, dense_dim=None):
        """This 2-D tensor in the CSR layout (``tensorbrain/_sparse_compressed.py``).

        Args:
            dense_dim: None or 0 (hybrid compressed tensors are not supported).
        """
        return self._to_compressed(_layout.sparse_csr, dense_dim)

    def to_sparse_csc(self, dense_dim=None):
        """This 2-D tensor in the CSC layout.

        Args:
            dense_dim: None or 0.
        """
        return self._to_compressed(_layout.sparse_csc, dense_dim)

    def _to_compressed(self, layout, dense_dim=None):
        if dense_dim:
            raise NotImplementedError(f"to_sparse({layout}, dense_dim={dense_dim}): hybrid "
                                      f"compressed tensors are not supported by TensorBrain")
        return self._made_compressed._from(self, layout)

    def crow_indices(self):
        """Raises RuntimeError: only CSR tensors have it (torch's error)."""
        raise RuntimeError(compressed_only_message(self, "crow_indices"))

    def col_indices(self):
        """Raises RuntimeError: only CSR tensors have it (torch's error)."""
        raise RuntimeError(compressed_only_message(self, "col_indices"))

    def ccol_indices(self):
        """Raises RuntimeError: only CSC tensors have it (torch's error)."""
        raise RuntimeError(compressed_only_message(self, "ccol_indices"))

    def row_indices(self):
        """Raises RuntimeError: only CSC tensors have it (torch's error)."""
        raise RuntimeError(compressed_only_message(self, "row_indices"))

    def sparse_resize_(self, size, sparse_dim, dense_dim):
        """Raises NotImplementedError: only sparse COO tensors resize this way (torch's error).

        Args:
            size: the new shape.
            sparse_dim: sparse dimensions.
            dense_dim: dense dimensions.
        """
        raise NotImplementedError("Could not run 'aten::sparse_resize_' with arguments from the "
                                  "'CPU' backend: it resizes sparse COO tensors (make one with "
                                  ".to_sparse())")

    def sparse_dim(self) -> int:
        """0: a dense tensor has no sparse dimensions."""
        return 0

    def dense_dim(self) -> int:
        """All its dimensions: a dense tensor's are all dense."""
        return self._data.ndim


def layout_name(t) -> str:
    """torch's name of ``t``'s layout in error messages (``Strided``, ``SparseCsr``...)."""
    return {"strided": "Strided", "sparse_coo": "Sparse", "sparse_csr": "SparseCsr",
            "sparse_csc": "SparseCsc"}.get(t.layout.name, t.layout.name)


def compressed_only_message(t, name: str) -> str:
    """torch's error for ``t.<name>()`` on a tensor without that compressed index."""
    kind = "row" if name in ("crow_indices", "col_indices") else "column"
    return f"{name} expected sparse {kind} compressed tensor layout but got {layout_name(t)}"


def dense_to_sparse(a, sparse_dim=None, *, layout=None, blocksize=None, dense_dim=None):
    """``a`` as a sparse COO tensor of its nonzero entries (:func:`tensorbrain.sparse.to_sparse`
    documents it), made as ``TensorBase._made_sparse``; its values are in ``a``'s graph.

    Args:
        a: the dense tensor.
        sparse_dim: how many leading dimensions to index (default all).
        layout: ``tb.sparse_coo`` or None; ``tb.sparse_csr`` / ``tb.sparse_csc`` for a
            compressed 2-D tensor.
        blocksize: not supported (block layouts).
        dense_dim: accepted when it agrees with ``sparse_dim``.

    Raises:
        NotImplementedError: a block layout (BSR, BSC).
    """
    if layout in (_layout.sparse_csr, _layout.sparse_csc) and blocksize is None:
        return a._to_compressed(layout, dense_dim)
    if layout not in (None, _layout.sparse_coo) or blocksize is not None:
        raise NotImplementedError(f"to_sparse(layout={layout}, blocksize={blocksize}): "
                                  f"TensorBrain supports the COO, CSR and CSC layouts")
    x = a._data
    xp = _xp.get_array_module(x)
    sdim = x.ndim if sparse_dim is None else int(sparse_dim)
    nz = x != 0
    if sdim < x.ndim:
        nz = nz.reshape(x.shape[:sdim] + (-1,)).any(axis=-1)
    idx = xp.stack(xp.nonzero(nz)).astype(np.int64) if x.ndim else xp.zeros((0, 1), np.int64)
    where = tuple(idx)
    vals = make(x[where], (a,), lambda g: (_scatter_back(xp, g, where, x.shape),),
                "ToSparseBackward")
    return a._made_sparse(idx, vals, x.shape, True)


def _scatter_back(xp, g, where, shape):
    out = xp.zeros(shape, dtype=g.dtype)
    out[where] = g
    return out
