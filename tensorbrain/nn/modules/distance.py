"""``CosineSimilarity`` and ``PairwiseDistance`` (``torch.nn.modules.distance``)."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class CosineSimilarity(Module):
    """``F.cosine_similarity(x1, x2, dim, eps)``.

    Args:
        dim: the dimension of the vectors.
        eps: the smallest norm.
    """

    def __init__(self, dim: int = 1, eps: float = 1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """``F.pairwise_distance(x1, x2, p, eps, keepdim)``.

    Args:
        p: the norm's order.
        eps: added to the difference.
        keepdim: keep the vector dimension.
    """

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
