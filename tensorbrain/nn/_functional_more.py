"""``nn.functional`` ops written from the public ``nn.functional`` ones (``pad``, ``linear``,
``dropout``), so they sit in the nn layer: ``local_response_norm`` and
``multi_head_attention_forward`` (the rest of the long tail is in ``tensorbrain/_ops/nn_more.py``).
"""
from __future__ import annotations

import math

import numpy as np

from .._ops import elementwise as E
from .._ops import reduce as R
from .._ops import shape as S
from .._xp import get_array_module
from ..tensor import Tensor


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """``x / (k + alpha * mean of squares over `size` neighbouring channels) ** beta``, as
    ``F.local_response_norm``.

    Args:
        input: ``(N, C, ...)``.
        size: how many channels to average over.
        alpha: the scale of the average.
        beta: the exponent.
        k: the additive constant.

    Returns:
        Tensor: ``input``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> import tensorbrain.nn.functional as F
        >>> F.local_response_norm(tb.zeros(1, 2, 1), 2).tolist()
        [[[0.0], [0.0]]]
    """
    from .functional import pad
    sq = E.mul(input, input)
    c = input.shape[1]
    padded = pad(S.unsqueeze(sq, 1), (0, 0) * (input.ndim - 2) + (size // 2, (size - 1) // 2))
    windows = S.stack([S.narrow(padded, 2, i, c) for i in range(size)], 0)
    div = S.squeeze(R.mean(windows, 0), 1)
    return E.div(input, E.pow(E.add(E.mul(div, alpha), k), beta))



def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention on ``(L, N, E)`` inputs with explicit weights, as
    ``F.multi_head_attention_forward`` (what ``nn.MultiheadAttention`` calls in torch).

    Args:
        query: ``(L, N, E)`` (or ``(L, E)`` unbatched).
        key: ``(S, N, E)``.
        value: ``(S, N, E)``.
        embed_dim_to_check: E.
        num_heads: the number of heads.
        in_proj_weight: ``(3E, E)`` (None with ``use_separate_proj_weight``).
        in_proj_bias: ``(3E,)`` or None.
        bias_k: a learned key appended to every sequence, or None.
        bias_v: the matching value, or None.
        add_zero_attn: append a zero key/value.
        dropout_p: dropout on the attention weights (in training).
        out_proj_weight: ``(E, E)``.
        out_proj_bias: ``(E,)`` or None.
        training: apply dropout.
        key_padding_mask: ``(N, S)``, True (or -inf) where a key is padding.
        need_weights: also return the attention weights.
        attn_mask: ``(L, S)`` or ``(N * heads, L, S)``, bool (True = masked) or additive.
        use_separate_proj_weight: use ``q/k/v_proj_weight``.
        q_proj_weight: ``(E, E)``.
        k_proj_weight: ``(E, kdim)``.
        v_proj_weight: ``(E, vdim)``.
        static_k: not supported (NotImplementedError).
        static_v: not supported.
        average_attn_weights: average the returned weights over the heads.
        is_causal: a causal mask when ``attn_mask`` is None.

    Returns:
        tuple: ``(output (L, N, E), weights or None)``.
    """
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k/static_v are not "
                                  "supported by TensorBrain")
    from .._ops.softmax import softmax
    from .functional import dropout, linear, pad
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = (S.unsqueeze(t, 1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = S.unsqueeze(key_padding_mask, 0)
    L, N, E_ = query.shape
    if E_ != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {E_}")
    hd = E_ // num_heads
    if use_separate_proj_weight:
        bq, bk, bv = (None, None, None) if in_proj_bias is None else \
            tuple(S.split(in_proj_bias, E_))
        q, k, v = (linear(query, q_proj_weight, bq), linear(key, k_proj_weight, bk),
                   linear(value, v_proj_weight, bv))
    else:
        wq, wk, wv = S.split(in_proj_weight, E_)
        bq, bk, bv = (None, None, None) if in_proj_bias is None else \
            tuple(S.split(in_proj_bias, E_))
        q, k, v = linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)
    xp = get_array_module(q._data)
    if attn_mask is not None and attn_mask._data.dtype == np.bool_:
        attn_mask = E.where(attn_mask, float("-inf"), 0.0)
    if attn_mask is None and is_causal:
        attn_mask = Tensor._wrap(xp.triu(xp.full((L, k.shape[0]), -np.inf,
                                                 dtype=q._data.dtype), 1))
    if bias_k is not None and bias_v is not None:
        k = S.cat([k, S.expand(S.reshape(bias_k, 1, 1, E_), 1, N, E_)])
        v = S.cat([v, S.expand(S.reshape(bias_v, 1, 1, E_), 1, N, E_)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    if add_zero_attn:
        k = S.cat([k, Tensor._wrap(xp.zeros((1, N, E_), dtype=k._data.dtype))])
        v = S.cat([v, Tensor._wrap(xp.zeros((1, N, E_), dtype=v._data.dtype))])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    Sk = k.shape[0]

    def heads(t, n):
        return S.transpose(S.reshape(t, n, N * num_heads, hd), 0, 1)   # (N*h, n, hd)
    q, k, v = heads(q, L), heads(k, Sk), heads(v, Sk)
    scores = E.mul(S.matmul(q, S.transpose(k, 1, 2)), 1.0 / math.sqrt(hd))
    if attn_mask is not None:
        scores = E.add(scores, attn_mask if attn_mask.ndim == 3 else S.unsqueeze(attn_mask, 0))
    if key_padding_mask is not None:
        kpm = key_padding_mask
        if kpm._data.dtype == np.bool_:
            kpm = E.where(kpm, float("-inf"), 0.0)
        scores = S.reshape(E.add(S.reshape(scores, N, num_heads, L, Sk),
                                 S.reshape(kpm, N, 1, 1, Sk)), N * num_heads, L, Sk)
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training)
    out = S.reshape(S.transpose(S.matmul(weights, v), 0, 1), L, N, E_)
    out = linear(out, out_proj_weight, out_proj_bias)
    if unbatched:
        out = S.squeeze(out, 1)
    if not need_weights:
        return out, None
    w = S.reshape(weights, N, num_heads, L, Sk)
    if average_attn_weights:
        w = R.mean(w, 1)
    return out, (S.squeeze(w, 0) if unbatched else w)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated alias of ``interpolate(..., mode="nearest")``, as ``F.upsample_nearest``."""
    from .._ops.resample import interpolate
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated alias of ``interpolate(..., mode="bilinear", align_corners=True)``, as
    ``F.upsample_bilinear`` (note: corners aligned, unlike ``interpolate``'s default)."""
    from .._ops.resample import interpolate
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def dropout_(input, p: float = 0.5, train: bool = True):
    """``torch.dropout_`` (served as ``tb.dropout_``): dropout in place on ``input``.

    Args:
        input: the tensor, changed in place.
        p: the probability of zeroing an element.
        train: drop (True) or leave ``input`` as it is (False).

    Returns:
        ``input``, zeroed where dropped and scaled by ``1 / (1 - p)`` elsewhere when ``train``.
    """
    from .functional import dropout
    return dropout(input, p, train, inplace=True)
