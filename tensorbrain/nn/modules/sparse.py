"""``Embedding``: a lookup table of ``num_embeddings`` vectors."""
from __future__ import annotations

from ... import _dtype
from ...autograd import grad_mode
from ...tensor import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module


class Embedding(Module):
    """Rows of ``weight`` (N(0, 1) initialised, ``padding_idx`` row zeroed) picked by index.

    >>> import tensorbrain as tb
    >>> emb = tb.nn.Embedding(10, 3, padding_idx=0)
    >>> emb(tb.tensor([[0, 2]])).shape, emb.weight[0].tolist()
    (tb.Size([1, 2, 3]), [0.0, 0.0, 0.0])

    Args:
        num_embeddings: the number of rows.
        embedding_dim: the size of each row.
        padding_idx: a row kept at zero that gets no gradient; None for none.
        max_norm: rows looked up with a larger norm are renormalised to it, in place; None for no
            limit.
        norm_type: the p of the p-norm for ``max_norm``.
        scale_grad_by_freq: scale gradients by the inverse frequency of the indices in the batch.
        sparse: only False is supported.
        device: the device of ``weight``.
        dtype: the dtype of ``weight``; None for the default dtype.

    Raises:
        ValueError: ``padding_idx`` is out of range.
        NotImplementedError: ``sparse=True``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight=None, _freeze: bool = False, device=None, dtype=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"padding_idx {padding_idx} must be within num_embeddings "
                                 f"({num_embeddings})")
            padding_idx %= num_embeddings
        if sparse:
            raise NotImplementedError("Embedding(sparse=True): sparse gradients are not supported")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim,
                                          dtype=dtype or _dtype.get_default_dtype(), device=device),
                                    requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"Shape of weight {tuple(_weight.shape)} does not match "
                                 f"num_embeddings and embedding_dim ({num_embeddings}, "
                                 f"{embedding_dim})")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        """Re-draw the weight from N(0, 1) and zero the ``padding_idx`` row."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with grad_mode.no_grad():
                self.weight._data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, **kwargs):
        """An Embedding around ``embeddings`` (2-D), frozen by default.

        Args:
            embeddings: the 2-D weight, used as is.
            freeze: whether the weight stays fixed in training.
            padding_idx: as in :class:`Embedding`.
            **kwargs: the other arguments of :class:`Embedding`.

        Returns:
            Embedding: the module.

        Raises:
            ValueError: ``embeddings`` is not 2-D.
        """
        if embeddings.dim() != 2:
            raise ValueError(f"Embeddings parameter is expected to be 2-dimensional, got shape "
                             f"{tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   **kwargs)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        return s


class EmbeddingBag(Module):
    """Sums, means or maxes of bags of embeddings (``torch.nn.EmbeddingBag``).

    ``forward(input, offsets=None, per_sample_weights=None)``: ``input`` ``(B, n)`` is B bags
    of n indices; a 1-D ``input`` with ``offsets`` (start of each bag) gives bags of any
    length. ``per_sample_weights`` scales each looked-up row (``mode='sum'`` only).

    >>> import tensorbrain as tb
    >>> bag = tb.nn.EmbeddingBag(10, 3, mode="sum")
    >>> bag(tb.tensor([1, 2, 4, 5, 4]), tb.tensor([0, 2])).shape
    tb.Size([2, 3])

    Args:
        num_embeddings: the number of rows.
        embedding_dim: the size of each row.
        max_norm: rows looked up with a larger norm are renormalised to it; None for no limit.
        norm_type: the p of the p-norm for ``max_norm``.
        scale_grad_by_freq: only False is supported.
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        sparse: only False is supported.
        include_last_offset: ``offsets`` has one more entry, the end of the last bag.
        padding_idx: a row that is left out of the bags and gets no gradient; None for none.
        device: the device of ``weight``.
        dtype: the dtype of ``weight``; None for the default dtype.

    Raises:
        ValueError: an unknown ``mode``.
        NotImplementedError: ``sparse`` or ``scale_grad_by_freq``.
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight=None, include_last_offset: bool = False,
                 padding_idx=None, device=None, dtype=None):
        super().__init__()
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
        if sparse or scale_grad_by_freq:
            raise NotImplementedError("EmbeddingBag: sparse gradients and scale_grad_by_freq "
                                      "are not supported")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"padding_idx {padding_idx} must be within num_embeddings "
                                 f"({num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, False
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(empty(num_embeddings, embedding_dim,
                                          dtype=dtype or _dtype.get_default_dtype(),
                                          device=device))
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError("Shape of weight does not match num_embeddings and "
                                 "embedding_dim")
            self.weight = Parameter(_weight)

    def reset_parameters(self):
        """Draw ``weight`` from N(0, 1) again and zero the ``padding_idx`` row."""
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with grad_mode.no_grad():
                self.weight._data[self.padding_idx] = 0

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, max_norm=None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        mode: str = "mean", sparse: bool = False,
                        include_last_offset: bool = False, padding_idx=None):
        """An EmbeddingBag around the 2-D ``embeddings``, frozen by default.

        Args:
            embeddings: the 2-D weight, used as is.
            freeze: whether the weight stays fixed in training.
            max_norm: as in :class:`EmbeddingBag`.
            norm_type: as in :class:`EmbeddingBag`.
            scale_grad_by_freq: as in :class:`EmbeddingBag`.
            mode: as in :class:`EmbeddingBag`.
            sparse: as in :class:`EmbeddingBag`.
            include_last_offset: as in :class:`EmbeddingBag`.
            padding_idx: as in :class:`EmbeddingBag`.

        Returns:
            EmbeddingBag: the module.

        Raises:
            ValueError: ``embeddings`` is not 2-D.
        """
        if embeddings.dim() != 2:
            raise ValueError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse,
                  embeddings, include_last_offset, padding_idx)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        s += f", mode='{self.mode}'"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
