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
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("Embedding: max_norm and scale_grad_by_freq are not supported")
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
        """An Embedding around ``embeddings`` (2-D), frozen by default."""
        if embeddings.dim() != 2:
            raise ValueError(f"Embeddings parameter is expected to be 2-dimensional, got shape "
                             f"{tuple(embeddings.shape)}")
        rows, cols = embeddings.shape
        return cls(rows, cols, _weight=embeddings, _freeze=freeze, padding_idx=padding_idx,
                   **kwargs)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s
