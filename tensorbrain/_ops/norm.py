"""Normalisation layers as fused ops: layer_norm, batch_norm, group_norm (PyTorch semantics).

One graph node each, with the closed-form backward of ``xhat = (x - mean) * rstd``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

from .core import make
from .elementwise import _fused_module
from .._xp import get_array_module, matmul
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py


# ***** normalisation *****
def _norm_backward(xp, gxhat, xhat, rstd, axes):
    """d/dx of xhat = (x - mean) * rstd over ``axes``, given d/dxhat (standard formula)."""
    m1 = gxhat.mean(axis=axes, keepdims=True)
    m2 = (gxhat * xhat).mean(axis=axes, keepdims=True)
    return rstd * (gxhat - m1 - xhat * m2)


def _scale_shift(xhat, w, b):
    """``xhat * w + b`` in a new array, either factor left out where None."""
    out = xhat * w if w is not None else xhat.copy()
    if b is not None:
        out += b
    return out


def _channel_sum(xp, a, b, axes):
    """``(a * b).sum(axes, keepdims=True)`` for batch norm's axes (0, 2, ...) without the
    full-size product: per image a batched (C, L) row-wise dot, summed over images."""
    n, c = a.shape[:2]
    a3, b3 = a.reshape(n, c, 1, -1), b.reshape(n, c, -1, 1)
    return matmul(a3, b3).sum(axis=0).reshape((1, c) + (1,) * (a.ndim - 2))


def _affine_grads(g, xhat, weight, bias, axes):
    """Gradients of ``weight`` and ``bias`` in ``xhat * weight + bias`` (summed over ``axes``),
    None for one that is absent or needs no gradient."""
    gw = gb = None
    if weight is not None and weight.requires_grad:
        gw = (g * xhat).sum(axis=axes)
    if bias is not None and bias.requires_grad:
        gb = g.sum(axis=axes)
    return gw, gb


def layer_norm_rows_forward(x, weight, bias, eps):
    """``(out, mean, rstd)``: layer norm over the rows of a 2-D ``x`` (weight/bias of its row
    size, or None). The NumPy twin of ``tensorbrain._C.layer_norm_rows_forward``."""
    xp = get_array_module(x)
    mu = x.mean(axis=1, keepdims=True)
    xc = x - mu
    rstd = 1 / xp.sqrt((xc * xc).mean(axis=1, keepdims=True) + eps)
    xc *= rstd
    out = _scale_shift(xc, weight, bias)
    return out, mu[:, 0], rstd[:, 0].astype(x.dtype, copy=False)


def layer_norm_rows_backward(x, mean, rstd, weight, g, need_x, need_weight, need_bias):
    """``(gx, gweight, gbias)`` of :func:`layer_norm_rows_forward`, None where not needed. The
    NumPy twin of ``tensorbrain._C.layer_norm_rows_backward``."""
    xp = get_array_module(x)
    xhat = (x - mean[:, None]) * rstd[:, None]
    gx = None
    if need_x:
        gx = _norm_backward(xp, g * weight if weight is not None else g, xhat, rstd[:, None], 1)
    return (gx, (g * xhat).sum(axis=0) if need_weight else None, g.sum(axis=0) if need_bias else None)


def _layer_norm_native(C, input, weight, bias, x, wd, bd, normalized_shape, eps):
    """layer_norm on the native rows kernels (csrc/kernels/fused.cpp): one pass forward and one
    backward (the three gradients together), no full-size temporaries kept but the output."""
    d = math.prod(normalized_shape)
    x2 = x.reshape(-1, d)
    w2, b2 = (None if t is None else t.reshape(d) for t in (wd, bd))
    out, mean, rstd = C.layer_norm_rows_forward(x2, w2, b2, float(eps))

    def backward(g):
        g2 = get_array_module(g).ascontiguousarray(g, dtype=x.dtype).reshape(-1, d)
        gx, gw, gb = C.layer_norm_rows_backward(
            x2, mean, rstd, w2, g2, input.requires_grad,
            weight is not None and weight.requires_grad, bias is not None and bias.requires_grad)
        return (None if gx is None else gx.reshape(x.shape),
                None if gw is None else gw.reshape(wd.shape),
                None if gb is None else gb.reshape(bd.shape))
    return make(out.reshape(x.shape), (input, weight, bias), backward, "NativeLayerNormBackward",
                (weight,) if weight is not None else ())


@autocast_op("layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the trailing ``normalized_shape`` dims, one fused op."""
    x = input._data
    if isinstance(normalized_shape, numbers.Integral):
        normalized_shape = (int(normalized_shape),)
    normalized_shape = tuple(normalized_shape)
    k = len(normalized_shape)
    if tuple(x.shape[x.ndim - k:]) != normalized_shape:
        raise RuntimeError(f"layer_norm: input of shape {tuple(x.shape)} does not end with "
                           f"normalized_shape {normalized_shape}")
    C = _fused_module(x)
    wd, bd = (None if t is None else t._data for t in (weight, bias))
    if C is not None and all(t is None or (t.dtype == x.dtype and t.flags.c_contiguous) for t in (wd, bd)):
        return _layer_norm_native(C, input, weight, bias, x, wd, bd, normalized_shape, eps)
    xp = get_array_module(x)
    axes = tuple(range(x.ndim - k, x.ndim))
    # astype: CuPy's mean of bfloat16 is float32 (NumPy's keeps the dtype)
    mu = x.mean(axis=axes, keepdims=True).astype(x.dtype, copy=False)
    xc = x - mu
    rstd = (1 / xp.sqrt((xc * xc).mean(axis=axes, keepdims=True) + eps)).astype(x.dtype, copy=False)
    xhat = xc * rstd
    out = _scale_shift(xhat, None if weight is None else weight._data,
                       None if bias is None else bias._data)
    lead = tuple(range(x.ndim - k))

    def backward(g):
        gx = None
        if input.requires_grad:
            gxhat = g * weight._data if weight is not None else g
            gx = _norm_backward(xp, gxhat, xhat, rstd, axes)
        return (gx, *_affine_grads(g, xhat, weight, bias, lead))
    return make(out, (input, weight, bias), backward, "NativeLayerNormBackward", (weight,) if weight is not None else ())


def _update_running(running_mean, running_var, mu, var, n, momentum):
    """PyTorch's running statistics update (the variance unbiased) from the batch's ``(C,)``
    mean and biased variance."""
    m = 0.0 if momentum is None else momentum
    if running_mean is not None:
        rm = running_mean._data
        rm *= 1 - m
        rm += m * mu.astype(rm.dtype)
        running_mean._version[0] += 1
    if running_var is not None:
        rv = running_var._data
        rv *= 1 - m
        rv += (m * n / (n - 1)) * var.astype(rv.dtype)
        running_var._version[0] += 1


def batch_norm_train_forward(x, weight, bias, eps):
    """``(out, mean, var)``: batch norm of ``x`` ``(N, C, ...)`` with its batch statistics
    (``var`` biased), weight/bias ``(C,)`` or None. The NumPy twin of
    ``tensorbrain._C.batch_norm_train_forward``."""
    xp = get_array_module(x)
    c = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    bshape = (1, c) + (1,) * (x.ndim - 2)
    mu = x.mean(axis=axes, keepdims=True)
    xc = x - mu
    var = _channel_sum(xp, xc, xc, axes) / (x.size // c)
    xc *= 1 / xp.sqrt(var + eps)
    out = _scale_shift(xc, None if weight is None else weight.reshape(bshape),
                       None if bias is None else bias.reshape(bshape))
    return out, mu.reshape(c), var.reshape(c).astype(x.dtype, copy=False)


def batch_norm_train_backward(g, x, mean, rstd, weight, need_x, need_weight, need_bias):
    """``(gx, gweight, gbias)`` of :func:`batch_norm_train_forward` from the saved input, None
    where not needed. The NumPy twin of ``tensorbrain._C.batch_norm_train_backward``."""
    xp = get_array_module(x)
    c = x.shape[1]
    axes = (0,) + tuple(range(2, x.ndim))
    bshape = (1, c) + (1,) * (x.ndim - 2)
    xhat = (x - mean.reshape(bshape)) * rstd.reshape(bshape)
    sg = g.sum(axis=axes, keepdims=True)
    sgx = _channel_sum(xp, g, xhat, axes)
    gx = None
    if need_x:
        k = x.size // c
        scale = rstd.reshape(bshape) * (weight.reshape(bshape) if weight is not None else 1)
        gx = g * scale
        gx -= scale * (sg / k)
        gx -= xhat * (scale * (sgx / k))
    return gx, sgx.reshape(c) if need_weight else None, sg.reshape(c) if need_bias else None


def _batch_norm_train_native(C, input, running_mean, running_var, weight, bias, x, wd, bd,
                             momentum, eps):
    """batch_norm in training on the native kernels (csrc/kernels/fused.cpp): statistics and
    output in two passes per channel, backward in two, from the saved input (no xhat kept)."""
    c = x.shape[1]
    out, mu, var = C.batch_norm_train_forward(x, wd, bd, float(eps))
    _update_running(running_mean, running_var, mu, var, x.size // c, momentum)
    xp = get_array_module(x)
    rstd = (1 / xp.sqrt(var.astype(np.float64) + eps)).astype(np.float32)

    def backward(g):
        g = xp.ascontiguousarray(g, dtype=x.dtype)
        return C.batch_norm_train_backward(
            g, x, mu, rstd, wd, input.requires_grad,
            weight is not None and weight.requires_grad, bias is not None and bias.requires_grad)
    return make(out, (input, weight, bias), backward, "NativeBatchNormBackward",
                (input, weight) if weight is not None else (input,))


@autocast_op("batch_norm")
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Batch norm over dim 1 of (N, C, ...). In training the batch statistics are used and the
    running statistics (plain tensors) are updated in place; otherwise the running ones are used."""
    x = input._data
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
        C = _fused_module(x)
        wd, bd = (None if t is None else t._data for t in (weight, bias))
        if C is not None and all(t is None or (t.dtype == x.dtype and t.flags.c_contiguous)
                                 for t in (wd, bd)):
            return _batch_norm_train_native(C, input, running_mean, running_var, weight, bias,
                                            x, wd, bd, momentum, eps)
        mu = x.mean(axis=axes, keepdims=True)
        xc = x - mu
        var = _channel_sum(xp, xc, xc, axes) / n
        rstd = 1 / xp.sqrt(var + eps)
        if running_mean is not None:
            m = 0.0 if momentum is None else momentum
            rm = running_mean._data
            rm *= 1 - m
            rm += m * mu.reshape(c).astype(rm.dtype)
            running_mean._version[0] += 1
        if running_var is not None:
            m = 0.0 if momentum is None else momentum
            rv = running_var._data
            rv *= 1 - m
            rv += (m * n / (n - 1)) * var.reshape(c).astype(rv.dtype)   # unbiased, as PyTorch
            running_var._version[0] += 1
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var are needed when training=False")
        mu = running_mean._data.reshape(bshape).astype(x.dtype, copy=False)
        xc = x - mu
        rstd = (1 / xp.sqrt(running_var._data.reshape(bshape) + eps)).astype(x.dtype, copy=False)
    xhat = xc
    xhat *= rstd     # xc is a fresh temporary: normalise it in place
    wd = weight._data.reshape(bshape) if weight is not None else None
    out = _scale_shift(xhat, wd, None if bias is None else bias._data.reshape(bshape))

    def backward(g):
        # The input gradient and both affine gradients from two per-channel sums, sum(g) and
        # sum(g * xhat): gx = rstd*w * (g - sum(g)/n - xhat * sum(g*xhat)/n). Written this way
        # the backward makes 2 full-size temporaries instead of 7 (the time saved is in
        # docs/training.md).
        g = xp.ascontiguousarray(g)   # a stride-0 broadcast g would make the matmul skip BLAS
        need_w = weight is not None and weight.requires_grad
        sg = g.sum(axis=axes, keepdims=True) if training or (bias is not None and bias.requires_grad) else None
        sgx = _channel_sum(xp, g, xhat, axes) if training or need_w else None
        gx = None
        if input.requires_grad:
            scale = rstd * wd if wd is not None else rstd
            gx = g * scale
            if training:
                k = x.size // c
                gx -= scale * (sg / k)
                t = xhat * (scale * (sgx / k))
                gx -= t
        gw = sgx.reshape(c) if need_w else None
        gb = sg.reshape(c) if bias is not None and bias.requires_grad else None
        return gx, gw, gb
    return make(out, (input, weight, bias), backward, "NativeBatchNormBackward",
                (weight,) if weight is not None else ())


@autocast_op("group_norm")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each of ``num_groups`` channel groups per sample, then a per-channel affine."""
    x = input._data
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
    wd = weight._data.reshape(bshape) if weight is not None else None
    out = _scale_shift(xhat, wd, None if bias is None else bias._data.reshape(bshape))
    axes = (0,) + tuple(range(2, x.ndim))

    def backward(g):
        gx = None
        if input.requires_grad:
            gxhat = (g * wd if wd is not None else g).reshape(n, num_groups, -1)
            gx = _norm_backward(xp, gxhat, xhat.reshape(n, num_groups, -1), rstd, 2).reshape(x.shape)
        return (gx, *_affine_grads(g, xhat, weight, bias, axes))
    return make(out, (input, weight, bias), backward, "NativeGroupNormBackward",
                (weight,) if weight is not None else ())
