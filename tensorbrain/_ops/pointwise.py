"""The long tail of torch's elementwise math, each op made from one row of a table.

:data:`UNARY` rows are ``name: (forward, derivative, example)``: ``forward(xp, x)`` computes
the result from the input array, ``derivative(xp, x, out)`` gives ``d out / d x`` (None: no
gradient, as torch's integer-valued or boolean results), and the example is a call and its
printed result for the docstring. Integer inputs of a floating-point function are computed in
the default float dtype, as torch's. :data:`BINARY` rows are ``name: (forward, grad_a, grad_b,
example)`` on :func:`elementwise._binary` (torch's broadcasting and promotion), each gradient
``(xp, a, b, out) -> d out / d operand`` or None. The op table (``table.py``) makes
``tb.<name>``, ``Tensor.<name>`` and the in-place ``Tensor.<name>_`` from them.

The special functions NumPy lacks (``lgamma``, ``digamma``, ``erfinv``) are computed here:
``math.lgamma`` per element (exact), ``digamma`` by the recurrence up to x >= 10 and its
asymptotic series (about 1e-12 relative), ``erfinv`` by Giles' approximation refined with three Newton
steps on ``erf`` (``erfc`` in the tails); CuPy's ``cupyx.scipy.special`` on a GPU.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from .._dtype import get_default_dtype
from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from . import elementwise as E
from .core import make


if TYPE_CHECKING:   # the ops this module makes from its tables, below, are seen by mypy as Any
    def __getattr__(name: str) -> Any: ...

_IMPORT = ">>> import tensorbrain as tb"
_LN2, _LN10 = math.log(2), math.log(10)


# ***** special functions NumPy does not have *****
def _special(name):
    """``cupyx.scipy.special.<name>`` for CuPy arrays (None on the CPU)."""
    import cupyx.scipy.special as sp  # type: ignore
    return getattr(sp, name)


_np_lgamma = np.frompyfunc(math.lgamma, 1, 1)
_np_erfc = np.frompyfunc(math.erfc, 1, 1)


def _erfc(xp, x):
    """``1 - erf(x)`` without its cancellation for large x (math.erfc per element)."""
    if xp is not np:
        return _special("erfc")(x)
    return _np_erfc(x).astype(x.dtype)


def _lgamma(xp, x):
    if xp is not np:
        return _special("gammaln")(x)
    return _np_lgamma(x).astype(x.dtype)


def _digamma(xp, x):
    if xp is not np:
        return _special("digamma")(x)
    x64 = np.asarray(x, dtype=np.float64)
    out = np.zeros_like(x64)
    reflect = x64 < 0.5   # psi(1 - x) - pi / tan(pi x): the reflection for small/negative x
    y = np.where(reflect, 1.0 - x64, x64)
    shift = np.zeros_like(y)
    while True:
        small = y < 10.0
        if not small.any():
            break
        shift -= np.where(small, 1.0 / y, 0.0)
        y = np.where(small, y + 1.0, y)
    inv2 = 1.0 / (y * y)
    series = (np.log(y) - 0.5 / y - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (
        1 / 252 - inv2 * (1 / 240 - inv2 / 132)))))
    out = series + shift
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(reflect, out - math.pi / np.tan(math.pi * x64), out)
        out = np.where((x64 <= 0) & (x64 == np.floor(x64)), np.nan, out)   # poles
    return out.astype(x.dtype)


def _trigamma(xp, x):
    if xp is not np:
        return _special("polygamma")(1, x)
    y = np.asarray(x, dtype=np.float64).copy()
    acc = np.zeros_like(y)
    while True:
        small = y < 10.0
        if not small.any():
            break
        acc += np.where(small, 1.0 / (y * y), 0.0)
        y = np.where(small, y + 1.0, y)
    inv = 1.0 / y
    inv2 = inv * inv
    series = inv + inv2 / 2 + inv * inv2 * (1 / 6 - inv2 * (1 / 30 - inv2 * (1 / 42 - inv2 / 30)))
    return (acc + series).astype(x.dtype)


def _erfinv(xp, x):
    if xp is not np:
        return _special("erfinv")(x)
    y = np.asarray(x, dtype=np.float64)
    w = -np.log((1.0 - y) * (1.0 + y))
    # Giles, "Approximating the erfinv function" (GPU Computing Gems), single precision
    small = w < 5.0
    ws, wl = w - 2.5, np.sqrt(np.maximum(w, 5.0)) - 3.0
    ps = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        ps = ps * ws + c
    pl = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        pl = pl * wl + c
    guess = np.where(small, ps, pl) * y
    # Newton on erf(g) = y, written as erfc(|g|) = 1 - |y| in the tails, where 1 - erf cancels
    sign, ay = np.sign(y), np.abs(y)
    for _ in range(3):
        g = np.abs(guess)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            slope = 2 / math.sqrt(math.pi) * np.exp(-g * g)
            resid = np.where(ay > 0.5, (1 - ay) - _erfc(np, g), E._erf(g) - ay)
            guess = sign * (g - resid / slope)
    guess = np.where(y == 1, np.inf, np.where(y == -1, -np.inf, guess))
    return guess.astype(x.dtype)


def _sinc(xp, x):
    px = math.pi * x
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(x == 0, xp.ones_like(x), xp.sin(px) / px).astype(x.dtype, copy=False)


def _dsinc(xp, x, out):
    px = math.pi * x
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(x == 0, xp.zeros_like(x), (xp.cos(px) - out) / x)


#: name -> (forward(xp, x), derivative(xp, x, out) or None, (example call, printed result)).
UNARY = {
    "acos": (lambda xp, x: xp.arccos(x), lambda xp, x, o: -1 / xp.sqrt(1 - x * x),
             ("tb.acos(tb.tensor([1.0])).tolist()", "[0.0]")),
    "asin": (lambda xp, x: xp.arcsin(x), lambda xp, x, o: 1 / xp.sqrt(1 - x * x),
             ("tb.asin(tb.tensor([0.0])).tolist()", "[0.0]")),
    "atan": (lambda xp, x: xp.arctan(x), lambda xp, x, o: 1 / (1 + x * x),
             ("tb.atan(tb.tensor([0.0])).tolist()", "[0.0]")),
    "acosh": (lambda xp, x: xp.arccosh(x), lambda xp, x, o: 1 / xp.sqrt(x * x - 1),
              ("tb.acosh(tb.tensor([1.0])).tolist()", "[0.0]")),
    "asinh": (lambda xp, x: xp.arcsinh(x), lambda xp, x, o: 1 / xp.sqrt(x * x + 1),
              ("tb.asinh(tb.tensor([0.0])).tolist()", "[0.0]")),
    "atanh": (lambda xp, x: xp.arctanh(x), lambda xp, x, o: 1 / (1 - x * x),
              ("tb.atanh(tb.tensor([0.0])).tolist()", "[0.0]")),
    "tan": (lambda xp, x: xp.tan(x), lambda xp, x, o: 1 + o * o,
            ("tb.tan(tb.tensor([0.0])).tolist()", "[0.0]")),
    "sinh": (lambda xp, x: xp.sinh(x), lambda xp, x, o: xp.cosh(x),
             ("tb.sinh(tb.tensor([0.0])).tolist()", "[0.0]")),
    "cosh": (lambda xp, x: xp.cosh(x), lambda xp, x, o: xp.sinh(x),
             ("tb.cosh(tb.tensor([0.0])).tolist()", "[1.0]")),
    "log2": (lambda xp, x: xp.log2(x), lambda xp, x, o: 1 / (x * _LN2),
             ("tb.log2(tb.tensor([8.0])).tolist()", "[3.0]")),
    "log10": (lambda xp, x: xp.log10(x), lambda xp, x, o: 1 / (x * _LN10),
              # rounded: float32 log10 of 100 is 2.0000002 with NumPy's AVX2 loops
              ("tb.log10(tb.tensor([100.0])).round(decimals=4).tolist()", "[2.0]")),
    "exp2": (lambda xp, x: xp.exp2(x), lambda xp, x, o: o * _LN2,
             ("tb.exp2(tb.tensor([3.0])).tolist()", "[8.0]")),
    "sinc": (_sinc, _dsinc, ("tb.sinc(tb.tensor([0.0, 1.0])).abs().tolist()[0]", "1.0")),
    "deg2rad": (lambda xp, x: x * (math.pi / 180), lambda xp, x, o: math.pi / 180,
                ("tb.deg2rad(tb.tensor([0.0])).tolist()", "[0.0]")),
    "rad2deg": (lambda xp, x: x * (180 / math.pi), lambda xp, x, o: 180 / math.pi,
                ("tb.rad2deg(tb.tensor([0.0])).tolist()", "[0.0]")),
    "erfc": (_erfc, lambda xp, x, o: -2 / math.sqrt(math.pi) * xp.exp(-x * x),
             ("tb.erfc(tb.tensor([0.0])).tolist()", "[1.0]")),
    "erfinv": (_erfinv, lambda xp, x, o: math.sqrt(math.pi) / 2 * xp.exp(o * o),
               ("tb.erfinv(tb.tensor([0.0])).tolist()", "[0.0]")),
    "lgamma": (_lgamma, lambda xp, x, o: _digamma(xp, x),
               ("tb.lgamma(tb.tensor([1.0, 2.0])).tolist()", "[0.0, 0.0]")),
    "digamma": (_digamma, lambda xp, x, o: _trigamma(xp, x),
                ("[round(v, 4) for v in tb.digamma(tb.tensor([1.0, 2.0])).tolist()]",
                 "[-0.5772, 0.4228]")),
    "frac": (lambda xp, x: x - xp.trunc(x), lambda xp, x, o: 1,
             ("tb.frac(tb.tensor([1.5, -2.25])).tolist()", "[0.5, -0.25]")),
    "negative": (lambda xp, x: -x, lambda xp, x, o: -1,
                 ("tb.negative(tb.tensor([1.0])).tolist()", "[-1.0]")),
    "positive": (lambda xp, x: x, lambda xp, x, o: 1,
                 ("tb.positive(tb.tensor([1.0])).tolist()", "[1.0]")),
    "sgn": (lambda xp, x: xp.sign(x), None, ("tb.sgn(tb.tensor([-2.0, 0.0, 3.0])).tolist()",
                                             "[-1.0, 0.0, 1.0]")),
    "fix": (lambda xp, x: xp.trunc(x), None, ("tb.fix(tb.tensor([-1.5, 1.5])).tolist()",
                                              "[-1.0, 1.0]")),
    "signbit": (lambda xp, x: xp.signbit(x), None,
                ("tb.signbit(tb.tensor([-1.0, 0.0])).tolist()", "[True, False]")),
    "isposinf": (lambda xp, x: xp.isposinf(x), None,
                 ("tb.isposinf(tb.tensor([float('inf'), 1.0])).tolist()", "[True, False]")),
    "isneginf": (lambda xp, x: xp.isneginf(x), None,
                 ("tb.isneginf(tb.tensor([float('-inf'), 1.0])).tolist()", "[True, False]")),
    "isreal": (lambda xp, x: xp.isreal(x), None,
               ("tb.isreal(tb.tensor([1.0])).tolist()", "[True]")),
    "bitwise_not": (lambda xp, x: ~x, None,
                    ("tb.bitwise_not(tb.tensor([0, 5])).tolist()", "[-1, -6]")),
}

#: The UNARY ops that give a float for an integer input (the rest keep the input's dtype).
_FLOAT_RESULT = set(UNARY) - {"negative", "positive", "sgn", "fix", "signbit", "isposinf",
                              "isneginf", "isreal", "bitwise_not", "frac"}


def _unary(name, forward, derivative):
    def op(a):
        x = a._data
        if name in _FLOAT_RESULT and x.dtype.kind in "biu":
            x = x.astype(get_default_dtype())
        xp = get_array_module(x)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            out = forward(xp, x)
        if getattr(out, "dtype", None) is not None and out.dtype.kind == "f" and \
                x.dtype.kind in "fV" and out.dtype != x.dtype:
            out = out.astype(x.dtype)
        if derivative is None:
            return make(xp.asarray(out), (), None, name)

        def backward(g):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return ((g * derivative(xp, x, out)).astype(g.dtype, copy=False),)
        return make(out, (a,), backward, name.capitalize() + "Backward", (a,))
    op.__name__ = op.__qualname__ = name
    return op


def _unary_doc(name, example):
    call, result = example
    return (f"Elementwise ``{name}``, as ``torch.{name}`` (with its gradient where torch has "
            f"one; an integer input gives the default float dtype where the result is not an "
            f"integer).\n\nArgs:\n    a: the input tensor.\n\nReturns:\n    Tensor: a tensor "
            f"of ``a``'s shape.\n\nExample:\n    {_IMPORT}\n    >>> {call}\n    {result}\n")


for _name, (_fwd, _der, _ex) in UNARY.items():
    globals()[_name] = _unary(_name, _fwd, _der)
    globals()[_name].__doc__ = _unary_doc(_name, _ex)


def logit(a, eps=None):
    """``log(a / (1 - a))``, as ``torch.logit``; with ``eps``, ``a`` is first clamped to
    ``[eps, 1 - eps]`` (and the gradient is 0 outside it, as torch's).

    Args:
        a: the input tensor (probabilities).
        eps: the clamp, or None.

    Returns:
        Tensor: a tensor of ``a``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.logit(tb.tensor([0.5])).tolist()
        [0.0]
    """
    x = a._data
    if x.dtype.kind in "biu":
        x = x.astype(get_default_dtype())
    xp = get_array_module(x)
    z = x if eps is None else xp.clip(x, eps, 1 - eps)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = xp.log(z / (1 - z)).astype(x.dtype, copy=False)

    def backward(g):
        with np.errstate(divide="ignore", invalid="ignore"):
            d = g / (z * (1 - z))
        if eps is not None:
            d = xp.where((x < eps) | (x > 1 - eps), 0, d)
        return (d.astype(g.dtype, copy=False),)
    return make(out, (a,), backward, "LogitBackward", (a,))


def mvlgamma(a, p):
    """The multivariate log-gamma of dimension ``p``, as ``torch.mvlgamma``:
    ``p (p - 1) / 4 * log(pi) + sum_j lgamma(a - j / 2)``, j = 0 .. p-1.

    Args:
        a: the input tensor (every element > (p - 1) / 2).
        p: the dimension.

    Returns:
        Tensor: ``a``'s shape.

    Raises:
        RuntimeError: an element at or below ``(p - 1) / 2``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.mvlgamma(tb.tensor([1.0, 2.0]), 1).tolist()
        [0.0, 0.0]
    """
    if (a._data <= (p - 1) / 2).any():
        raise RuntimeError(f"All elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    out = E.add(lgamma(a), p * (p - 1) / 4 * math.log(math.pi))   # noqa: F821  (made above)
    for j in range(1, p):
        out = E.add(out, lgamma(E.sub(a, j / 2)))   # noqa: F821
    return out


def hardshrink(a, lambd=0.5):
    """``a`` where ``|a| > lambd``, else 0, as ``torch.nn.functional.hardshrink``.

    Args:
        a: the input tensor.
        lambd: the threshold.

    Returns:
        Tensor: a tensor of ``a``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.hardshrink(tb.tensor([-1.0, 0.2, 0.7])).tolist()
        [-1.0, 0.0, 0.699999988079071]
    """
    x = a._data
    keep = get_array_module(x).abs(x) > lambd
    return make(x * keep, (a,), lambda g: (g * keep,), "HardshrinkBackward")


# ***** binary *****
def _floor_div(xp, a, b):
    return xp.floor_divide(a, b)


#: name -> (forward(xp, a, b), grad_a(xp, a, b, out), grad_b(xp, a, b, out), example).
BINARY = {
    "atan2": (lambda xp, a, b: xp.arctan2(a, b), lambda xp, a, b, o: b / (a * a + b * b),
              lambda xp, a, b, o: -a / (a * a + b * b),
              ("tb.atan2(tb.tensor([0.0]), tb.tensor([1.0])).tolist()", "[0.0]")),
    "hypot": (lambda xp, a, b: xp.hypot(a, b), lambda xp, a, b, o: a / o,
              lambda xp, a, b, o: b / o,
              ("tb.hypot(tb.tensor([3.0]), tb.tensor([4.0])).tolist()", "[5.0]")),
    "fmod": (lambda xp, a, b: xp.fmod(a, b), lambda xp, a, b, o: 1,
             lambda xp, a, b, o: -xp.trunc(a / b),
             ("tb.fmod(tb.tensor([-3.0, 3.0]), 2).tolist()", "[-1.0, 1.0]")),
    "remainder": (lambda xp, a, b: xp.remainder(a, b), lambda xp, a, b, o: 1,
                  lambda xp, a, b, o: -xp.floor(a / b),
                  ("tb.remainder(tb.tensor([-3.0, 3.0]), 2).tolist()", "[1.0, 1.0]")),
    "floor_divide": (_floor_div, None, None,
                     ("tb.floor_divide(tb.tensor([-3.0, 3.0]), 2).tolist()", "[-2.0, 1.0]")),
    "copysign": (lambda xp, a, b: xp.copysign(a, b),
                 lambda xp, a, b, o: xp.where(a == 0, 0, o / xp.where(a == 0, 1, a)), None,
                 ("tb.copysign(tb.tensor([1.0, 2.0]), -1.0).tolist()", "[-1.0, -2.0]")),
    "xlogy": (lambda xp, a, b: xp.where(a == 0, 0, a * xp.log(b)),
              lambda xp, a, b, o: xp.where(a == 0, 0, xp.log(b)),
              lambda xp, a, b, o: xp.where(a == 0, 0, a / b),
              ("tb.xlogy(tb.tensor([0.0, 2.0]), tb.tensor([0.0, 1.0])).tolist()", "[0.0, 0.0]")),
    "logaddexp": (lambda xp, a, b: xp.logaddexp(a, b), lambda xp, a, b, o: xp.exp(a - o),
                  lambda xp, a, b, o: xp.exp(b - o),
                  ("tb.logaddexp(tb.tensor([0.0]), tb.tensor([0.0])).tolist()[0] > 0.69",
                   "True")),
    "logaddexp2": (lambda xp, a, b: xp.logaddexp2(a, b), lambda xp, a, b, o: xp.exp2(a - o),
                   lambda xp, a, b, o: xp.exp2(b - o),
                   ("tb.logaddexp2(tb.tensor([1.0]), tb.tensor([1.0])).tolist()", "[2.0]")),
    "float_power": (lambda xp, a, b: xp.power(xp.asarray(a, dtype=np.float64), b),
                    lambda xp, a, b, o: b * xp.power(xp.asarray(a, dtype=np.float64), b - 1),
                    lambda xp, a, b, o: o * xp.log(xp.where(a > 0, a, 1)),
                    ("tb.float_power(tb.tensor([2.0]), 3).dtype", "dtype('float64')")),
    "fmax": (lambda xp, a, b: xp.fmax(a, b), lambda xp, a, b, o: (a >= b) | xp.isnan(b),
             lambda xp, a, b, o: (b > a) | xp.isnan(a),
             ("tb.fmax(tb.tensor([1.0, float('nan')]), tb.tensor([2.0, 3.0])).tolist()",
              "[2.0, 3.0]")),
    "fmin": (lambda xp, a, b: xp.fmin(a, b), lambda xp, a, b, o: (a <= b) | xp.isnan(b),
             lambda xp, a, b, o: (b < a) | xp.isnan(a),
             ("tb.fmin(tb.tensor([1.0, float('nan')]), tb.tensor([2.0, 3.0])).tolist()",
              "[1.0, 3.0]")),
    "ldexp": (lambda xp, a, b: a * xp.exp2(b), lambda xp, a, b, o: xp.exp2(b),
              lambda xp, a, b, o: o * _LN2,
              ("tb.ldexp(tb.tensor([1.5]), tb.tensor([2])).tolist()", "[6.0]")),
    "nextafter": (lambda xp, a, b: xp.nextafter(a, b), None, None,
                  ("(tb.nextafter(tb.tensor([1.0]), tb.tensor([2.0])) > 1).tolist()",
                   "[True]")),
    "heaviside": (lambda xp, a, b: xp.heaviside(a, b), None, None,
                  ("tb.heaviside(tb.tensor([-1.0, 0.0, 2.0]), tb.tensor(0.5)).tolist()",
                   "[0.0, 0.5, 1.0]")),
    "gcd": (lambda xp, a, b: xp.gcd(a, b), None, None,
            ("tb.gcd(tb.tensor([12, 9]), tb.tensor([8, 6])).tolist()", "[4, 3]")),
    "lcm": (lambda xp, a, b: xp.lcm(a, b), None, None,
            ("tb.lcm(tb.tensor([4, 3]), tb.tensor([6, 5])).tolist()", "[12, 15]")),
    "bitwise_and": (lambda xp, a, b: xp.bitwise_and(a, b), None, None,
                    ("tb.bitwise_and(tb.tensor([12]), tb.tensor([10])).tolist()", "[8]")),
    "bitwise_or": (lambda xp, a, b: xp.bitwise_or(a, b), None, None,
                   ("tb.bitwise_or(tb.tensor([12]), tb.tensor([10])).tolist()", "[14]")),
    "bitwise_xor": (lambda xp, a, b: xp.bitwise_xor(a, b), None, None,
                    ("tb.bitwise_xor(tb.tensor([12]), tb.tensor([10])).tolist()", "[6]")),
    "bitwise_left_shift": (lambda xp, a, b: xp.left_shift(a, b), None, None,
                           ("tb.bitwise_left_shift(tb.tensor([1]), 3).tolist()", "[8]")),
    "bitwise_right_shift": (lambda xp, a, b: xp.right_shift(a, b), None, None,
                            ("tb.bitwise_right_shift(tb.tensor([8]), 3).tolist()", "[1]")),
}

#: The BINARY ops whose integer operands are computed in the default float dtype.
_FLOAT_BINARY = {"atan2", "hypot", "logaddexp", "logaddexp2", "xlogy", "ldexp"}


def _binary_op(name, forward, grad_a, grad_b):
    def xp_of(a, b):
        return get_array_module(a._data if isinstance(a, Tensor) else b._data)

    def op(a, b):
        if name in _FLOAT_BINARY:
            a, b = (Tensor._wrap(t._data.astype(get_default_dtype()))
                    if isinstance(t, Tensor) and t._data.dtype.kind in "biu" else t
                    for t in (a, b))
        xp = xp_of(a, b)

        def fwd(x, y):
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                return forward(xp, x, y)

        def grad(fn, operand):
            if fn is None:   # a zero gradient (copysign's sign operand), as torch's
                return lambda g, x, y, o: xp.zeros_like(g)

            def g_(g, x, y, o):
                with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                    d = g * fn(xp, x, y, o)
                like = (x, y)[operand]   # the operand's dtype (float_power computes in float64)
                dt = getattr(like, "dtype", g.dtype)
                return d.astype(dt if dt.kind in "fcV" else g.dtype, copy=False)
            return g_
        out = E._binary(name.capitalize() + "Backward", a, b, fwd, grad(grad_a, 0),
                        grad(grad_b, 1), True, True)
        if grad_a is None and grad_b is None:   # integer-valued: no graph, as torch
            out.grad_fn, out.requires_grad = None, False
        return out
    op.__name__ = op.__qualname__ = name
    return op


def _binary_doc(name, example):
    call, result = example
    return (f"Elementwise ``{name}`` of ``a`` and ``b``, as ``torch.{name}``: broadcast, "
            f"torch's type promotion, and its gradient where torch has one.\n\nArgs:\n"
            f"    a: a tensor (or a number, when ``b`` is a tensor).\n    b: a tensor or a "
            f"number.\n\nReturns:\n    Tensor: the broadcast shape.\n\nExample:\n"
            f"    {_IMPORT}\n    >>> {call}\n    {result}\n")


for _name, (_bfwd, _ga, _gb, _bex) in BINARY.items():
    globals()[_name] = _binary_op(_name, _bfwd, _ga, _gb)
    globals()[_name].__doc__ = _binary_doc(_name, _bex)
del _name, _fwd, _ex
