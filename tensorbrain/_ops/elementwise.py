"""Elementwise ops: arithmetic, comparisons, unary math and activations."""
from __future__ import annotations

import math

import numpy as np

from .._dtype import bfloat16 as _BF16
from .._dtype import get_default_dtype, promote_types
from .. import _native
from .._xp import add as _xp_add, get_array_module, is_cupy_array
from ..autograd.grad_mode import _state as _grad_state
from .._tensor_base import TensorBase as Tensor
from .core import as_operand, make, shape_error, unbroadcast
from .erf import _erf
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py


def _is_tensor(x):
    return isinstance(x, Tensor)


def _binary(name, a, b, forward, grad_a, grad_b, save_a=False, save_b=False):
    """Shared path of the binary arithmetic ops: operands, broadcasting, device checks."""
    T = Tensor
    ta, tb_ = isinstance(a, T), isinstance(b, T)
    if ta and tb_:
        ad, bd = a._data, b._data
        if type(ad) is not type(bd):
            as_operand(b, a)  # raises the device error naming both devices
        ka, kb = ad.dtype.kind, bd.dtype.kind
        if ka != kb and (ka == "V" or kb == "V"):   # kind "V": ml_dtypes' bfloat16
            # NumPy cannot promote bfloat16 with float16 or int64: PyTorch's table
            common = promote_types(ad.dtype, bd.dtype)
            ad, bd = ad.astype(common, copy=False), bd.astype(common, copy=False)
        elif ka != kb and (ka == "f") != (kb == "f"):
            # PyTorch: an integer/bool tensor meets a float tensor -> the float tensor's dtype
            # (NumPy would widen int64 + float32 to float64).
            if ka == "f":
                bd = bd.astype(ad.dtype)
            elif kb == "f":
                ad = ad.astype(bd.dtype)
    else:
        if ta:
            b = as_operand(b, a)
            tb_ = isinstance(b, T)
        else:  # reflected op: scalar on the left
            a = as_operand(a, b)
            ta = isinstance(a, T)
        ad = a._data if ta else a
        bd = b._data if tb_ else b
    # Where PyTorch and NumPy differ, follow PyTorch: an integer/bool tensor combined with a
    # Python float gives the default float dtype (NumPy would give float64).
    if not (ta and tb_):
        if ta and isinstance(bd, float) and ad.dtype.kind in "biu":
            ad = ad.astype(get_default_dtype())
        elif tb_ and isinstance(ad, float) and bd.dtype.kind in "biu":
            bd = bd.astype(get_default_dtype())
    try:
        out = forward(ad, bd)
    except ValueError as exc:
        if "broadcast" not in str(exc):   # e.g. integers to negative integer powers
            raise RuntimeError(f"{name.replace('Backward', '').lower()}: {exc}") from None
        raise shape_error(name.replace("Backward", "").lower(), ad, bd, exc) from None
    if (isinstance(bd, float) and ta and ad.dtype.char == "E" or
            isinstance(ad, float) and tb_ and bd.dtype.char == "E") and out.dtype.char == "f":
        # ml_dtypes computes bfloat16 (op) Python float in float32; PyTorch, too, computes it in
        # float32 but rounds the result back to bfloat16 (the scalar is weak).
        out = out.astype(_BF16)
    need_a = ta and a.requires_grad
    need_b = tb_ and b.requires_grad
    if not (need_a or need_b) or not _grad_state.__dict__.get("enabled", True):
        # the operands go along (no graph is recorded) so a DTensor operand is seen by make
        return make(out, (a if ta else None, b if tb_ else None), None, name)

    def backward(g):
        ga = unbroadcast(grad_a(g, ad, bd, out), ad.shape) if need_a else None
        gb = unbroadcast(grad_b(g, ad, bd, out), bd.shape) if need_b else None
        return ga, gb

    # save_x: True (both gradients read x), "a"/"b" (only that operand's gradient reads x):
    # save only what the gradients that will run read, so `v * 2.0` does not pin v's version.
    saved = ()
    if ta and (save_a is True or (save_a == "a" and need_a) or (save_a == "b" and need_b)):
        saved = (a,)
    if tb_ and (save_b is True or (save_b == "a" and need_a) or (save_b == "b" and need_b)):
        saved += (b,)
    return make(out, (a if ta else None, b if tb_ else None), backward, name, saved)


def _cast_like(g, x):
    return g if getattr(x, "dtype", None) is None or g.dtype == x.dtype else g.astype(x.dtype)


def add(a, b, alpha=1):
    return _binary("AddBackward", a, b if alpha == 1 else mul(b, alpha),
                   _add_arrays, lambda g, x, y, o: g, lambda g, x, y, o: g)


def _add_arrays(x, y):
    """``x + y`` of two operands (arrays or a scalar): large float32 arrays on the native kernel
    (``_xp.add``)."""
    if type(x) is np.ndarray and type(y) is np.ndarray:
        return _xp_add(x, y)
    return x + y


def sub(a, b, alpha=1):
    return _binary("SubBackward", a, b if alpha == 1 else mul(b, alpha),
                   lambda x, y: x - y, lambda g, x, y, o: g, lambda g, x, y, o: -g)


def _conj(v):
    """``v`` conjugated when complex: complex gradients are conjugate Wirtinger, as torch's
    (``d(a * b)/da`` propagates ``g * conj(b)``); real arrays and numbers pass untouched."""
    return v.conjugate() if getattr(v, "dtype", None) is not None and v.dtype.kind == "c" or \
        isinstance(v, complex) else v


def mul(a, b):
    return _binary("MulBackward", a, b, lambda x, y: x * y,
                   lambda g, x, y, o: g * _conj(y), lambda g, x, y, o: g * _conj(x), "b", "a")


def div(a, b, rounding_mode=None):
    if rounding_mode is not None:
        if rounding_mode not in ("floor", "trunc"):
            raise ValueError(f"div: rounding_mode must be None, 'floor' or 'trunc', got {rounding_mode!r}")
        q = div(a, b)
        r = floor(q) if rounding_mode == "floor" else trunc(q)
        ints = [t._data.dtype for t in (a, b) if _is_tensor(t)]
        if ints and all(d.kind in "biu" for d in ints):
            r = Tensor._wrap(r._data.astype(np.result_type(*ints)))
        return r
    # True division of integers gives the default float dtype, as in PyTorch.
    if _is_tensor(a) and a._data.dtype.kind in "biu" and (not _is_tensor(b) or b._data.dtype.kind in "biu"):
        a = Tensor._wrap(a._data.astype(get_default_dtype()))
        if _is_tensor(b):
            b = Tensor._wrap(b._data.astype(get_default_dtype()))
    elif _is_tensor(b) and b._data.dtype.kind in "biu" and not _is_tensor(a) and not isinstance(a, float):
        b = Tensor._wrap(b._data.astype(get_default_dtype()))
    return _binary("DivBackward", a, b, lambda x, y: x / y,
                   lambda g, x, y, o: g / _conj(y), lambda g, x, y, o: -g * _conj(x / (y * y)),
                   "b", True)


@autocast_op("pow")
def pow(a, b):
    def grad_base(g, x, y, o):
        return g * y * x ** (y - 1) if not (isinstance(y, (int, float)) and y == 2) else g * 2 * x

    def grad_exp(g, x, y, o):
        xp = get_array_module(o)
        return g * o * xp.log(xp.where(x > 0, x, 1))

    return _binary("PowBackward", a, b, lambda x, y: x ** y, grad_base, grad_exp, True, True)


def maximum(a, b):
    return _binary("MaximumBackward", a, b, lambda x, y: get_array_module(x if _arr(x) else y).maximum(x, y),
                   lambda g, x, y, o: g * _tie(x > y, x == y), lambda g, x, y, o: g * _tie(y > x, x == y),
                   True, True)


def minimum(a, b):
    return _binary("MinimumBackward", a, b, lambda x, y: get_array_module(x if _arr(x) else y).minimum(x, y),
                   lambda g, x, y, o: g * _tie(x < y, x == y), lambda g, x, y, o: g * _tie(y < x, x == y),
                   True, True)


def _arr(x):
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, np.generic)


def _tie(strict, equal):
    # PyTorch splits the gradient evenly between equal operands of maximum/minimum.
    return strict + 0.5 * equal


def neg(a):
    return make(-a._data, (a,), lambda g: (-g,), "NegBackward")


# ***** comparisons (no gradient) *****
def _compare(fn):
    def op(a, b):
        if not _is_tensor(a):
            a, b = b, a
            fn_ = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}.get(fn.__name__, fn.__name__)
            f = _CMP[fn_]
        else:
            f = fn
        b = as_operand(b, a)
        bd = b._data if _is_tensor(b) else b
        try:
            return Tensor._wrap(f(a._data, bd))
        except ValueError as exc:
            raise shape_error(fn.__name__, a._data, bd, exc) from None
    op.__name__ = op.__qualname__ = fn.__name__   # its docstring: docs_math.py
    return op


def lt(x, y): return x < y
def gt(x, y): return x > y
def le(x, y): return x <= y
def ge(x, y): return x >= y
def eq(x, y): return x == y
def ne(x, y): return x != y


_CMP = {f.__name__: f for f in (lt, gt, le, ge, eq, ne)}
lt_, gt_, le_, ge_, eq_, ne_ = (_compare(f) for f in (lt, gt, le, ge, eq, ne))


# ***** unary math *****
@autocast_op("exp")
def exp(a):
    out = get_array_module(a._data).exp(a._data)
    return make(out, (a,), lambda g: (g * _conj(out),), "ExpBackward")


@autocast_op("log")
def log(a):
    x = a._data
    return make(get_array_module(x).log(x), (a,), lambda g: (g / x,), "LogBackward", (a,))


def sqrt(a):
    out = get_array_module(a._data).sqrt(a._data)
    return make(out, (a,), lambda g: (g / (2 * out),), "SqrtBackward")


@autocast_op("rsqrt")
def rsqrt(a):
    out = 1 / get_array_module(a._data).sqrt(a._data)
    return make(out, (a,), lambda g: (-0.5 * g * out * out * out,), "RsqrtBackward")


def abs(a):
    x = a._data
    xp = get_array_module(x)
    return make(xp.abs(x), (a,), lambda g: (g * xp.sign(x),), "AbsBackward", (a,))


def sign(a):
    return Tensor._wrap(get_array_module(a._data).sign(a._data))


def sin(a):
    x = a._data
    xp = get_array_module(x)
    return make(xp.sin(x), (a,), lambda g: (g * xp.cos(x),), "SinBackward", (a,))


def cos(a):
    x = a._data
    xp = get_array_module(x)
    return make(xp.cos(x), (a,), lambda g: (-g * xp.sin(x),), "CosBackward", (a,))


def clamp(a, min=None, max=None):
    x = a._data
    xp = get_array_module(x)
    if min is None and max is None:
        raise ValueError("clamp: at least one of min and max must be given")
    mn = min._data if _is_tensor(min) else min
    mx = max._data if _is_tensor(max) else max
    out = xp.clip(x, mn, mx)
    if out.dtype != x.dtype and not _is_tensor(min) and not _is_tensor(max):
        out = out.astype(x.dtype)

    def backward(g):
        mask = xp.ones(x.shape, dtype=bool)
        if mn is not None:
            mask &= x >= mn
        if mx is not None:
            mask &= x <= mx
        return (g * mask,)
    return make(out, (a,), backward, "ClampBackward", (a,))


def where(cond, a, b):
    like = a if _is_tensor(a) else b
    c = cond._data if _is_tensor(cond) else cond
    a = as_operand(a, like) if _is_tensor(like) else a
    b = as_operand(b, like) if _is_tensor(like) else b
    ad = a._data if _is_tensor(a) else a
    bd = b._data if _is_tensor(b) else b
    xp = get_array_module(like._data) if _is_tensor(like) else np
    out = xp.where(c, ad, bd)
    if not _is_tensor(like):
        return Tensor._wrap(out)

    def backward(g):
        zero = xp.zeros((), dtype=g.dtype)
        ga = unbroadcast(xp.where(c, g, zero), a.shape) if _is_tensor(a) and a.requires_grad else None
        gb = unbroadcast(xp.where(c, zero, g), b.shape) if _is_tensor(b) and b.requires_grad else None
        return ga, gb
    return make(out, (a if _is_tensor(a) else None, b if _is_tensor(b) else None), backward, "WhereBackward")


# ***** activations *****
def relu(a):
    x = a._data
    # the C++ passes (NumPy arrays only: CuPy's maximum is one kernel already, and
    # _ops/cuda_fused.py has no ReLU) split across threads; maximum and relu_backward are twins
    C = _fused_module(x) if type(x) is np.ndarray else None
    if C is not None:
        out = C.relu_forward(x)
    else:
        out = get_array_module(x).maximum(x, 0)
        C = _fused_module(out) if type(out) is np.ndarray else None

    def backward(g):
        if C is not None and _fused_module(g) is C and g.shape == out.shape:
            return (C.relu_backward(out, g),)           # one native pass (csrc/kernels/fused.cpp)
        return (relu_backward(out, g),)
    return make(out, (a,), backward, "ReluBackward")


def relu_backward(out, g):
    """``g * (out > 0)`` from ReLU's output: the NumPy twin of ``tensorbrain._C.relu_backward``
    (a product with 1 or 0: ``-g * 0`` is ``-0``, NaN stays NaN)."""
    return g * (out > 0)


def sigmoid(a):
    x = a._data
    xp = get_array_module(x)
    # Split by sign so exp never overflows (float16 and float32 alike).
    e = xp.exp(-xp.abs(x))
    out = xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)
    return make(out, (a,), lambda g: (g * out * (1 - out),), "SigmoidBackward")


def tanh(a):
    out = get_array_module(a._data).tanh(a._data)
    return make(out, (a,), lambda g: (g * (1 - out * out),), "TanhBackward")


_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)


def gelu(a, approximate="none"):
    x = a._data
    xp = get_array_module(x)
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
        t = xp.tanh(inner)
        out = (0.5 * x * (1 + t)).astype(x.dtype, copy=False)   # bfloat16 * float -> float32

        def backward(g):
            dinner = _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
            return ((g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * dinner)).astype(x.dtype, copy=False),)
    elif approximate == "none":
        C = _fused_module(x)
        if C is not None:                      # one native pass each way (csrc/kernels/fused.cpp)
            out = C.gelu_erf_forward(x)

            def backward(g):
                return (C.gelu_erf_backward(x, xp.ascontiguousarray(g, dtype=np.float32)),)
        else:
            cdf = _gelu_cdf(x)
            out = (x * cdf).astype(x.dtype, copy=False)

            def backward(g):
                return (gelu_erf_backward(x, g, cdf),)
    else:
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return make(out, (a,), backward, "GeluBackward", (a,))


def _gelu_cdf(x):
    """The normal CDF ``(1 + erf(x / sqrt 2)) / 2``, in place after the erf (1M-element GPT
    activations)."""
    cdf = _erf(x * (1 / math.sqrt(2)))
    cdf += 1
    cdf *= 0.5
    return cdf


def gelu_erf_forward(x):
    """``x * (1 + erf(x / sqrt 2)) / 2``: the NumPy twin of ``tensorbrain._C.gelu_erf_forward``
    (the same float32 erf rational in the same order of operations: equal bit for bit)."""
    return (x * _gelu_cdf(x)).astype(x.dtype, copy=False)


def gelu_erf_backward(x, g, cdf=None):
    """``g * (cdf + x * pdf(x))``, ``pdf = exp(-x^2 / 2) / sqrt(2 pi)``: the NumPy twin of
    ``tensorbrain._C.gelu_erf_backward`` (``cdf`` when forward kept it)."""
    xp = get_array_module(x)
    d = x * x
    d *= -0.5
    xp.exp(d, out=d)
    d *= 1 / math.sqrt(2 * math.pi)
    d *= x
    d += _gelu_cdf(x) if cdf is None else cdf
    d *= g
    return d.astype(x.dtype, copy=False)


_NATIVE_FUSED = True   # tests switch the native fused kernels off to run the twins


def _fused_module(x):
    """The module of fused float32 kernels for ``x``, or None for the NumPy/CuPy twins: the C++
    one (csrc/kernels/fused.cpp) for C-contiguous float32 NumPy arrays, its CuPy counterpart
    (``_ops/cuda_fused.py``, the same names) for C-contiguous float32 CuPy arrays."""
    if not _NATIVE_FUSED or x.dtype != np.float32 or not x.flags.c_contiguous:
        return None
    if type(x) is np.ndarray:
        return _native.loaded()
    if is_cupy_array(x):
        from . import cuda_fused
        return cuda_fused
    return None


def silu(a):
    x = a._data
    s = sigmoid(Tensor._wrap(x))._data
    out = x * s
    return make(out, (a,), lambda g: (g * (s * (1 + x * (1 - s))),), "SiluBackward", (a,))


# ***** more unary math *****
@autocast_op("log1p")
def log1p(a):
    x = a._data
    return make(get_array_module(x).log1p(x), (a,), lambda g: (g / (1 + x),), "Log1PBackward", (a,))


@autocast_op("expm1")
def expm1(a):
    out = get_array_module(a._data).expm1(a._data)
    return make(out, (a,), lambda g: (g * (out + 1),), "Expm1Backward")


def erf(a):
    x = a._data
    xp = get_array_module(x)
    out = _erf(x).astype(x.dtype, copy=False)
    return make(out, (a,), lambda g: (g * (2 / math.sqrt(math.pi)) * xp.exp(-x * x),), "ErfBackward", (a,))


def square(a):
    return mul(a, a)


@autocast_op("reciprocal")
def reciprocal(a):
    out = 1 / a._data
    return make(out, (a,), lambda g: (-g * out * out,), "ReciprocalBackward")


def _no_grad_unary(name, fn):
    def op(a):
        return Tensor._wrap(fn(get_array_module(a._data), a._data))
    op.__name__ = op.__qualname__ = name   # its docstring: docs_math.py
    return op


floor = _no_grad_unary("floor", lambda xp, x: xp.floor(x))
ceil = _no_grad_unary("ceil", lambda xp, x: xp.ceil(x))
trunc = _no_grad_unary("trunc", lambda xp, x: xp.trunc(x))
isnan = _no_grad_unary("isnan", lambda xp, x: xp.isnan(x))
isinf = _no_grad_unary("isinf", lambda xp, x: xp.isinf(x))
isfinite = _no_grad_unary("isfinite", lambda xp, x: xp.isfinite(x))
logical_not = _no_grad_unary("logical_not", lambda xp, x: xp.logical_not(x))


def round(a, decimals=0):
    return Tensor._wrap(get_array_module(a._data).round(a._data, decimals))


def masked_fill(a, mask, value):
    """``a`` with ``value`` where ``mask`` is True, as ``torch.masked_fill``.

    Args:
        a: the input tensor.
        mask: a bool tensor broadcastable to ``a``.
        value: a number or a one-element tensor.

    Returns:
        Tensor: a new tensor of ``a``'s shape and dtype; the gradient flows to the kept elements.

    Raises:
        RuntimeError: ``mask`` is not bool.

    Example:
        >>> import tensorbrain as tb
        >>> x = tb.tensor([1.0, 2.0, 3.0])
        >>> x.masked_fill(x > 1.5, 0.0).tolist()
        [1.0, 0.0, 0.0]
    """
    m = mask._data if _is_tensor(mask) else mask
    if getattr(m, "dtype", None) is not None and m.dtype != np.bool_:
        raise RuntimeError(f"masked_fill only supports boolean masks, but got mask with dtype {m.dtype}")
    if _is_tensor(value):
        value = value._data.item() if value._data.size == 1 else value
    out = where(mask, value, a)
    if out._data.dtype != a._data.dtype:
        out = make(out._data.astype(a._data.dtype), (out,), lambda g, d=out._data.dtype: (g.astype(d),),
                   "ToCopyBackward")
    return out


# ***** composites: torch's addcmul, addcdiv, lerp (written from the ops above, so autograd is theirs) *****
def addcmul(a, tensor1, tensor2, value=1):
    """``a + value * tensor1 * tensor2``, broadcast.

    As ``torch.addcmul``; hand-written optimizers use the in-place form
    (``exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)``).

    Args:
        a: the tensor added to.
        tensor1: the first factor.
        tensor2: the second factor.
        value: the multiplier of the product.

    Returns:
        Tensor: the broadcast shape of the three.

    Example:
        >>> import tensorbrain as tb
        >>> tb.addcmul(tb.ones(2), tb.tensor([1.0, 2.0]), tb.tensor([3.0, 4.0]), value=0.5).tolist()
        [2.5, 5.0]
    """
    return add(a, mul(tensor1, tensor2), alpha=value)


def addcdiv(a, tensor1, tensor2, value=1):
    """``a + value * tensor1 / tensor2``, broadcast.

    As ``torch.addcdiv`` (Adam written by hand: ``p.data.addcdiv_(exp_avg, denom, value=-lr)``).

    Args:
        a: the tensor added to.
        tensor1: the numerator.
        tensor2: the denominator.
        value: the multiplier of the quotient.

    Returns:
        Tensor: the broadcast shape of the three.

    Example:
        >>> import tensorbrain as tb
        >>> tb.addcdiv(tb.ones(2), tb.tensor([1.0, 2.0]), tb.tensor([4.0, 4.0]), value=-2).tolist()
        [0.5, 0.0]
    """
    return add(a, div(tensor1, tensor2), alpha=value)


def lerp(a, end, weight):
    """Linear interpolation ``a + weight * (end - a)``.

    As ``torch.lerp``; an EMA of weights is ``ema.lerp_(p, 1 - decay)``.

    Args:
        a: the start.
        end: the end (broadcast with ``a``).
        weight: a number or a tensor broadcast with ``a``.

    Returns:
        Tensor: the broadcast shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.lerp(tb.zeros(2), tb.tensor([4.0, 8.0]), 0.25).tolist()
        [1.0, 2.0]
    """
    return add(a, mul(sub(end, a), weight))
