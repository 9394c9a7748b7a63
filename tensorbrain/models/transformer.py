"""A small transformer classifier built from ``tb.nn.TransformerEncoderLayer``."""
from __future__ import annotations

from .. import nn
from ..tensor import arange


class TinyTransformer(nn.Module):
    """Token embedding + learned positions, ``num_layers`` pre-norm encoder blocks (multi-head
    attention + MLP), mean pooling over tokens, a linear head.

    >>> import tensorbrain as tb
    >>> m = tb.models.TinyTransformer(vocab_size=50, num_classes=3, d_model=16, nhead=2,
    ...                               num_layers=1, max_len=8)
    >>> m(tb.randint(0, 50, (4, 8))).shape
    tb.Size([4, 3])
    """

    def __init__(self, vocab_size, num_classes, d_model=64, nhead=4, num_layers=2,
                 dim_feedforward=None, dropout=0.1, max_len=128):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward or 4 * d_model, dropout,
                                       activation="gelu", batch_first=True, norm_first=True)
            for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, num_classes)
        self.max_len = max_len

    def forward(self, tokens, key_padding_mask=None):
        n, length = tokens.shape
        if length > self.max_len:
            raise ValueError(f"sequence length {length} exceeds max_len={self.max_len}")
        x = self.tok(tokens) + self.pos(arange(length, device=tokens.device))
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=key_padding_mask)
        return self.head(self.norm(x).mean(dim=1))
