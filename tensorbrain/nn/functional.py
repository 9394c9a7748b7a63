"""``tb.nn.functional``: layers, activations, normalisation and losses as functions (PyTorch names).

The hot ops of a training step (``linear``, ``cross_entropy``, the normalisations) are single
fused ops: one graph node with a hand-written backward, so a step costs about what the same math
written in NumPy costs. Convolution and pooling live in ``tensorbrain/_ops/conv.py`` (im2col).

>>> import tensorbrain as tb
>>> import tensorbrain.nn.functional as F
>>> x = tb.randn(4, 3, requires_grad=True)
>>> loss = F.cross_entropy(F.linear(x, tb.randn(5, 3)), tb.tensor([0, 1, 2, 3]))
>>> loss.backward(); tuple(x.grad.shape)
(4, 3)
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .. import _random
from .._ops import elementwise as _E
from .._ops import reduce as _R
from .._ops import shape as _S
from .._ops.conv import adaptive_avg_pool2d, avg_pool2d, conv2d, max_pool2d  # noqa: F401
from .._ops.core import make, unbroadcast
from .._xp import get_array_module
from ..tensor import Tensor

__all__ = [
    "linear", "bilinear", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "softmax",
    "log_softmax", "softmin", "cross_entropy", "nll_loss", "mse_loss", "l1_loss",
    "smooth_l1_loss", "huber_loss", "binary_cross_entropy_with_logits", "binary_cross_entropy",
    "kl_div", "dropout", "embedding", "layer_norm", "batch_norm", "group_norm", "relu", "relu6",
    "gelu", "silu", "sigmoid", "tanh", "leaky_relu", "elu", "softplus", "logsigmoid",
    "hardtanh", "pad", "one_hot", "normalize", "cosine_similarity",
    "scaled_dot_product_attention",
]


def _check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _legacy_reduction(size_average, reduce, reduction):
    # PyTorch's deprecated size_average/reduce flags, mapped as torch.nn._reduction does.
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _same_device(name, *ts):
    kinds = [t for t in ts if isinstance(t, Tensor)]
    for t in kinds[1:]:
        if type(t.data) is not type(kinds[0].data):
            raise RuntimeError(f"{name}: expected all tensors on the same device, got "
                               f"{kinds[0].device} and {t.device}")


def _reduce_array(xp, loss, reduction):
    if reduction == "mean":
        return loss.mean(dtype=loss.dtype)
    if reduction == "sum":
        return loss.sum(dtype=loss.dtype)
    return loss


def _reduce_grad(xp, g, shape, reduction, dtype):
    """The gradient w.r.t. the unreduced loss of ``shape`` given the output gradient ``g``."""
    if reduction == "mean":
        return xp.broadcast_to((g / max(int(np.prod(shape)), 1)).astype(dtype, copy=False), shape)
    if reduction == "sum":
        return xp.broadcast_to(g.astype(dtype, copy=False), shape)
    return g


# ***** linear layers *****
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` as one op (one GEMM forward, two backward).

    >>> import tensorbrain as tb
    >>> tb.nn.functional.linear(tb.ones(2, 3), tb.ones(4, 3), tb.zeros(4)).shape
    tb.Size([2, 4])
    """
    x, w = input.data, weight.data
    _same_device("linear", input, weight, bias)
    if x.shape[-1] != w.shape[-1] or w.ndim != 2:
        raise RuntimeError(f"linear: mat1 and mat2 shapes cannot be multiplied "
                           f"(input {tuple(x.shape)}, weight {tuple(w.shape)}: the input's last "
                           f"dim must equal weight.shape[1])")
    x2 = x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x
    xp = get_array_module(x)
    out = x2 @ w.T
    if bias is not None:
        out += bias.data
    if x.ndim != 2:
        out = out.reshape(x.shape[:-1] + (w.shape[0],))

    def backward(g):
        g = xp.ascontiguousarray(g)   # a stride-0 broadcast g would make matmul skip BLAS
        g2 = g.reshape(-1, g.shape[-1]) if g.ndim != 2 else g
        gx = gw = gb = None
        if input.requires_grad:
            gx = g2 @ w
            if x.ndim != 2:
                gx = gx.reshape(x.shape)
        if weight.requires_grad:
            gw = g2.T @ x2
        if bias is not None and bias.requires_grad:
            gb = g2.sum(axis=0)
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "AddmmBackward", (input, weight))


def bilinear(input1, input2, weight, bias=None):
    """``y_k = x1 @ W_k @ x2 + b_k`` (weight (out, in1, in2)), from primitive ops."""
    t = _S.matmul(_S.unsqueeze(_S.unsqueeze(input1, -2), -3), weight)      # (..., out, 1, in2)
    y = _S.squeeze(_S.matmul(t, _S.unsqueeze(_S.unsqueeze(input2, -2), -1)), (-1, -2))
    return y if bias is None else _E.add(y, bias)


# ***** activations *****
def relu(input, inplace=False):
    return input.relu_() if inplace else _E.relu(input)


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0)


def sigmoid(input):
    return _E.sigmoid(input)


def tanh(input):
    return _E.tanh(input)


def gelu(input, approximate="none"):
    return _E.gelu(input, approximate)


def silu(input, inplace=False):
    return _E.silu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    x = input.data
    factor = get_array_module(x).where(x > 0, 1, negative_slope).astype(x.dtype)
    return make(x * factor, (input,), lambda g: (g * factor,), "LeakyReluBackward")


def elu(input, alpha=1.0, inplace=False):
    x = input.data
    xp = get_array_module(x)
    neg = alpha * xp.expm1(xp.minimum(x, 0))
    out = xp.where(x > 0, x, neg).astype(x.dtype, copy=False)
    return make(out, (input,), lambda g: (g * xp.where(x > 0, 1, neg + alpha).astype(g.dtype),),
                "EluBackward", (input,))


def softplus(input, beta=1.0, threshold=20.0):
    x = input.data
    xp = get_array_module(x)
    bx = beta * x
    out = xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)

    def backward(g):
        s = 1 / (1 + xp.exp(-xp.clip(bx, -threshold, threshold)))
        return ((g * xp.where(bx > threshold, 1, s)).astype(g.dtype, copy=False),)
    return make(out, (input,), backward, "SoftplusBackward", (input,))


def logsigmoid(input):
    return _E.neg(softplus(_E.neg(input)))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    x = input.data
    xp = get_array_module(x)
    out = xp.clip(x, min_val, max_val).astype(x.dtype, copy=False)
    inside = (x > min_val) & (x < max_val)   # PyTorch: zero gradient at the edges
    return make(out, (input,), lambda g: (g * inside,), "HardtanhBackward", (input,))


# ***** softmax family *****
def _softmax_dim(ndim, dim):
    if dim is None:  # PyTorch's legacy implicit choice
        return 0 if ndim in (0, 1, 3) else 1
    return dim


def softmax(input, dim=None, dtype=None):
    x = input.data if dtype is None else input.data.astype(dtype)
    xp = get_array_module(x)
    d = _softmax_dim(x.ndim, dim)
    e = xp.exp(x - x.max(axis=d, keepdims=True))
    e /= e.sum(axis=d, keepdims=True)
    src = input.data.dtype

    def backward(g):
        gx = e * (g - (g * e).sum(axis=d, keepdims=True))
        return (gx.astype(src, copy=False),)
    return make(e, (input,), backward, "SoftmaxBackward")


def softmin(input, dim=None, dtype=None):
    return softmax(_E.neg(input), dim, dtype)


def _log_softmax_array(xp, x, d):
    m = x.max(axis=d, keepdims=True)
    if not xp.isfinite(m).all():
        m = xp.where(xp.isfinite(m), m, 0)
    z = x - m
    z -= xp.log(xp.exp(z).sum(axis=d, keepdims=True))
    return z


def log_softmax(input, dim=None, dtype=None):
    x = input.data if dtype is None else input.data.astype(dtype)
    xp = get_array_module(x)
    d = _softmax_dim(x.ndim, dim)
    out = _log_softmax_array(xp, x, d)
    src = input.data.dtype

    def backward(g):
        gx = g - xp.exp(out) * g.sum(axis=d, keepdims=True)
        return (gx.astype(src, copy=False),)
    return make(out, (input,), backward, "LogSoftmaxBackward")


# ***** losses *****
def _class_last(x):
    """(N, C, d1, ...) -> (M, C) with the class dim last; (C,) -> (1, C)."""
    if x.ndim == 1:
        return x[None]
    if x.ndim == 2:
        return x
    return np.moveaxis(x, 1, -1).reshape(-1, x.shape[1]) if isinstance(x, np.ndarray) else \
        get_array_module(x).moveaxis(x, 1, -1).reshape(-1, x.shape[1])


def _class_first(g2, shape):
    """Inverse of _class_last for a gradient."""
    xp = get_array_module(g2)
    if len(shape) == 1:
        return g2[0]
    if len(shape) == 2:
        return g2
    moved = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    return xp.ascontiguousarray(xp.moveaxis(g2.reshape(moved), -1, 1))


def _check_targets(name, input, target):
    x, t = input.data, target.data
    if x.ndim == 1:
        ok = t.ndim == 0
    else:
        ok = t.shape == (x.shape[0],) + tuple(x.shape[2:])
    if not ok:
        raise RuntimeError(f"{name}: input of shape {tuple(x.shape)} needs class-index targets of "
                           f"shape {(x.shape[0],) + tuple(x.shape[2:]) if x.ndim > 1 else ()}, got "
                           f"target of shape {tuple(t.shape)}")
    if t.dtype.kind not in "iu":
        raise RuntimeError(f"{name}: class-index targets must be an integer tensor, got {t.dtype} "
                           f"(use probabilities of the input's shape for soft targets)")


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy, one fused op. ``target`` holds class indices (N,) / (N, d1, ...) or
    class probabilities of the input's shape.

    >>> import tensorbrain as tb
    >>> logits = tb.tensor([[2.0, 0.0], [0.0, 2.0]])
    >>> round(tb.nn.functional.cross_entropy(logits, tb.tensor([0, 1])).item(), 4)
    0.1269
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _same_device("cross_entropy", input, target, weight)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    x = input.data
    xp = get_array_module(x)
    shape = x.shape
    x2 = _class_last(x)
    m, c = x2.shape
    logp = _log_softmax_array(xp, x2, 1)
    w = None if weight is None else weight.data.astype(x.dtype, copy=False)
    if w is not None and w.shape != (c,):
        raise RuntimeError(f"cross_entropy: weight must have shape ({c},) for input of shape "
                           f"{tuple(shape)}, got {tuple(w.shape)}")
    eps = float(label_smoothing)
    if target.data.dtype.kind == "f":   # probabilities
        if target.data.shape != shape:
            raise RuntimeError(f"cross_entropy: probability targets must have the input's shape "
                               f"{tuple(shape)}, got {tuple(target.data.shape)}")
        q = _class_last(target.data).astype(x.dtype, copy=False)
        if eps:
            q = q * (1 - eps) + eps / c
        if w is not None:
            q = q * w
        per = -(q * logp).sum(axis=1)
        denom = m
        valid = None
    else:
        _check_targets("cross_entropy", input, target)
        t = target.data.reshape(-1)
        valid = t != ignore_index
        ts = xp.where(valid, t, 0)
        if valid.all():
            valid = None
        if ts.size and (int(ts.min()) < 0 or int(ts.max()) >= c):
            bad = int(ts.max()) if int(ts.max()) >= c else int(ts.min())
            raise IndexError(f"cross_entropy: target {bad} is out of bounds for {c} classes "
                             f"(input shape {tuple(shape)})")
        rows = xp.arange(m)
        wt = xp.ones(m, dtype=x.dtype) if w is None else w[ts]
        if valid is not None:
            wt = wt * valid
        # q: the target distribution, kept implicit: (1-eps) * wt at the class, eps/C * w elsewhere.
        per = -(1 - eps) * wt * logp[rows, ts]
        if eps:
            smooth = -(logp * (w if w is not None else 1)).sum(axis=1)
            if valid is not None:
                smooth = smooth * valid
            per = per + (eps / c) * smooth
        denom = wt.sum() if w is not None else (m if valid is None else valid.sum())
    if reduction == "none":
        out = per.reshape(shape[:1] + shape[2:]) if len(shape) != 1 else per.reshape(())
    elif reduction == "sum":
        out = per.sum()
    else:
        out = per.sum() / denom
    out = xp.asarray(out, dtype=x.dtype)

    def backward(g):
        if reduction == "none":
            r = g.reshape(-1, 1)
        elif reduction == "sum":
            r = g
        else:
            r = g / denom
        p = xp.exp(logp)
        if valid is None and target.data.dtype.kind != "f" and not eps and w is None:
            # The common case: grad = (softmax - onehot) * r.
            p[rows, ts] -= 1
            gx = p * r
        else:
            if target.data.dtype.kind == "f":
                qq = q
            else:
                qq = xp.zeros_like(p)
                qq[rows, ts] = (1 - eps) * wt
                if eps:
                    sm = (eps / c) * (w if w is not None else xp.ones(c, dtype=p.dtype))
                    qq += sm[None, :] * (valid[:, None] if valid is not None else 1)
            gx = (p * qq.sum(axis=1, keepdims=True) - qq) * r
        return (_class_first(gx.astype(x.dtype, copy=False), shape), None, None)
    return make(out, (input, None, None), backward, "CrossEntropyLossBackward")


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class indices given log-probabilities ``input`` (N, C, ...)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_targets("nll_loss", input, target)
    x = input.data
    xp = get_array_module(x)
    shape = x.shape
    x2 = _class_last(x)
    m, c = x2.shape
    t = target.data.reshape(-1)
    valid = t != ignore_index
    ts = xp.where(valid, t, 0)
    if ts.size and (int(ts.min()) < 0 or int(ts.max()) >= c):
        raise IndexError(f"nll_loss: target out of bounds for {c} classes (input shape {tuple(shape)})")
    wt = (xp.ones(m, dtype=x.dtype) if weight is None else weight.data.astype(x.dtype)[ts]) * valid
    rows = xp.arange(m)
    per = -wt * x2[rows, ts]
    if reduction == "none":
        out = per.reshape(shape[:1] + shape[2:]) if len(shape) != 1 else per.reshape(())
    elif reduction == "sum":
        out = per.sum()
    else:
        denom = wt.sum()
        out = per.sum() / denom
    out = xp.asarray(out, dtype=x.dtype)

    def backward(g):
        r = g.reshape(-1) if reduction == "none" else (g if reduction == "sum" else g / denom)
        gx = xp.zeros((m, c), dtype=x.dtype)
        gx[rows, ts] = -wt * r
        return (_class_first(gx, shape), None, None)
    return make(out, (input, None, None), backward, "NllLossBackward")


def _pointwise_loss(name, input, target, reduction, value_fn, grad_fn, weight=None):
    """A loss ``value_fn(d)`` of ``d = input - target`` with derivative ``grad_fn(d)``."""
    _check_reduction(reduction)
    _same_device(name, input, target)
    x = input.data
    y = target.data if isinstance(target, Tensor) else target
    xp = get_array_module(x)
    try:
        d = x - y
    except ValueError:
        raise RuntimeError(f"{name}: input of shape {tuple(x.shape)} and target of shape "
                           f"{tuple(np.shape(y))} cannot be broadcast together") from None
    per = value_fn(xp, d)
    if weight is not None:
        per = per * weight.data
    out = _reduce_array(xp, per, reduction)

    def backward(g):
        gd = _reduce_grad(xp, g, per.shape, reduction, per.dtype) * grad_fn(xp, d)
        if weight is not None:
            gd = gd * weight.data
        gx = unbroadcast(gd, x.shape) if input.requires_grad else None
        gy = unbroadcast(-gd, y.shape) if isinstance(target, Tensor) and target.requires_grad else None
        return gx, gy
    return make(out, (input, target if isinstance(target, Tensor) else None), backward,
                name.title().replace("_", "") + "Backward")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error."""
    return _pointwise_loss("mse_loss", input, target, _legacy_reduction(size_average, reduce, reduction),
                           lambda xp, d: d * d, lambda xp, d: 2 * d, weight)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean absolute error (gradient sign(d), 0 at d == 0 as in PyTorch)."""
    return _pointwise_loss("l1_loss", input, target, _legacy_reduction(size_average, reduce, reduction),
                           lambda xp, d: xp.abs(d), lambda xp, d: xp.sign(d))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    return _pointwise_loss(
        "smooth_l1_loss", input, target, _legacy_reduction(size_average, reduce, reduction),
        lambda xp, d: xp.where(xp.abs(d) < beta, 0.5 * d * d / beta, xp.abs(d) - 0.5 * beta),
        lambda xp, d: xp.where(xp.abs(d) < beta, d / beta, xp.sign(d)))


def huber_loss(input, target, reduction="mean", delta=1.0):
    return _pointwise_loss(
        "huber_loss", input, target, reduction,
        lambda xp, d: xp.where(xp.abs(d) < delta, 0.5 * d * d, delta * (xp.abs(d) - 0.5 * delta)),
        lambda xp, d: xp.where(xp.abs(d) < delta, d, delta * xp.sign(d)))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Sigmoid + binary cross-entropy, stable for large logits: ``(1-t)x + l(t) softplus(-x)``
    with ``l(t) = 1 + (pos_weight - 1) t``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _same_device("binary_cross_entropy_with_logits", input, target, weight, pos_weight)
    x, t = input.data, target.data
    if x.shape != t.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target size {tuple(t.shape)} must be "
                         f"the same as input size {tuple(x.shape)}")
    xp = get_array_module(x)
    sp = xp.logaddexp(0, -x)                # softplus(-x), no overflow
    lw = 1 if pos_weight is None else 1 + (pos_weight.data - 1) * t
    per = (1 - t) * x + lw * sp
    if weight is not None:
        per = per * weight.data
    per = per.astype(x.dtype, copy=False)
    out = _reduce_array(xp, per, reduction)

    def backward(g):
        r = _reduce_grad(xp, g, per.shape, reduction, per.dtype)
        if weight is not None:
            r = r * weight.data
        sig_neg = 1 / (1 + xp.exp(x))      # sigmoid(-x)
        gx = (r * ((1 - t) - lw * sig_neg)).astype(x.dtype, copy=False) if input.requires_grad else None
        gt = None
        if target.requires_grad:
            pw = 1 if pos_weight is None else pos_weight.data
            gt = (r * (-x + (pw - 1) * sp)).astype(t.dtype, copy=False)
        return gx, gt
    return make(out, (input, target), backward, "BinaryCrossEntropyWithLogitsBackward")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """BCE on probabilities; logs are clamped at -100 as in PyTorch."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    p, t = input.data, target.data
    if p.shape != t.shape:
        raise ValueError(f"binary_cross_entropy: target size {tuple(t.shape)} must be the same as "
                         f"input size {tuple(p.shape)}")
    xp = get_array_module(p)
    if p.size and (float(p.min()) < 0 or float(p.max()) > 1):
        raise RuntimeError("binary_cross_entropy: all elements of input should be between 0 and 1")
    with np.errstate(divide="ignore"):
        lp = xp.maximum(xp.log(p), -100)
        l1p = xp.maximum(xp.log1p(-p), -100)
    per = -(t * lp + (1 - t) * l1p)
    if weight is not None:
        per = per * weight.data
    per = per.astype(p.dtype, copy=False)
    out = _reduce_array(xp, per, reduction)

    def backward(g):
        r = _reduce_grad(xp, g, per.shape, reduction, per.dtype)
        if weight is not None:
            r = r * weight.data
        gx = r * (p - t) / xp.maximum(p * (1 - p), 1e-12)
        gt = r * (l1p - lp) if target.requires_grad else None
        return gx.astype(p.dtype, copy=False), gt
    return make(out, (input, target), backward, "BinaryCrossEntropyBackward")


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence with ``input`` log-probabilities; ``reduction='batchmean'`` as in PyTorch."""
    if log_target:
        per = _E.mul(_E.exp(target), _E.sub(target, input))
    else:
        x, t = input.data, target.data
        xp = get_array_module(x)
        pos = t > 0
        logt = xp.log(xp.where(pos, t, 1))
        per_arr = (xp.where(pos, t * logt, 0) - t * x).astype(x.dtype, copy=False)   # xlogy(t, t) - t x

        def backward(g):
            gx = -g * t if input.requires_grad else None
            gt = g * xp.where(pos, logt + 1, 0) - g * x if target.requires_grad else None
            return gx, gt
        per = make(per_arr, (input, target), backward, "KlDivBackward")
    if reduction == "batchmean":
        return _E.div(_R.sum(per), input.shape[0] if input.ndim else 1)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    return per if reduction == "none" else (_R.sum(per) if reduction == "sum" else _R.mean(per))


# ***** regularisation and lookup *****
def dropout(input, p=0.5, training=True, inplace=False, generator=None):
    """Zero elements with probability ``p`` and scale the rest by 1/(1-p) (tb's generator)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    x = input.data
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


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by the integer tensor ``input``; repeated ids accumulate grad."""
    idx = input.data
    w = weight.data
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
        _index_add(xp, gw, flat, g2)
        if padding_idx is not None:
            gw[padding_idx] = 0
        return (None, gw)
    return make(out, (None, weight), backward, "EmbeddingBackward")


# ***** normalisation *****
def _norm_backward(xp, gxhat, xhat, rstd, axes):
    """d/dx of xhat = (x - mean) * rstd over ``axes``, given d/dxhat (standard formula)."""
    m1 = gxhat.mean(axis=axes, keepdims=True)
    m2 = (gxhat * xhat).mean(axis=axes, keepdims=True)
    return rstd * (gxhat - m1 - xhat * m2)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing ``normalized_shape`` dims, one fused op."""
    x = input.data
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if tuple(x.shape[x.ndim - k:]) != normalized_shape:
        raise RuntimeError(f"layer_norm: input of shape {tuple(x.shape)} does not end with "
                           f"normalized_shape {normalized_shape}")
    xp = get_array_module(x)
    axes = tuple(range(x.ndim - k, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    xc = x - mu
    rstd = 1 / xp.sqrt((xc * xc).mean(axis=axes, keepdims=True) + eps)
    xhat = xc * rstd
    out = xhat * weight.data if weight is not None else xhat.copy()
    if bias is not None:
        out += bias.data
    lead = tuple(range(x.ndim - k))

    def backward(g):
        gx = gw = gb = None
        if input.requires_grad:
            gxhat = g * weight.data if weight is not None else g
            gx = _norm_backward(xp, gxhat, xhat, rstd, axes)
        if weight is not None and weight.requires_grad:
            gw = (g * xhat).sum(axis=lead)
        if bias is not None and bias.requires_grad:
            gb = g.sum(axis=lead)
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "NativeLayerNormBackward", (weight,) if weight is not None else ())


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch norm over dim 1 of (N, C, ...). In training the batch statistics are used and the
    running statistics (plain tensors) are updated in place; otherwise the running ones are used."""
    x = input.data
    if x.ndim < 2:
        raise RuntimeError(f"batch_norm: expected at least 2-D input (N, C, ...), got shape {tuple(x.shape)}")
    xp = get_array_module(x)
    c = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    bshape = (1, c) + (1,) * (x.ndim - 2)
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (c,):
            raise RuntimeError(f"batch_norm: {name} must have shape ({c},) for input of shape "
                               f"{tuple(x.shape)}, got {tuple(t.shape)}")
    if training:
        n = x.size // c
        if n <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input "
                             f"size {tuple(x.shape)}")
        mu = x.mean(axis=axes, keepdims=True)
        xc = x - mu
        var = (xc * xc).mean(axis=axes, keepdims=True)
        rstd = 1 / xp.sqrt(var + eps)
        if running_mean is not None:
            m = 0.0 if momentum is None else momentum
            rm = running_mean.data
            rm *= 1 - m
            rm += m * mu.reshape(c).astype(rm.dtype)
            running_mean._version[0] += 1
        if running_var is not None:
            m = 0.0 if momentum is None else momentum
            rv = running_var.data
            rv *= 1 - m
            rv += (m * n / (n - 1)) * var.reshape(c).astype(rv.dtype)   # unbiased, as PyTorch
            running_var._version[0] += 1
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var are needed when training=False")
        mu = running_mean.data.reshape(bshape).astype(x.dtype, copy=False)
        xc = x - mu
        rstd = (1 / xp.sqrt(running_var.data.reshape(bshape) + eps)).astype(x.dtype, copy=False)
    xhat = xc * rstd
    wd = weight.data.reshape(bshape) if weight is not None else None
    out = xhat * wd if wd is not None else xhat.copy()
    if bias is not None:
        out += bias.data.reshape(bshape)

    def backward(g):
        gx = gw = gb = None
        if input.requires_grad:
            gxhat = g * wd if wd is not None else g
            gx = _norm_backward(xp, gxhat, xhat, rstd, axes) if training else gxhat * rstd
        if weight is not None and weight.requires_grad:
            gw = (g * xhat).sum(axis=axes)
        if bias is not None and bias.requires_grad:
            gb = g.sum(axis=axes)
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "NativeBatchNormBackward",
                (weight,) if weight is not None else ())


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each of ``num_groups`` channel groups per sample, then a per-channel affine."""
    x = input.data
    n, c = x.shape[:2]
    if c % num_groups:
        raise RuntimeError(f"group_norm: {c} channels (input shape {tuple(x.shape)}) are not "
                           f"divisible by num_groups={num_groups}")
    xp = get_array_module(x)
    xg = x.reshape(n, num_groups, -1)
    mu = xg.mean(axis=2, keepdims=True)
    xc = xg - mu
    rstd = 1 / xp.sqrt((xc * xc).mean(axis=2, keepdims=True) + eps)
    xhat = (xc * rstd).reshape(x.shape)
    bshape = (1, c) + (1,) * (x.ndim - 2)
    wd = weight.data.reshape(bshape) if weight is not None else None
    out = xhat * wd if wd is not None else xhat.copy()
    if bias is not None:
        out += bias.data.reshape(bshape)
    axes = (0,) + tuple(range(2, x.ndim))

    def backward(g):
        gx = gw = gb = None
        if input.requires_grad:
            gxhat = (g * wd if wd is not None else g).reshape(n, num_groups, -1)
            gx = _norm_backward(xp, gxhat, xhat.reshape(n, num_groups, -1), rstd, 2).reshape(x.shape)
        if weight is not None and weight.requires_grad:
            gw = (g * xhat).sum(axis=axes)
        if bias is not None and bias.requires_grad:
            gb = g.sum(axis=axes)
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "NativeGroupNormBackward",
                (weight,) if weight is not None else ())


# ***** shape helpers *****
def _take_axis(a, idx, axis):
    """``take`` along ``axis`` with an index vector (repeats accumulate in backward)."""
    x = a.data
    xp = get_array_module(x)
    out = xp.take(x, idx, axis=axis)

    def backward(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        _index_add(xp, gx, (slice(None),) * axis + (idx,), g)
        return (gx,)
    return make(out, (a,), backward, "IndexSelectBackward")


def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad)//2`` dims: ``pad = (left, right, top, bottom, ...)`` from the last
    dim backwards. ``mode``: 'constant' (negative pads crop), 'reflect', 'replicate', 'circular'."""
    x = input.data
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
    """int64 one-hot encoding with a new last dim of ``num_classes`` (max + 1 when -1)."""
    t = tensor.data
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


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    if p == 2:
        norm = _E.sqrt(_R.sum(_E.mul(input, input), dim, keepdim=True))
    else:
        norm = _E.pow(_R.sum(_E.pow(_E.abs(input), p), dim, keepdim=True), 1.0 / p)
    return _E.div(input, _E.clamp(norm, min=eps))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    dot = _R.sum(_E.mul(x1, x2), dim)
    n1 = _E.sqrt(_R.sum(_E.mul(x1, x1), dim))
    n2 = _E.sqrt(_R.sum(_E.mul(x2, x2), dim))
    return _E.div(dot, _E.clamp(_E.mul(n1, n2), min=eps))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """``softmax(q k^T * scale + mask) v``, written from primitive ops (as PyTorch's math path)."""
    q, k = query.data, key.data
    if q.shape[-1] != k.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query {tuple(q.shape)} and key "
                           f"{tuple(k.shape)} must share the last (embedding) dim")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = _E.mul(_S.matmul(query, _S.transpose(key, -2, -1)), scale)
    xp = get_array_module(q)
    L, S = q.shape[-2], k.shape[-2]
    if is_causal:
        causal = xp.tril(xp.ones((L, S), dtype=bool))
        scores = _E.where(Tensor._wrap(causal), scores, -math.inf)
    if attn_mask is not None:
        if attn_mask.data.dtype == np.bool_:
            scores = _E.where(attn_mask, scores, -math.inf)
        else:
            scores = _E.add(scores, attn_mask)
    attn = softmax(scores, dim=-1)
    if dropout_p > 0.0:
        attn = dropout(attn, dropout_p, training=True)
    return _S.matmul(attn, value)
