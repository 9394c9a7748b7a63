"""``tb.nn.functional``: layers, activations, normalisation and losses as functions (PyTorch names).

The hot ops of a training step (``linear``, ``cross_entropy``, the normalisations) are single
fused ops: one graph node with a hand-written backward, so a step costs about what the same math
written in NumPy costs. Convolution and pooling live in ``tensorbrain/_ops/conv.py`` (im2col),
the losses in ``_ops/loss.py``, the normalisations in ``_ops/norm.py``; this module is the
public face and holds the rest.

>>> import tensorbrain as tb
>>> import tensorbrain.nn.functional as F
>>> x = tb.randn(4, 3, requires_grad=True)
>>> loss = F.cross_entropy(F.linear(x, tb.randn(5, 3)), tb.tensor([0, 1, 2, 3]))
>>> loss.backward(); tuple(x.grad.shape)
(4, 3)
"""
from __future__ import annotations

import math

import numpy as np

from .. import _gemm, _random
from .._ops import elementwise as _E
from .._ops import reduce as _R
from .._ops import shape as _S
from .._ops import attention as _attention
from .._ops import nn_extra as _nn_extra
from .._ops.conv import adaptive_avg_pool2d, avg_pool2d, conv2d, max_pool2d  # noqa: F401
from .._ops.convnd import (conv1d, conv3d, conv_transpose1d, conv_transpose2d,  # noqa: F401
                           conv_transpose3d)
from .._ops.loss_margin import (cosine_embedding_loss, ctc_loss, margin_ranking_loss,  # noqa: F401
                                pairwise_distance, triplet_margin_loss)
from .._ops.resample import interpolate, pixel_shuffle, pixel_unshuffle, upsample  # noqa: F401
from .._ops.core import make, sum_axes
from .._ops.nn_extra import (alpha_dropout, dropout1d, dropout2d, dropout3d,  # noqa: F401
                              embedding_bag, feature_alpha_dropout, hardsigmoid, hardswish,
                              mish, prelu, rms_norm)
from .._ops.loss import (_log_softmax_array, _same_device, binary_cross_entropy,  # noqa: F401
                         binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div,
                         l1_loss, mse_loss, nll_loss, smooth_l1_loss)
from .._ops.norm import batch_norm, group_norm, layer_norm  # noqa: F401
from .._ops.softmax import log_softmax, softmax, softmin  # noqa: F401
from .._ops import activations as _activations
from .._ops import nn_more as _nn_more
from .._ops import pooling as _pooling
from .._ops.activations import (elu, gelu, hardtanh, leaky_relu, logsigmoid, relu,  # noqa: F401
                                relu6, sigmoid, silu, softplus, tanh)
from .._ops.activations import (celu, celu_, elu_, glu, gumbel_softmax, hardtanh_,  # noqa: F401
                                leaky_relu_, relu_, selu, selu_, softshrink, softsign, tanhshrink,
                                threshold, threshold_)
from .._ops.nn_more import (affine_grid, fold, gaussian_nll_loss, grid_sample,  # noqa: F401
                            grouped_mm, instance_norm, poisson_nll_loss, unfold)
from .._ops.scaled_mm import (ScalingType, SwizzleType, scaled_grouped_mm,  # noqa: E402,F401
                              scaled_mm)
from .._ops.pooling import (adaptive_avg_pool1d, adaptive_avg_pool3d,  # noqa: F401
                            adaptive_max_pool1d, adaptive_max_pool2d, adaptive_max_pool3d,
                            avg_pool1d, avg_pool3d, max_pool1d, max_pool3d)
from .._ops.pointwise import hardshrink  # noqa: F401
from .._xp import get_array_module
from ..tensor import Tensor
from ..autograd.engine import take_grad_dest
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py

__all__ = [
    "linear", "bilinear", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "softmax",
    "log_softmax", "softmin", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits", "binary_cross_entropy",
    "kl_div", "dropout", "embedding", "layer_norm", "batch_norm", "group_norm", "relu", "relu6",
    "gelu", "silu", "sigmoid", "tanh", "leaky_relu", "elu", "softplus", "logsigmoid",
    "hardtanh", "pad", "one_hot", "normalize", "cosine_similarity",
    "scaled_dot_product_attention", *_nn_extra.__all__,
]
__all__ += ["conv1d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
            "conv_tbc"]
from .._ops.conv_tbc import conv_tbc  # noqa: E402,F401  (torch.nn.functional.conv_tbc too)
__all__ += ["cosine_embedding_loss", "margin_ranking_loss", "pairwise_distance",
            "triplet_margin_loss", "ctc_loss"]
__all__ += ["interpolate", "upsample", "pixel_shuffle", "pixel_unshuffle"]
__all__ += [n for m in (_activations, _nn_more, _pooling) for n in dir(m)
            if not n.startswith("_") and callable(getattr(m, n))
            and getattr(getattr(m, n), "__module__", "") == m.__name__]
__all__ += ["hardshrink"]

# ***** linear layers *****
@autocast_op("linear")
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` as one op (one GEMM forward, two backward).

    >>> import tensorbrain as tb
    >>> tb.nn.functional.linear(tb.ones(2, 3), tb.ones(4, 3), tb.zeros(4)).shape
    tb.Size([2, 4])

    Args:
        input: ``(*, in_features)``.
        weight: ``(out_features, in_features)``.
        bias: ``(out_features,)`` or None.
    """
    x, w = input._data, weight._data
    _same_device("linear", input, weight, bias)
    if x.shape[-1] != w.shape[-1] or w.ndim != 2:
        raise RuntimeError(f"linear: mat1 and mat2 shapes cannot be multiplied "
                           f"(input {tuple(x.shape)}, weight {tuple(w.shape)}: the input's last "
                           f"dim must equal weight.shape[1])")
    x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
    xp = get_array_module(x)
    out = _gemm.mm(x2, w.T, bias=None if bias is None else bias._data)
    if x.ndim != 2:
        out = out.reshape(x.shape[:-1] + (w.shape[0],))

    def backward(g):
        g = xp.ascontiguousarray(g)   # a stride-0 broadcast g would make matmul skip BLAS
        g2 = g.reshape(-1, g.shape[-1]) if g.ndim != 2 else g
        gx = gw = gb = None
        if input.requires_grad:
            gx = _gemm.mm(g2, w)
            if x.ndim != 2:
                gx = gx.reshape(x.shape)
        if weight.requires_grad:
            dest = take_grad_dest(weight, w.shape, g2.dtype) if g2.dtype == x2.dtype else None
            gw = _gemm.mm(g2.T, x2, out=dest)
        if bias is not None and bias.requires_grad:
            dest = take_grad_dest(bias, bias._data.shape, g2.dtype)
            gb = sum_axes(g2, (0,), out=dest)
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "AddmmBackward", (input, weight))


@autocast_op("bilinear")
def bilinear(input1, input2, weight, bias=None):
    """``y_k = x1 @ W_k @ x2 + b_k`` (weight (out, in1, in2)), from primitive ops.

    Args:
        input1: ``(*, in1)``.
        input2: ``(*, in2)``.
        weight: ``(out, in1, in2)``.
        bias: ``(out,)`` or None.
    """
    t = _S.matmul(_S.unsqueeze(_S.unsqueeze(input1, -2), -3), weight)      # (..., out, 1, in2)
    y = _S.squeeze(_S.matmul(t, _S.unsqueeze(_S.unsqueeze(input2, -2), -1)), (-1, -2))
    return y if bias is None else _E.add(y, bias)


# ***** regularisation and lookup *****
def dropout(input, p=0.5, training=True, inplace=False, generator=None):
    """Zero elements with probability ``p`` and scale the rest by 1/(1-p) (tb's generator).

    Args:
        input: the tensor.
        p: the probability of zeroing an element.
        training: apply dropout (False: return ``input`` unchanged).
        inplace: write into ``input``.
        generator: the ``tb.Generator`` to draw the mask from.
    """
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    x = input._data
    xp = get_array_module(x)
    if p == 1.0:
        mask = xp.zeros(x.shape, dtype=x.dtype)
    else:
        u = _random.uniform(0.0, 1.0, x.shape, np.float32, x, generator)
        mask = (u >= p).astype(x.dtype)   # in x's dtype from the start: no float64 temporary
        mask *= 1.0 / (1.0 - p)
    if inplace:
        return input.mul_(Tensor._wrap(mask))
    return make(x * mask, (input,), lambda g: (g * mask,), "NativeDropoutBackward")


def _index_add(xp, target, idx, values):
    if xp is np:
        np.add.at(target, idx, values)
    else:
        import cupyx  # type: ignore
        cupyx.scatter_add(target, idx, values)


def _embedding_rows_add(target, idx, rows):
    """``target[idx[i]] += rows[i]`` for every i (repeats accumulate), on NumPy: natively one add
    per row (``tensorbrain._C.embedding_rows_add``) for float32, else :func:`embedding_rows_add`."""
    C = _E._fused_module(rows)
    if C is not None and _E._fused_module(target) is not None:
        C.embedding_rows_add(target, get_array_module(idx).ascontiguousarray(idx, dtype=np.int64), rows)
    else:
        embedding_rows_add(target, idx, rows)


def embedding_rows_add(target, idx, rows):
    """The NumPy twin of ``tensorbrain._C.embedding_rows_add``: the rows sorted by index and
    summed per run of equal indices (``np.add.reduceat``), one add per distinct index (equal
    to the kernel's sums up to float32 rounding: reduceat adds in its own order). ``np.add.at``
    went row by row: 4.8 against 0.8 ms for torch for a GPT's (8, 128) lookups of 256-wide
    rows; the kernel takes 0.06-0.07 ms (with the zeroed table) for an LSTM LM's 700 lookups of
    200-wide rows where this twin takes 1.3-1.9 (torch 0.16)."""
    order = np.argsort(idx, kind="stable")
    sidx = idx[order]
    starts = np.flatnonzero(np.concatenate(([True], sidx[1:] != sidx[:-1])))
    target[sidx[starts]] += np.add.reduceat(rows[order], starts, axis=0)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer tensor ``input``; repeated ids accumulate grad.

    Args:
        input: an integer tensor of indices.
        weight: ``(num_embeddings, embedding_dim)``.
        padding_idx: an index whose row gets no gradient.
        max_norm: rows looked up are renormalised in place to at most this norm.
        norm_type: the p of that norm.
        scale_grad_by_freq: scale gradients by the inverse frequency of each index in the batch.
        sparse: not used (gradients are always dense).
    """
    idx = input._data
    w = weight._data
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"embedding: indices must be an integer tensor, got {idx.dtype}")
    n = w.shape[0]
    if idx.size and (int(idx.min()) < -n or int(idx.max()) >= n):
        raise IndexError(f"embedding: index out of range for a table of {n} rows "
                         f"(indices span [{int(idx.min())}, {int(idx.max())}])")
    xp = get_array_module(w)
    if padding_idx is not None and padding_idx < 0:
        padding_idx += n
    if max_norm is not None:  # renormalise the looked-up rows in place, as PyTorch (no grad)
        rows = xp.unique(idx.reshape(-1))
        norms = (xp.abs(w[rows]) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
        scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
        w[rows] *= scale[:, None]
        weight._version[0] += 1
    out = w[idx]
    flat = idx.reshape(-1)

    def backward(g):
        g2 = g.reshape(-1, w.shape[1])
        if scale_grad_by_freq:
            counts = xp.bincount(flat % n, minlength=n)
            g2 = g2 / counts[flat % n][:, None]
        gw = xp.zeros(w.shape, dtype=g.dtype)
        if xp is np and g2.shape[0] > 1:
            _embedding_rows_add(gw, flat % n, g2)
        else:
            _index_add(xp, gw, flat, g2)
        if padding_idx is not None:
            gw[padding_idx] = 0
        return (None, gw)
    return make(out, (None, weight), backward, "EmbeddingBackward")

# ***** shape helpers *****
def _take_axis(a, idx, axis):
    """``take`` along ``axis`` with an index vector (repeats accumulate in backward)."""
    x = a._data
    xp = get_array_module(x)
    out = xp.take(x, idx, axis=axis)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        _index_add(xp, gx, (slice(None),) * axis + (idx,), g)
        return (gx,)
    return make(out, (a,), backward, "IndexSelectBackward")


def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad)//2`` dims: ``pad = (left, right, top, bottom, ...)`` from the last
    dim backwards. ``mode``: 'constant' (negative pads crop), 'reflect', 'replicate', 'circular'.

    Args:
        input: the tensor.
        pad: ``(left, right, top, bottom, front, back)``, as many pairs as dimensions to pad.
        mode: ``'constant'``, ``'reflect'``, ``'replicate'`` or ``'circular'``.
        value: the fill value for ``'constant'`` (default 0).
    """
    x = input._data
    if len(pad) % 2 or len(pad) // 2 > x.ndim:
        raise ValueError(f"pad: padding length {len(pad)} must be even and at most 2 * ndim "
                         f"({2 * x.ndim}) for input of shape {tuple(x.shape)}")
    xp = get_array_module(x)
    pairs = [(0, 0)] * x.ndim
    for i in range(len(pad) // 2):
        pairs[x.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if mode == "constant":
        new = tuple(s + a + b for s, (a, b) in zip(x.shape, pairs))
        if any(n < 0 for n in new):
            raise RuntimeError(f"pad: padding {tuple(pad)} gives a negative size for input of shape "
                               f"{tuple(x.shape)}")
        src = tuple(slice(max(-a, 0), s - max(-b, 0)) for s, (a, b) in zip(x.shape, pairs))
        dst = tuple(slice(max(a, 0), n - max(b, 0)) for n, (a, b) in zip(new, pairs))
        out = xp.full(new, 0 if value is None else value, dtype=x.dtype)
        out[dst] = x[src]

        def backward(g):
            gx = xp.zeros(x.shape, dtype=g.dtype)
            gx[src] = g[dst]
            return (gx,)
        return make(out, (input,), backward, "ConstantPadNdBackward")
    np_mode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode)
    if np_mode is None:
        raise ValueError(f"pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    out = input
    for axis, (a, b) in enumerate(pairs):
        if a or b:
            n = x.shape[axis]
            if mode == "reflect" and (a >= n or b >= n):
                raise RuntimeError(f"pad: reflect padding ({a}, {b}) must be smaller than the input "
                                   f"dim {axis} of size {n}")
            idx = np.pad(np.arange(n), (a, b), mode=np_mode)
            out = _take_axis(out, xp.asarray(idx), axis)
    return out


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encoding with a new last dim of ``num_classes`` (max + 1 when -1).

    Args:
        tensor: an integer tensor of class indices.
        num_classes: the number of classes (-1: the largest index + 1).
    """
    t = tensor._data
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"one_hot is only applicable to index tensors, got {t.dtype}")
    xp = get_array_module(t)
    if t.size and int(t.min()) < 0:
        raise RuntimeError("one_hot: class values must be non-negative")
    if num_classes == -1:
        num_classes = int(t.max()) + 1 if t.size else 0
    elif t.size and int(t.max()) >= num_classes:
        raise RuntimeError(f"one_hot: class values must be smaller than num_classes={num_classes} "
                           f"(max is {int(t.max())})")
    out = (t[..., None] == xp.arange(num_classes)).astype(np.int64)
    return Tensor._wrap(out)


@autocast_op("normalize")
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``.

    Args:
        input: the tensor.
        p: the norm's exponent.
        dim: the dimension to normalise along.
        eps: the smallest norm divided by.
        out: not used (accepted for torch's signature; the result is returned).
    """
    if p == 2:
        norm = _E.sqrt(_R.sum(_E.mul(input, input), dim, keepdim=True))
    else:
        norm = _E.pow(_R.sum(_E.pow(_E.abs(input), p), dim, keepdim=True), 1.0 / p)
    return _E.div(input, _E.clamp(norm, min=eps))


@autocast_op("cosine_similarity")
def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """Cosine of the angle between ``x1`` and ``x2`` along ``dim``.

    Args:
        x1: a tensor.
        x2: a tensor broadcastable with ``x1``.
        dim: the dimension of the vectors.
        eps: lower bound of each norm, against division by zero.

    Returns:
        The similarities, with ``dim`` removed.

    Example:
        >>> import tensorbrain as tb
        >>> tb.nn.functional.cosine_similarity(tb.tensor([[1.0, 0.0]]), tb.tensor([[1.0, 1.0]])).tolist()
        [0.7071067690849304]
    """
    dot = _R.sum(_E.mul(x1, x2), dim)
    n1 = _E.sqrt(_R.sum(_E.mul(x1, x1), dim))
    n2 = _E.sqrt(_R.sum(_E.mul(x2, x2), dim))
    return _E.div(dot, _E.clamp(_E.mul(n1, n2), min=eps))


@autocast_op("scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """``softmax(q k^T * scale + mask) v`` as one fused node (``tensorbrain/_ops/attention.py``).

    Args:
        query: ``(..., L, E)``.
        key: ``(..., S, E)``.
        value: ``(..., S, Ev)``.
        attn_mask: a boolean mask (True: attend) or an additive float mask (which gets a
            gradient), broadcastable to ``(..., L, S)``.
        dropout_p: dropout probability on the attention weights.
        is_causal: also apply a lower-triangular (causal) mask.
        scale: the factor on ``q k^T`` (default ``1 / sqrt(E)``).
        enable_gqa: grouped-query attention: ``key``/``value`` with fewer heads than ``query``
            are repeated across head groups, as torch's.

    Returns:
        ``(..., L, Ev)``.
    """
    return _attention.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
                                                   is_causal, scale, enable_gqa)


# ***** written from this module's own functions (pad, linear, dropout) *****
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
    sq = _E.mul(input, input)
    c = input.shape[1]
    padded = pad(_S.unsqueeze(sq, 1), (0, 0) * (input.ndim - 2) + (size // 2, (size - 1) // 2))
    windows = _S.stack([_S.narrow(padded, 2, i, c) for i in range(size)], 0)
    div = _S.squeeze(_R.mean(windows, 0), 1)
    return _E.div(input, _E.pow(_E.add(_E.mul(div, alpha), k), beta))



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
        embed_dim_to_check: _E.
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
    unbatched = query.ndim == 2
    if unbatched:
        query, key, value = (_S.unsqueeze(t, 1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = _S.unsqueeze(key_padding_mask, 0)
    L, N, E_ = query.shape
    if E_ != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {E_}")
    hd = E_ // num_heads
    if use_separate_proj_weight:
        bq, bk, bv = (None, None, None) if in_proj_bias is None else \
            tuple(_S.split(in_proj_bias, E_))
        q, k, v = (linear(query, q_proj_weight, bq), linear(key, k_proj_weight, bk),
                   linear(value, v_proj_weight, bv))
    else:
        wq, wk, wv = _S.split(in_proj_weight, E_)
        bq, bk, bv = (None, None, None) if in_proj_bias is None else \
            tuple(_S.split(in_proj_bias, E_))
        q, k, v = linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)
    xp = get_array_module(q._data)
    if attn_mask is not None and attn_mask._data.dtype == np.bool_:
        attn_mask = _E.where(attn_mask, float("-inf"), 0.0)
    if attn_mask is None and is_causal:
        attn_mask = Tensor._wrap(xp.triu(xp.full((L, k.shape[0]), -np.inf,
                                                 dtype=q._data.dtype), 1))
    if bias_k is not None and bias_v is not None:
        k = _S.cat([k, _S.expand(_S.reshape(bias_k, 1, 1, E_), 1, N, E_)])
        v = _S.cat([v, _S.expand(_S.reshape(bias_v, 1, 1, E_), 1, N, E_)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    if add_zero_attn:
        k = _S.cat([k, Tensor._wrap(xp.zeros((1, N, E_), dtype=k._data.dtype))])
        v = _S.cat([v, Tensor._wrap(xp.zeros((1, N, E_), dtype=v._data.dtype))])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    Sk = k.shape[0]

    def heads(t, n):
        return _S.transpose(_S.reshape(t, n, N * num_heads, hd), 0, 1)   # (N*h, n, hd)
    q, k, v = heads(q, L), heads(k, Sk), heads(v, Sk)
    scores = _E.mul(_S.matmul(q, _S.transpose(k, 1, 2)), 1.0 / math.sqrt(hd))
    if attn_mask is not None:
        scores = _E.add(scores, attn_mask if attn_mask.ndim == 3 else _S.unsqueeze(attn_mask, 0))
    if key_padding_mask is not None:
        kpm = key_padding_mask
        if kpm._data.dtype == np.bool_:
            kpm = _E.where(kpm, float("-inf"), 0.0)
        scores = _S.reshape(_E.add(_S.reshape(scores, N, num_heads, L, Sk),
                                 _S.reshape(kpm, N, 1, 1, Sk)), N * num_heads, L, Sk)
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p, training)
    out = _S.reshape(_S.transpose(_S.matmul(weights, v), 0, 1), L, N, E_)
    out = linear(out, out_proj_weight, out_proj_bias)
    if unbatched:
        out = _S.squeeze(out, 1)
    if not need_weights:
        return out, None
    w = _S.reshape(weights, N, num_heads, L, Sk)
    if average_attn_weights:
        w = _R.mean(w, 1)
    return out, (_S.squeeze(w, 0) if unbatched else w)


def upsample_nearest(input, size=None, scale_factor=None):
    """Deprecated alias of ``interpolate(..., mode="nearest")``, as ``F.upsample_nearest``."""
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    """Deprecated alias of ``interpolate(..., mode="bilinear", align_corners=True)``, as
    ``F.upsample_bilinear`` (note: corners aligned, unlike ``interpolate``'s default)."""
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
    return dropout(input, p, train, inplace=True)


from ..overrides import handle_torch_function, has_torch_function  # noqa: E402,F401  (torch's)

__all__ += ["local_response_norm", "multi_head_attention_forward", "upsample_bilinear",
            "upsample_nearest"]
