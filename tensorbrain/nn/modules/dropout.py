"""``Dropout``: zero elements with probability ``p`` in training, scale the rest by 1/(1-p)."""
from __future__ import annotations

from .. import functional as F
from .module import Module


class Dropout(Module):
    """Identity in eval mode; draws its mask from TensorBrain's global generator."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
