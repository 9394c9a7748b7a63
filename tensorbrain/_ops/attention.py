"""Scaled dot-product attention as one graph node (torch's math, a hand-written backward).

Forward: ``S = q k^T * scale + mask``, ``P = softmax(S)``, optional dropout, ``out = P v``; the
backward recomputes nothing and allocates one array per gradient: ``dv = P^T g``,
``dS = P * (dP - rowsum(dP * P))``, ``dq = dS k * scale``, ``dk = dS^T q * scale``. Written from
primitive ops this was six graph nodes and about twice the temporaries.

``need_weights`` also returns ``P`` (after dropout, as ``nn.MultiheadAttention`` does) as a
second tensor whose gradient joins the node's through a shared cell (see ``_ops/rnn.py``).
"""
from __future__ import annotations

import math

import numpy as np

from .. import _gemm, _native, _random
from .._gemm import bmm
from .._xp import get_array_module, matmul
from ..autograd.graph import joint_views
from .._tensor_base import TensorBase as Tensor
from .core import make, unbroadcast
from . import elementwise
from .elementwise import _fused_module
from .rnn import check_outputs, remember_output, side_output


def additive_mask(mask, dtype, xp, keep_true=True):
    """A float array to add to scores: a float mask as it is; a bool mask as 0 where attention
    is allowed and -inf elsewhere (``keep_true``: True means allowed, SDPA's convention;
    otherwise True means masked out, ``nn.MultiheadAttention``'s)."""
    m = mask._data if isinstance(mask, Tensor) else xp.asarray(mask)
    if m.dtype == np.bool_:
        allowed = m if keep_true else ~m
        return xp.where(allowed, xp.asarray(0, dtype), xp.asarray(-np.inf, dtype))
    return m.astype(dtype, copy=False)


def softmax_rows_forward(s, scale, causal):
    """``s = softmax(scale * s)`` over the last dim, in place; ``causal`` keeps column ``j <= i``
    of row ``i`` in each ``(L, S)`` matrix (torch's top-left causal mask) and zeroes the rest.
    The NumPy/CuPy twin of ``tensorbrain._C.softmax_rows_forward`` (one pass per row there;
    six over the whole score array here)."""
    xp = get_array_module(s)
    dt = s.dtype
    s *= dt.type(scale)
    if causal:
        L, S = s.shape[-2:]
        s += xp.where(xp.tril(xp.ones((L, S), dtype=bool)), xp.asarray(0, dt),
                      xp.asarray(-np.inf, dt))
    s -= s.max(axis=-1, keepdims=True)
    xp.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)


def softmax_rows_backward(g, p, scale):
    """``g = scale * p * (g - rowsum(g * p))`` in place: the gradient of the scores through
    :func:`softmax_rows_forward`. The twin of ``tensorbrain._C.softmax_rows_backward``."""
    g -= (g * p).sum(axis=-1, keepdims=True)
    g *= p
    g *= g.dtype.type(scale)


def _swap(a):
    return a.swapaxes(-1, -2)


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False, need_weights=False):
    """``softmax(q k^T * scale + mask) v`` and, with ``need_weights``, the attention weights.

    Args and semantics are ``F.scaled_dot_product_attention``'s; a float ``attn_mask`` gets a
    gradient when it requires one. Returns ``(out, weights or None)``.
    """
    q, k, v = query._data, key._data, value._data
    xp = get_array_module(q)
    if q.ndim < 2 or k.ndim < 2 or v.ndim < 2:
        raise RuntimeError(f"scaled_dot_product_attention: query, key and value need at least 2 "
                           f"dims, got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query {tuple(q.shape)} and key "
                           f"{tuple(k.shape)} must share the last (embedding) dim")
    if k.shape[-2] != v.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key {tuple(k.shape)} and value "
                           f"{tuple(v.shape)} must have the same sequence length (dim -2)")
    if is_causal and attn_mask is not None:
        raise RuntimeError("scaled_dot_product_attention: Explicit attn_mask should not be set "
                           "when is_causal=True")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    dt = q.dtype
    rep = 1
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hq % hk or v.shape[-3] != hk:
            raise RuntimeError(f"scaled_dot_product_attention: with enable_gqa the query heads "
                               f"({hq}) must be a multiple of the key/value heads ({hk}, "
                               f"{v.shape[-3]})")
        rep = hq // hk
        k, v = xp.repeat(k, rep, axis=-3), xp.repeat(v, rep, axis=-3)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    if attn_mask is None and dropout_p == 0.0 and not need_weights and rep == 1 and q.ndim == 4 and \
            q.shape[0] > 1 and q.shape[:-2] == k.shape[:-2] == v.shape[:-2] and \
            all(type(a) is np.ndarray and a.dtype == np.float32 for a in (q, k, v)):
        C = _native.loaded() if elementwise._NATIVE_FUSED else None
        if C is not None:
            return _per_batch(query, key, value, scale, is_causal, C), None
    s = matmul(q, _swap(k))
    mask_t = None
    if attn_mask is not None and not is_causal:
        s *= dt.type(scale)
        add = additive_mask(attn_mask, dt, xp)
        if isinstance(attn_mask, Tensor) and attn_mask.requires_grad and \
                attn_mask._data.dtype != np.bool_:
            mask_t = attn_mask
        if np.broadcast_shapes(s.shape, add.shape) == s.shape:
            s += add
        else:                                             # the mask brings batch dims
            s = s + add
        scale_now = 1.0
    else:
        scale_now = scale
    C = _fused_module(s)
    (softmax_rows_forward if C is None else C.softmax_rows_forward)(s, scale_now, is_causal)
    p = s
    drop = None
    if dropout_p > 0.0:
        if dropout_p == 1.0:
            drop = xp.zeros(p.shape, dtype=dt)
        else:
            drop = (_random.uniform(0.0, 1.0, p.shape, np.float32, p, None) >= dropout_p).astype(dt)
            drop *= dt.type(1.0 / (1.0 - dropout_p))
        pd = p * drop
    else:
        pd = p
    out = matmul(pd, v)
    cell: dict = {}
    shapes = (query._data.shape, key._data.shape, value._data.shape)

    def backward(g):
        check_outputs(cell)
        gw = cell.pop("w", None)
        gv = matmul(_swap(pd), g)
        gp = matmul(g, _swap(v))
        if gw is not None:
            gp += gw
        if drop is not None:
            gp *= drop
        C = _fused_module(gp) if _fused_module(p) is not None else None
        grad_fn = softmax_rows_backward if C is None else C.softmax_rows_backward
        gmask = None
        if mask_t is not None:
            grad_fn(gp, p, 1.0)                           # dS
            gmask = unbroadcast(gp, mask_t._data.shape).astype(mask_t._data.dtype, copy=False)
            gp *= dt.type(scale)
        else:
            grad_fn(gp, p, scale)                         # dS * scale
        gq = matmul(gp, k)
        gk = matmul(_swap(gp), q)
        if rep > 1:
            gk = gk.reshape(gk.shape[:-3] + (-1, rep) + gk.shape[-2:]).sum(axis=-3)
            gv = gv.reshape(gv.shape[:-3] + (-1, rep) + gv.shape[-2:]).sum(axis=-3)
        return (unbroadcast(gq, shapes[0]), unbroadcast(gk, shapes[1]),
                unbroadcast(gv, shapes[2]), gmask)

    res = make(out, (query, key, value, mask_t), backward, "ScaledDotProductAttentionBackward",
               tuple(t for t in (query, key, value) if t is not None))
    weights = side_output(pd, res, cell, "w") if need_weights else None
    if weights is not None:
        remember_output(cell, weights, "the attention weights")
    return res, weights


def _per_batch(query, key, value, scale, is_causal, C):
    """``attention``'s float32 NumPy path without mask or dropout, one (batch, head) matrix at a
    time (C: the native module): each matrix's scores go through the softmax and into ``p @ v``
    while they are in cache, and its score gradients through the softmax's backward and both
    products, instead of every pass over all of them (8 MB for the GPT workload's B=8, 8 heads,
    T=128).

    With MKL loaded (``tensorbrain._gemm``) that is one native call each way
    (``attention_forward``/``_backward`` in csrc/kernels/blas.cpp): the matrices are split
    across ``tb.set_num_threads`` threads, each running its products and softmax on its own
    (as torch's CPU flash attention splits its heads), instead of handing every product to the
    pool. Otherwise it is a loop over the batch here, on NumPy's batched products. Both run the
    same products and row kernels per matrix: the same bits (tests/nn/test_attention_native.py).
    """
    q, k, v = query._data, key._data, value._data
    p = np.empty(q.shape[:-1] + (k.shape[-2],), np.float32)
    # out laid out (B, L, H, Ev) and seen as (B, H, L, Ev), as torch's CPU flash attention does,
    # and each gradient laid out as its input (np.empty_like keeps the axis order): the
    # transpose(1, 2).reshape(B, L, H * E) that models write around attention is then a view
    # each way instead of a copy. q, k, v split out of one projection get their gradients in one
    # array laid out as it (joint_views), which the split's backward takes without a concatenation
    B, H, L = q.shape[:3]
    out = np.empty((B, L, H, v.shape[-1]), np.float32).transpose(0, 2, 1, 3)
    M = _gemm._module()
    if M is None or not M.attention_forward(q, k, v, p, out, scale, is_causal):
        for b in range(q.shape[0]):
            bmm(q[b], _swap(k[b]), out=p[b])
            C.softmax_rows_forward(p[b], scale, is_causal)
            bmm(p[b], v[b], out=out[b])

    def backward(g):
        gq, gk, gv = joint_views((q, k, v)) or (np.empty_like(a, np.float32) for a in (q, k, v))
        if M is not None and M.attention_backward(q, k, v, p, g, gq, gk, gv, scale):
            return gq, gk, gv, None
        g = np.ascontiguousarray(g, np.float32)
        gp = np.empty(p.shape[1:], np.float32)
        for b in range(q.shape[0]):
            bmm(_swap(p[b]), g[b], out=gv[b])
            bmm(g[b], _swap(v[b]), out=gp)
            C.softmax_rows_backward(gp, p[b], scale)      # dS * scale
            bmm(gp, k[b], out=gq[b])
            bmm(_swap(gp), q[b], out=gk[b])
        return gq, gk, gv, None

    return make(out, (query, key, value, None), backward, "ScaledDotProductAttentionBackward",
                (query, key, value))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(query @ key^T * scale + mask) @ value``, as ``torch.nn.functional``'s.

    Args:
        query: ``(..., L, E)``; key ``(..., S, E)``; value ``(..., S, Ev)`` (batch dims
            broadcast).
        attn_mask: bool (True = may attend) or float (added to the scores), broadcastable to
            ``(..., L, S)``.
        dropout_p: dropout on the attention weights (always applied when > 0, as torch: pass
            ``dropout_p if self.training else 0.0``).
        is_causal: mask out keys after the query position (top-left aligned, torch's); not
            together with ``attn_mask``.
        scale: defaults to ``1/sqrt(E)``.
        enable_gqa: let key/value have fewer heads (dim -3) than the query, each shared by
            ``Hq / Hk`` query heads.

    Returns:
        ``(..., L, Ev)``.

    Raises:
        RuntimeError: mismatched shapes, or ``attn_mask`` with ``is_causal``.

    Example:
        >>> import tensorbrain as tb
        >>> q = tb.randn(2, 4, 5, 8)
        >>> tb.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True).shape
        tb.Size([2, 4, 5, 8])
    """
    return attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)[0]
