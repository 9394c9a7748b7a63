"""Loss functions as fused ops (``tb.nn.functional`` re-exports them; PyTorch semantics).

Each loss is one graph node whose backward is written out (``cross_entropy``: softmax minus the
target distribution), so a training step does not pay for the intermediate graph.
"""
from __future__ import annotations

import numpy as np

from . import core as _core
from . import elementwise as _E
from . import reduce as _R
from .core import make, unbroadcast
from .._xp import get_array_module, to_numpy
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py


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
    kinds = [t for t in ts if isinstance(t, _core.Tensor)]
    for t in kinds[1:]:
        if type(t._data) is not type(kinds[0]._data):
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



def _log_softmax_array(xp, x, d):
    if d in (-1, x.ndim - 1) and x.ndim and x.shape[-1]:
        C = _E._fused_module(x)
        if C is not None:
            return C.log_softmax_rows_forward(x)
    return _log_softmax_twin(xp, x, d)


def log_softmax_rows_forward(x):
    """log_softmax over the last axis of a float32 array, as a new array: the NumPy/CuPy twin of
    ``tensorbrain._C.log_softmax_rows_forward`` (one read of a row for its max, one for the sum
    of exponentials, one write there)."""
    return _log_softmax_twin(get_array_module(x), x, -1)


def cross_entropy_rows_backward(logp, target, r):
    """``(exp(logp) - onehot(target)) * r`` for (M, C) log-probabilities and M class indices, a
    new array: cross-entropy's gradient with every row's weight ``r`` (a scalar). The NumPy/CuPy
    twin of ``tensorbrain._C.cross_entropy_rows_backward`` (one pass there)."""
    xp = get_array_module(logp)
    p = xp.exp(logp)
    p[xp.arange(p.shape[0]), target] -= 1
    p *= p.dtype.type(r)
    return p


def _log_softmax_twin(xp, x, d):
    m = x.max(axis=d, keepdims=True)
    if not xp.isfinite(m).all():
        m = xp.where(xp.isfinite(m), m, 0)
    z = x - m
    z -= xp.log(xp.exp(z).sum(axis=d, keepdims=True))
    return z



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
    x, t = input._data, target._data
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


@autocast_op("cross_entropy")
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
    parallel = getattr(type(input), "__tb_cross_entropy__", None)   # DTensor: loss_parallel
    if parallel is not None:
        out = parallel(input, target, weight, ignore_index, reduction, label_smoothing)
        if out is not NotImplemented:
            return out
    _same_device("cross_entropy", input, target, weight)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be in [0, 1], got {label_smoothing}")
    x = input._data
    xp = get_array_module(x)
    shape = x.shape
    x2 = _class_last(x)
    m, c = x2.shape
    logp = _log_softmax_array(xp, x2, 1)
    w = None if weight is None else weight._data.astype(x.dtype, copy=False)
    if w is not None and w.shape != (c,):
        raise RuntimeError(f"cross_entropy: weight must have shape ({c},) for input of shape "
                           f"{tuple(shape)}, got {tuple(w.shape)}")
    eps = float(label_smoothing)
    if target._data.dtype.kind == "f":   # probabilities
        if target._data.shape != shape:
            raise RuntimeError(f"cross_entropy: probability targets must have the input's shape "
                               f"{tuple(shape)}, got {tuple(target._data.shape)}")
        q = _class_last(target._data).astype(x.dtype, copy=False)
        if eps:
            q = q * (1 - eps) + eps / c
        if w is not None:
            q = q * w
        per = -(q * logp).sum(axis=1)
        denom = m
        valid = None
    else:
        _check_targets("cross_entropy", input, target)
        t = target._data.reshape(-1)
        valid = t != ignore_index
        ts = xp.where(valid, t, 0)
        # One read of three numbers: each int() of a CuPy array waits for the GPU.
        nvalid, lo, hi = (int(v) for v in to_numpy(xp.stack(
            (valid.sum(), ts.min(), ts.max())))) if t.size else (0, 0, 0)
        if nvalid == t.size:
            valid, ts = None, t
        if t.size and (lo < 0 or hi >= c):
            bad = hi if hi >= c else lo
            raise IndexError(f"cross_entropy: target {bad} is out of bounds for {c} classes "
                             f"(input shape {tuple(shape)})")
        rows = xp.arange(m)
        picked = logp[rows, ts]
        if w is None and valid is None:   # the common case: no per-sample weights at all
            wt = None
            per = -picked if not eps else -(1 - eps) * picked
        else:
            wt = xp.ones(m, dtype=x.dtype) if w is None else w[ts]
            if valid is not None:
                wt = wt * valid
            # q, the target distribution, stays implicit: (1-eps) * wt at the class, eps/C * w.
            per = -(1 - eps) * wt * picked
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
        if valid is None and target._data.dtype.kind != "f" and not eps and w is None and \
                getattr(r, "ndim", 0) == 0:
            # The common case: grad = (softmax - onehot) * r, one pass natively.
            C = _E._fused_module(logp)
            # r stays on the GPU (float() would wait for it); the NumPy paths take a float
            gx = (cross_entropy_rows_backward if C is None else C.cross_entropy_rows_backward)(
                logp, xp.ascontiguousarray(ts, dtype=np.int64),
                r if C is not None and xp is not np else float(r))
        else:
            p = xp.exp(logp)
            if target._data.dtype.kind == "f":
                qq = q
            else:
                qq = xp.zeros_like(p)
                qq[rows, ts] = (1 - eps) * (1 if wt is None else wt)
                if eps:
                    sm = (eps / c) * (w if w is not None else xp.ones(c, dtype=p.dtype))
                    qq += sm[None, :] * (valid[:, None] if valid is not None else 1)
            gx = (p * qq.sum(axis=1, keepdims=True) - qq) * r
        return (_class_first(gx.astype(x.dtype, copy=False), shape), None, None)
    return make(out, (input, None, None), backward, "CrossEntropyLossBackward")


@autocast_op("nll_loss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class indices given log-probabilities ``input`` (N, C, ...)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _check_targets("nll_loss", input, target)
    x = input._data
    xp = get_array_module(x)
    shape = x.shape
    x2 = _class_last(x)
    m, c = x2.shape
    t = target._data.reshape(-1)
    valid = t != ignore_index
    ts = xp.where(valid, t, 0)
    if ts.size and (int(ts.min()) < 0 or int(ts.max()) >= c):
        raise IndexError(f"nll_loss: target out of bounds for {c} classes (input shape {tuple(shape)})")
    wt = (xp.ones(m, dtype=x.dtype) if weight is None else weight._data.astype(x.dtype)[ts]) * valid
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
    x = input._data
    y = target._data if isinstance(target, _core.Tensor) else target
    xp = get_array_module(x)
    try:
        d = x - y
    except ValueError:
        raise RuntimeError(f"{name}: input of shape {tuple(x.shape)} and target of shape "
                           f"{tuple(np.shape(y))} cannot be broadcast together") from None
    per = value_fn(xp, d)
    if weight is not None:
        per = per * weight._data
    out = _reduce_array(xp, per, reduction)

    def backward(g):
        gd = _reduce_grad(xp, g, per.shape, reduction, per.dtype) * grad_fn(xp, d)
        if weight is not None:
            gd = gd * weight._data
        gx = unbroadcast(gd, x.shape) if input.requires_grad else None
        gy = unbroadcast(-gd, y.shape) if isinstance(target, _core.Tensor) and target.requires_grad else None
        return gx, gy
    return make(out, (input, target if isinstance(target, _core.Tensor) else None), backward,
                name.title().replace("_", "") + "Backward")


@autocast_op("mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """Mean squared error."""
    return _pointwise_loss("mse_loss", input, target, _legacy_reduction(size_average, reduce, reduction),
                           lambda xp, d: d * d, lambda xp, d: 2 * d, weight)


@autocast_op("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean absolute error (gradient sign(d), 0 at d == 0 as in PyTorch)."""
    return _pointwise_loss("l1_loss", input, target, _legacy_reduction(size_average, reduce, reduction),
                           lambda xp, d: xp.abs(d), lambda xp, d: xp.sign(d))


@autocast_op("smooth_l1_loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Smooth L1 loss: ``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``
    (``d = input - target``), as ``torch.nn.functional.smooth_l1_loss``.

    Args:
        input: the predictions.
        target: the targets, of ``input``'s shape.
        size_average: torch's deprecated spelling of ``reduction``.
        reduce: torch's deprecated spelling of ``reduction``.
        reduction: ``'mean'``, ``'sum'`` or ``'none'``.
        beta: where the loss turns from quadratic to linear (0: the L1 loss).

    Returns:
        Tensor: the loss (0-d unless ``reduction='none'``).

    Example:
        >>> import tensorbrain as tb
        >>> tb.nn.functional.smooth_l1_loss(tb.tensor([0.5, 3.0]), tb.zeros(2), reduction="none").tolist()
        [0.125, 2.5]
    """
    if beta == 0:
        return l1_loss(input, target, reduction=reduction)
    return _pointwise_loss(
        "smooth_l1_loss", input, target, _legacy_reduction(size_average, reduce, reduction),
        lambda xp, d: xp.where(xp.abs(d) < beta, 0.5 * d * d / beta, xp.abs(d) - 0.5 * beta),
        lambda xp, d: xp.where(xp.abs(d) < beta, d / beta, xp.sign(d)))


@autocast_op("huber_loss")
def huber_loss(input, target, reduction="mean", delta=1.0):
    """Huber loss: ``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``
    (``d = input - target``), as ``torch.nn.functional.huber_loss``.

    Args:
        input: the predictions.
        target: the targets, of ``input``'s shape.
        reduction: ``'mean'``, ``'sum'`` or ``'none'``.
        delta: where the loss turns from quadratic to linear.

    Returns:
        Tensor: the loss (0-d unless ``reduction='none'``).

    Example:
        >>> import tensorbrain as tb
        >>> tb.nn.functional.huber_loss(tb.tensor([0.5, 3.0]), tb.zeros(2), reduction="none", delta=2.0).tolist()
        [0.125, 4.0]
    """
    return _pointwise_loss(
        "huber_loss", input, target, reduction,
        lambda xp, d: xp.where(xp.abs(d) < delta, 0.5 * d * d, delta * (xp.abs(d) - 0.5 * delta)),
        lambda xp, d: xp.where(xp.abs(d) < delta, d, delta * xp.sign(d)))


@autocast_op("binary_cross_entropy_with_logits")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Sigmoid + binary cross-entropy, stable for large logits: ``(1-t)x + l(t) softplus(-x)``
    with ``l(t) = 1 + (pos_weight - 1) t``."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    _same_device("binary_cross_entropy_with_logits", input, target, weight, pos_weight)
    x, t = input._data, target._data
    if x.shape != t.shape:
        raise ValueError(f"binary_cross_entropy_with_logits: target size {tuple(t.shape)} must be "
                         f"the same as input size {tuple(x.shape)}")
    xp = get_array_module(x)
    sp = xp.logaddexp(0, -x)                # softplus(-x), no overflow
    lw = 1 if pos_weight is None else 1 + (pos_weight._data - 1) * t
    per = (1 - t) * x + lw * sp
    if weight is not None:
        per = per * weight._data
    per = per.astype(x.dtype, copy=False)
    out = _reduce_array(xp, per, reduction)

    def backward(g):
        r = _reduce_grad(xp, g, per.shape, reduction, per.dtype)
        if weight is not None:
            r = r * weight._data
        sig_neg = 1 / (1 + xp.exp(x))      # sigmoid(-x)
        gx = (r * ((1 - t) - lw * sig_neg)).astype(x.dtype, copy=False) if input.requires_grad else None
        gt = None
        if target.requires_grad:
            pw = 1 if pos_weight is None else pos_weight._data
            gt = (r * (-x + (pw - 1) * sp)).astype(t.dtype, copy=False)
        return gx, gt
    return make(out, (input, target), backward, "BinaryCrossEntropyWithLogitsBackward")


@autocast_op("binary_cross_entropy")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """BCE on probabilities; logs are clamped at -100 as in PyTorch."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    p, t = input._data, target._data
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
        per = per * weight._data
    per = per.astype(p.dtype, copy=False)
    out = _reduce_array(xp, per, reduction)

    def backward(g):
        r = _reduce_grad(xp, g, per.shape, reduction, per.dtype)
        if weight is not None:
            r = r * weight._data
        gx = r * (p - t) / xp.maximum(p * (1 - p), 1e-12)
        gt = r * (l1p - lp) if target.requires_grad else None
        return gx.astype(p.dtype, copy=False), gt
    return make(out, (input, target), backward, "BinaryCrossEntropyBackward")


@autocast_op("kl_div")
def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL divergence with ``input`` log-probabilities; ``reduction='batchmean'`` as in PyTorch."""
    if log_target:
        per = _E.mul(_E.exp(target), _E.sub(target, input))
    else:
        x, t = input._data, target._data
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
