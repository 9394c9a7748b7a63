"""The sparse side of a dense ``Tensor`` (``to_sparse``, ``sparse_mask``, ``is_sparse``, torch's
errors for a dense tensor's ``indices``/``values``): a mixin of ``tensorbrain.tensor.Tensor``.

The sparse tensor itself, :class:`tensorbrain.sparse.SparseTensor`, subclasses ``Tensor``, so
``tensorbrain/sparse.py`` is imported here inside the methods that make one.
"""
from __future__ import annotations

from typing import Any

from . import _xp
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
        from .sparse import to_sparse
        return to_sparse(self, *args, **kwargs)

    def to_sparse_coo(self):
        """``to_sparse()``."""
        from .sparse import to_sparse
        return to_sparse(self)

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
        from .sparse import SparseTensor, _scatter_back
        m = mask.coalesce()
        where = tuple(m._indices_arr)
        x = self._data
        xp = _xp.get_array_module(x)
        vals = make(x[where], (self,), lambda g: (_scatter_back(xp, g, where, x.shape),),
                    "SparseMaskBackward")
        return SparseTensor(m._indices_arr, vals, x.shape, True)

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

    def sparse_dim(self) -> int:
        """0: a dense tensor has no sparse dimensions."""
        return 0

    def dense_dim(self) -> int:
        """All its dimensions: a dense tensor's are all dense."""
        return self._data.ndim
