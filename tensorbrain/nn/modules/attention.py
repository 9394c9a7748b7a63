"""``MultiheadAttention``, as ``torch.nn.MultiheadAttention`` (parameter names, masks, shapes).

Parameters: ``in_proj_weight`` (3E, E) and ``in_proj_bias`` when key and value have the query's
embedding size, else ``q_proj_weight``/``k_proj_weight``/``v_proj_weight``; ``bias_k``/``bias_v``
with ``add_bias_kv``; ``out_proj``. A torch state dict loads unchanged. The attention itself is
one fused node (``tensorbrain/_ops/attention.py``).
"""
from __future__ import annotations

from ... import _dtype
from ..._ops import shape as _S
from ..._ops.attention import additive_mask, attention
from ..._xp import get_array_module
from ...tensor import Tensor, empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import NonDynamicallyQuantizableLinear
from .module import Module


class MultiheadAttention(Module):
    """Multi-head scaled dot-product attention.

    Args:
        embed_dim: model size ``E`` (the query's last dim); split over ``num_heads``.
        num_heads: heads; ``embed_dim`` must be divisible by it.
        dropout: dropout on the attention weights (training only).
        bias: biases on the input and output projections.
        add_bias_kv: learnt ``bias_k``/``bias_v`` appended to the key and value sequences.
        add_zero_attn: a zero key/value appended to the sequences.
        kdim, vdim: feature sizes of key and value (default ``embed_dim``).
        batch_first: ``(N, L, E)`` inputs and outputs instead of ``(L, N, E)``.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(output, weights)``: weights
    ``(N, L, S)`` averaged over heads, ``(N, H, L, S)`` without averaging, or None without
    ``need_weights``. Masks: bool True (or a float -inf) masks a position out;
    ``key_padding_mask`` ``(N, S)``; ``attn_mask`` ``(L, S)`` or ``(N * num_heads, L, S)``.
    Unbatched ``(L, E)`` inputs work too. Masks are constants here (no gradient).

    >>> import tensorbrain as tb
    >>> mha = tb.nn.MultiheadAttention(8, 2, batch_first=True)
    >>> x = tb.randn(3, 5, 8)
    >>> out, w = mha(x, x, x)
    >>> out.shape, w.shape
    (tb.Size([3, 5, 8]), tb.Size([3, 5, 5]))
    """

    bias_k: Parameter | None
    bias_v: Parameter | None

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads "
                             f"({num_heads})")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        kw = {"dtype": dtype or _dtype.get_default_dtype(), "device": device}
        if self._qkv_same_embed_dim:
            self.in_proj_weight = Parameter(empty(3 * embed_dim, embed_dim, **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.q_proj_weight = Parameter(empty(embed_dim, embed_dim, **kw))
            self.k_proj_weight = Parameter(empty(embed_dim, self.kdim, **kw))
            self.v_proj_weight = Parameter(empty(embed_dim, self.vdim, **kw))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(empty(1, 1, embed_dim, **kw))
            self.bias_v = Parameter(empty(1, 1, embed_dim, **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self):
        """torch's: xavier_uniform_ projections, zero biases, xavier_normal_ bias_k/bias_v."""
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.zeros_(self.in_proj_bias)
            init.zeros_(self.out_proj.bias)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _project(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        bs = (None, None, None) if b is None else (b[:E], b[E:2 * E], b[2 * E:])
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:
                qkv = F.linear(query, w, b)
                return qkv[..., :E], qkv[..., E:2 * E], qkv[..., 2 * E:]
            ws = (w[:E], w[E:2 * E], w[2 * E:])
        else:
            ws = (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)
        return tuple(F.linear(x, wi, bi) for x, wi, bi in zip((query, key, value), ws, bs,
                                                                strict=True))

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        batched = query.dim() == 3
        if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
            raise RuntimeError(f"MultiheadAttention: query, key and value must all be 3-D "
                               f"(batched) or 2-D (unbatched), got {tuple(query.shape)}, "
                               f"{tuple(key.shape)}, {tuple(value.shape)}")
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                               "Transformer module method `generate_square_subsequent_mask` to "
                               "create this mask.")
        same = (query is key, key is value)
        if not batched:
            query, key, value = (t.unsqueeze(0) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = (t.transpose(0, 1) for t in (query, key, value))
        if same[0] and same[1]:
            key = value = query
        N, L, E = query.shape
        if E != self.embed_dim:
            raise RuntimeError(f"MultiheadAttention: was expecting embedding dimension of "
                               f"{self.embed_dim}, but got {E}")
        if key.shape[-1] != self.kdim or value.shape[-1] != self.vdim:
            raise RuntimeError(f"MultiheadAttention: key/value feature sizes {key.shape[-1]}/"
                               f"{value.shape[-1]} differ from kdim/vdim {self.kdim}/{self.vdim}")
        q, k, v = self._project(query, key, value)
        H, D = self.num_heads, self.head_dim
        xp = get_array_module(q._data)
        dt = q._data.dtype
        mask = None if attn_mask is None else additive_mask(attn_mask, dt, xp, keep_true=False)
        kpm = None if key_padding_mask is None else \
            additive_mask(key_padding_mask, dt, xp, keep_true=False)
        if self.bias_k is not None and self.bias_v is not None:  # add_bias_kv sets both
            k = _S.cat([k, self.bias_k.expand(N, 1, E)], 1)
            v = _S.cat([v, self.bias_v.expand(N, 1, E)], 1)
            mask, kpm = _pad_last(xp, mask), _pad_last(xp, kpm)
        q = q.reshape(N, L, H, D).transpose(1, 2)
        S = k.shape[1]
        k = k.reshape(N, S, H, D).transpose(1, 2)
        v = v.reshape(N, S, H, D).transpose(1, 2)
        if self.add_zero_attn:
            zeros = Tensor._wrap(xp.zeros((N, H, 1, D), dtype=dt))
            k, v = _S.cat([k, zeros], 2), _S.cat([v, zeros], 2)
            mask, kpm = _pad_last(xp, mask), _pad_last(xp, kpm)
            S += 1
        add = _merge_masks(mask, kpm, N, H, L, S)
        out, w = attention(q, k, v, None if add is None else Tensor._wrap(add),
                           self.dropout if self.training else 0.0, need_weights=need_weights)
        out = self.out_proj(out.transpose(1, 2).reshape(N, L, E))
        if w is not None and average_attn_weights:
            w = w.mean(dim=1)
        if not batched:
            out = out.squeeze(0)
            w = None if w is None else w.squeeze(0)
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, w

    def extra_repr(self):
        return ""


def _pad_last(xp, m):
    """A zero column appended to a mask's last dim (the appended key is never masked)."""
    if m is None:
        return None
    return xp.concatenate([m, xp.zeros(m.shape[:-1] + (1,), dtype=m.dtype)], axis=-1)


def _merge_masks(mask, kpm, N, H, L, S):
    """One additive mask broadcastable to ``(N, H, L, S)``, or None."""
    if mask is not None:
        if mask.ndim == 2:
            if mask.shape != (L, S):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(mask.shape)}, but "
                                   f"should be {(L, S)}.")
        elif mask.ndim == 3:
            if mask.shape != (N * H, L, S):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(mask.shape)}, but "
                                   f"should be {(N * H, L, S)}.")
            mask = mask.reshape(N, H, L, S)
        else:
            raise RuntimeError(f"attn_mask's dimension {mask.ndim} is not supported")
    if kpm is not None:
        if kpm.shape != (N, S):
            raise RuntimeError(f"expecting key_padding_mask shape of {(N, S)}, but got "
                               f"{tuple(kpm.shape)}")
        kpm = kpm.reshape(N, 1, 1, S)
        mask = kpm if mask is None else mask + kpm
    return mask
