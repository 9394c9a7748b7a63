"""A small transformer: ``MultiheadAttention`` and ``TransformerEncoderLayer``.

Parameter names follow PyTorch (``self_attn.in_proj_weight``, ``linear1.weight``, ``norm1``...),
so a state dict moves between the two; the math is PyTorch's (scaled dot-product attention,
post-norm by default, ``norm_first=True`` for pre-norm).
"""
from __future__ import annotations

import math

import numpy as np

from ... import _dtype, _xp
from ...tensor import Tensor, empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .dropout import Dropout
from .linear import Linear
from .module import Module
from .normalization import LayerNorm


class NonDynamicallyQuantizableLinear(Linear):
    """PyTorch's name for MultiheadAttention's output projection (kept for identical reprs)."""


def _additive_mask(mask, like):
    """A float mask to add to attention scores: -inf where a bool mask is True."""
    arr = mask._data if isinstance(mask, Tensor) else np.asarray(mask)
    xp = _xp.get_array_module(like._data)
    if arr.dtype == np.bool_:
        arr = xp.where(xp.asarray(arr), xp.asarray(-np.inf, like.dtype), xp.asarray(0, like.dtype))
    return Tensor._wrap(xp.asarray(arr, dtype=like.dtype))


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention, ``(L, N, E)`` inputs (``(N, L, E)`` with
    ``batch_first=True``). Returns ``(output, weights averaged over heads or None)``.

    >>> import tensorbrain as tb
    >>> mha = tb.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = tb.randn(3, 5, 8)
    >>> out, w = mha(x, x, x)
    >>> out.shape, w.shape
    (tb.Size([3, 5, 8]), tb.Size([3, 5, 5]))
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        if add_bias_kv or add_zero_attn or (kdim not in (None, embed_dim)) or \
                (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: add_bias_kv, add_zero_attn and "
                                      "kdim/vdim != embed_dim are not supported")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        dtype = dtype or _dtype.get_default_dtype()
        self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, dtype=dtype, device=device))
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, dtype=dtype, device=device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, device=device, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self):
        init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        n, l_q, e = query.shape
        s = key.shape[1]
        if e != self.embed_dim:
            raise ValueError(f"MultiheadAttention: query has embed dim {e}, expected "
                             f"{self.embed_dim}")
        w, b = self.in_proj_weight, self.in_proj_bias
        if query is key and key is value:
            q, k, v = F.linear(query, w, b).chunk(3, dim=-1)
        else:
            ws = w.chunk(3, dim=0)
            bs = b.chunk(3, dim=0) if b is not None else (None, None, None)
            q, k, v = (F.linear(x, wi, bi) for x, wi, bi in zip((query, key, value), ws, bs))
        h, d = self.num_heads, self.head_dim
        q = q.reshape(n, l_q, h, d).permute(0, 2, 1, 3)
        k = k.reshape(n, s, h, d).permute(0, 2, 3, 1)
        v = v.reshape(n, s, h, d).permute(0, 2, 1, 3)
        scores = (q @ k) * (1.0 / math.sqrt(d))              # (N, H, L, S)
        if is_causal and attn_mask is None:
            attn_mask = np.triu(np.ones((l_q, s), dtype=bool), k=1)
        if attn_mask is not None:
            m = _additive_mask(attn_mask, scores)
            scores = scores + (m.reshape(1, 1, l_q, s) if m.dim() == 2 else
                               m.reshape(n, h, l_q, s))
        if key_padding_mask is not None:
            scores = scores + _additive_mask(key_padding_mask, scores).reshape(n, 1, 1, s)
        attn = F.softmax(scores, dim=-1)
        if self.dropout > 0.0 and self.training:
            attn = F.dropout(attn, self.dropout, True)
        out = (attn @ v).permute(0, 2, 1, 3).reshape(n, l_q, e)
        out = self.out_proj(out)
        if not self.batch_first:
            out = out.transpose(0, 1)
        if not need_weights:
            return out, None
        return out, (attn.mean(dim=1) if average_attn_weights else attn)


class TransformerEncoderLayer(Module):
    """Self-attention + feed-forward block with residuals and LayerNorm (PyTorch's layout).

    >>> import tensorbrain as tb
    >>> layer = tb.nn.TransformerEncoderLayer(16, 4, dim_feedforward=32, batch_first=True)
    >>> layer(tb.randn(2, 7, 16)).shape
    tb.Size([2, 7, 16])
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048,
                 dropout: float = 0.1, activation="relu", layer_norm_eps: float = 1e-5,
                 batch_first: bool = False, norm_first: bool = False, bias: bool = True,
                 device=None, dtype=None):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        if isinstance(activation, str):
            if activation not in ("relu", "gelu"):
                raise ValueError(f"activation should be relu/gelu, not {activation}")
            activation = F.relu if activation == "relu" else F.gelu
        self.activation = activation

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False, is_causal=is_causal)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x
