"""Layers seen in real PyTorch programs, as ``torch.nn.functional``: ``mish``, ``hardswish``,
``hardsigmoid``, ``prelu``, ``rms_norm``, ``alpha_dropout``, ``feature_alpha_dropout``,
``dropout1d/2d/3d`` and ``embedding_bag``. Each is one op with its backward next to it.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .. import _random
from .._xp import get_array_module
from .core import make

__all__ = ["mish", "hardswish", "hardsigmoid", "prelu", "rms_norm", "alpha_dropout",
           "feature_alpha_dropout", "dropout1d", "dropout2d", "dropout3d", "embedding_bag"]


# ***** activations *****
def mish(input, inplace=False):
    """``x * tanh(softplus(x))``."""
    x = input._data
    xp = get_array_module(x)
    sp = xp.logaddexp(0, x)
    t = xp.tanh(sp)

    def backward(g):
        sig = 1 / (1 + xp.exp(-x))
        return ((g * (t + x * (1 - t * t) * sig)).astype(x.dtype, copy=False),)
    return make((x * t).astype(x.dtype, copy=False), (input,), backward, "MishBackward",
                (input,))


def hardswish(input, inplace=False):
    """``x * relu6(x + 3) / 6``; gradient 0 below -3, 1 above 3, ``x/3 + 1/2`` between."""
    x = input._data
    xp = get_array_module(x)
    out = (x * xp.clip(x + 3, 0, 6) / 6).astype(x.dtype, copy=False)

    def backward(g):
        d = xp.where(x < -3, 0, xp.where(x <= 3, x / 3 + 0.5, 1)).astype(g.dtype, copy=False)
        return (g * d,)
    return make(out, (input,), backward, "HardswishBackward", (input,))


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``; gradient 1/6 strictly inside (-3, 3)."""
    x = input._data
    xp = get_array_module(x)
    out = (xp.clip(x + 3, 0, 6) / 6).astype(x.dtype, copy=False)
    inside = ((x > -3) & (x < 3)).astype(x.dtype) / 6
    return make(out, (input,), lambda g: (g * inside,), "HardsigmoidBackward", (input,))


def prelu(input, weight):
    """``max(0, x) + weight * min(0, x)``, ``weight`` one value or one per channel (dim 1), as
    ``torch.prelu`` / ``F.prelu``.

    Args:
        input: the tensor (channels on dim 1; a 1-D input has them on dim 0).
        weight: a 1-D tensor of one value or one per channel.

    Returns:
        Tensor: ``input``'s shape; gradients flow to ``input`` and ``weight``.

    Raises:
        RuntimeError: ``weight`` is not 1-D or its size is not 1 or the channel count.

    Example:
        >>> import tensorbrain as tb
        >>> tb.prelu(tb.tensor([-1.0, 2.0]), tb.tensor([0.25])).tolist()
        [-0.25, 2.0]
    """
    x, w = input._data, weight._data
    xp = get_array_module(x)
    if w.ndim != 1 and w.size != 1:
        raise RuntimeError(f"prelu: weight must be 1-D, got shape {tuple(w.shape)}")
    C = w.size
    if C != 1 and (x.ndim < 2 or x.shape[1] != C):
        if not (x.ndim == 1 and x.shape[0] == C):
            raise RuntimeError(f"prelu: weight has {C} parameters but the input of shape "
                               f"{tuple(x.shape)} has {x.shape[1] if x.ndim > 1 else 1} channels "
                               f"(dim 1)")
    shape = [1] * x.ndim
    if C != 1:
        shape[1 if x.ndim > 1 else 0] = C
    wb = w.reshape(shape) if x.ndim else w.reshape(())
    neg = x < 0
    out = xp.where(neg, wb * x, x).astype(x.dtype, copy=False)

    def backward(g):
        gx = g * xp.where(neg, wb, 1).astype(g.dtype, copy=False)
        contrib = g * xp.where(neg, x, 0).astype(g.dtype, copy=False)
        if C == 1:
            gw = contrib.sum().reshape(w.shape)
        else:
            axes = tuple(i for i in range(x.ndim) if shape[i] == 1)
            gw = contrib.sum(axis=axes).reshape(w.shape)
        return gx, gw
    return make(out, (input, weight), backward, "PreluBackward", (input, weight))


# ***** normalisation *****
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x^2 over normalized_shape) + eps) * weight``; ``eps`` defaults to the
    dtype's machine epsilon (torch's)."""
    x = input._data
    xp = get_array_module(x)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise RuntimeError(f"rms_norm: normalized_shape {list(shape)} does not match the trailing "
                           f"dims of the input of shape {tuple(x.shape)}")
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    eps = float(np.finfo(x.dtype).eps) if eps is None else eps
    r = 1 / xp.sqrt((x * x).mean(axis=axes, keepdims=True) + x.dtype.type(eps))
    xhat = x * r
    w = None if weight is None else weight._data
    out = xhat if w is None else xhat * w

    def backward(g):
        gy = g if w is None else g * w
        gx = r * (gy - xhat * (gy * xhat).mean(axis=axes, keepdims=True))
        gw = None
        if weight is not None and weight.requires_grad:
            gw = (g * xhat).reshape(-1, *shape).sum(axis=0)
        return gx.astype(x.dtype, copy=False), gw
    return make(out.astype(x.dtype, copy=False), (input, weight), backward, "RmsNormBackward",
                (input,) if weight is None else (input, weight))


# ***** dropout variants *****
def _keep_mask(p, shape, like, dtype):
    u = _random.uniform(0.0, 1.0, shape, np.float32, like, None)
    return (u >= p).astype(dtype)


def _check_p(p):
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_dropout(input, p, training, alpha):
    """Drop whole channels (dims >= 2 share one draw): scaled zeros, or SELU-preserving values
    with ``alpha``."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    x = input._data
    xp = get_array_module(x)
    mshape = x.shape[:2] + (1,) * (x.ndim - 2)
    return _apply_mask(input, x, xp, p, mshape, alpha)


def _apply_mask(input, x, xp, p, mshape, alpha):
    keep = xp.zeros(mshape, dtype=x.dtype) if p == 1.0 else _keep_mask(p, mshape, x, x.dtype)
    if not alpha:
        scale = keep * x.dtype.type(0.0 if p == 1.0 else 1.0 / (1.0 - p))
        return make(x * scale, (input,), lambda g: (g * scale,), "FeatureDropoutBackward")
    # torch's alpha dropout: dropped units take SELU's negative saturation value, then an
    # affine map a * x + b restores zero mean and unit variance.
    alpha_p = -1.7580993408473766            # -selu_scale * selu_alpha
    if p == 1.0:
        return make(xp.zeros_like(x), (input,), lambda g: (xp.zeros_like(g),),
                    "AlphaDropoutBackward")
    a = 1.0 / math.sqrt((alpha_p * alpha_p * p + 1) * (1 - p))
    b = -a * alpha_p * p
    mult = keep * x.dtype.type(a)
    add = (1 - keep) * x.dtype.type(a * alpha_p) + x.dtype.type(b)
    return make(x * mult + add, (input,), lambda g: (g * mult,), "AlphaDropoutBackward")


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps SELU's self-normalising mean and variance (element-wise)."""
    _check_p(p)
    if not training or p == 0.0:
        return input
    x = input._data
    return _apply_mask(input, x, get_array_module(x), p, x.shape, True)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """:func:`alpha_dropout` of whole channels."""
    return _feature_dropout(input, p, training, True)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` inputs, scale the rest by 1/(1-p)."""
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D "
                           f"input. Note that dropout1d exists to provide channel-wise dropout "
                           f"on inputs with 1 spatial dimension, a channel dimension, and an "
                           f"optional batch dimension (i.e. 2D or 3D inputs).")
    _check_p(p)
    if not training or p == 0.0:
        return input
    return _unbatched(input, 2, lambda t: _feature_dropout(t, p, True, False))


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``(N, C, H, W)`` inputs (a 3-D input is read as ``(N, C, L)``,
    with torch's warning)."""
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is "
                      f"deprecated and will result in an error in a future release. To retain "
                      f"the behavior and silence this warning, please use dropout instead.",
                      stacklevel=2)
    if input.dim() == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that "
                      "channel-wise 1D dropout behavior is desired - input is interpreted as "
                      "shape (N, C, L), where C is the channel dim.", stacklevel=2)
    return _feature_dropout(input, p, training, False)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` inputs."""
    if input.dim() not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.dim()}-D input to dropout3d, which is "
                      f"deprecated and will result in an error in a future release.",
                      stacklevel=2)
    _check_p(p)
    if not training or p == 0.0:
        return input
    return _unbatched(input, 4, lambda t: _feature_dropout(t, p, True, False))


def _unbatched(input, unbatched_dim, fn):
    if input.dim() == unbatched_dim:
        return fn(input.unsqueeze(0)).squeeze(0)
    return fn(input)


# ***** embedding_bag *****
def _bags(idx, offsets, include_last_offset):
    """(flat indices, bag id of each, number of bags) from 2-D input or 1-D input + offsets."""
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences.")
        B, n = idx.shape
        return idx.reshape(-1), np.repeat(np.arange(B), n), B
    if idx.ndim != 1:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{idx.ndim}")
    if offsets is None:
        raise ValueError("offsets has to be a 1D Tensor but got None")
    off = np.asarray(offsets, dtype=np.int64).reshape(-1)
    if off.size == 0 or off[0] != 0:
        raise ValueError(f"offsets must start with 0, got {off.tolist()[:5]}")
    if np.any(np.diff(off) < 0) or off[-1] > idx.shape[0]:
        raise ValueError(f"offsets must be non-decreasing and at most the input length "
                         f"{idx.shape[0]}, got {off.tolist()[:8]}")
    B = len(off) - 1 if include_last_offset else len(off)
    bag = np.searchsorted(off[1:] if not include_last_offset else off[1:-1],
                          np.arange(idx.shape[0]), side="right")
    return idx, bag, B


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2,
                  scale_grad_by_freq=False, mode="mean", sparse=False, per_sample_weights=None,
                  include_last_offset=False, padding_idx=None):
    """Sums, means or maxes of bags of embeddings, without building the ``(n, D)`` lookup
    in the graph.

    Args:
        input: ``(B, n)`` (B bags of n indices) or 1-D with ``offsets`` (bag starts).
        weight: ``(num_embeddings, D)``.
        mode: 'sum', 'mean' or 'max'; an empty bag gives zeros.
        per_sample_weights: one weight per index (``mode='sum'`` only).
        include_last_offset: ``offsets`` has a final entry equal to the input length.
        padding_idx: indices equal to it are left out of their bag (and of its count).

    Returns:
        ``(B, D)``.
    """
    from .._xp import to_numpy
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode!r}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    if sparse or scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: sparse gradients and scale_grad_by_freq are "
                                  "not supported")
    w = weight._data
    xp = get_array_module(w)
    idx_np = to_numpy(input._data).astype(np.int64)
    off_np = None if offsets is None else to_numpy(offsets._data if hasattr(offsets, "dim")
                                                     else np.asarray(offsets))
    flat, bag, B = _bags(idx_np, off_np, include_last_offset)
    n_rows, D = w.shape
    if flat.size and (flat.min() < 0 or flat.max() >= n_rows):
        raise IndexError(f"embedding_bag: index out of range for a table of {n_rows} rows "
                         f"(indices span [{int(flat.min())}, {int(flat.max())}])")
    if padding_idx is not None:
        padding_idx = padding_idx + n_rows if padding_idx < 0 else padding_idx
        keep = flat != padding_idx
        flat, bag = flat[keep], bag[keep]
    else:
        keep = None
    if max_norm is not None:                 # renormalise the looked-up rows in place (torch)
        rows = xp.asarray(np.unique(flat))
        norms = (xp.abs(w[rows]) ** norm_type).sum(axis=1) ** (1.0 / norm_type)
        scale = xp.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0).astype(w.dtype)
        w[rows] *= scale[:, None]
        weight._version[0] += 1
    fi, bi = xp.asarray(flat), xp.asarray(bag)
    vals = w[fi]
    psw = None
    if per_sample_weights is not None:
        psw = per_sample_weights._data.reshape(-1)
        if psw.shape[0] != idx_np.size:
            raise ValueError(f"embedding_bag: per_sample_weights has {psw.shape[0]} entries, "
                             f"expected one per index ({idx_np.size})")
        if keep is not None:
            psw = psw[xp.asarray(keep)]
        vals = vals * psw[:, None]
    counts = np.bincount(bag, minlength=B).astype(w.dtype)
    if mode == "max":
        out = xp.full((B, D), -np.inf, dtype=w.dtype)
        if xp is np:
            np.maximum.at(out, bi, vals)
        else:
            import cupyx  # type: ignore
            cupyx.scatter_max(out, bi, vals)
        out[xp.asarray(counts == 0)] = 0
        hit = vals == out[bi]
        # the gradient goes to one element per (bag, feature), the first that holds the max
        cs = xp.cumsum(hit, axis=0)
        start = xp.asarray(np.searchsorted(bag, bag))
        base = xp.where((start > 0)[:, None], cs[xp.maximum(start - 1, 0)], 0)
        hit = (hit & (cs - base == 1)).astype(w.dtype)
    else:
        out = xp.zeros((B, D), dtype=w.dtype)
        _add_at(xp, out, bi, vals)
        if mode == "mean":
            out /= xp.asarray(np.maximum(counts, 1))[:, None]

    def backward(g):
        gb = g[bi]
        if mode == "mean":
            gb = gb / xp.asarray(np.maximum(counts, 1))[bi][:, None]
        elif mode == "max":
            gb = gb * hit
        gpsw = None
        if psw is not None and per_sample_weights.requires_grad:
            part = (gb * w[fi]).sum(axis=1)
            gpsw = xp.zeros(idx_np.size, dtype=part.dtype)
            if keep is not None:
                gpsw[xp.asarray(keep)] = part
            else:
                gpsw = part
            gpsw = gpsw.reshape(per_sample_weights._data.shape)
        gw = None
        if weight.requires_grad:
            if psw is not None:
                gb = gb * psw[:, None]
            gw = xp.zeros(w.shape, dtype=g.dtype)
            _add_at(xp, gw, fi, gb)
        return gw, gpsw
    return make(out, (weight, per_sample_weights), backward, "EmbeddingBagBackward")


def _add_at(xp, target, idx, values):
    if xp is np:
        np.add.at(target, idx, values)
    else:
        import cupyx  # type: ignore
        cupyx.scatter_add(target, idx, values)
