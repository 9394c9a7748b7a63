"""``tb.special`` (``torch.special``): the special functions, by torch's names here, most of
them the elementwise ops under another name (``expit`` is ``sigmoid``, ``gammaln`` is
``lgamma``, ``psi`` is ``digamma``...), with their gradients; ``ndtr``, ``ndtri``,
``log_ndtr``, ``xlog1py``, ``entr``, ``polygamma`` (orders 0 and 1), ``i0``/``i0e``/``i1``/
``i1e`` are written here. The orthogonal polynomials, Bessel J/Y/K, Airy and zeta functions are
missing.

>>> import tensorbrain as tb
>>> tb.special.expit(tb.tensor([0.0])).tolist(), tb.special.ndtr(tb.tensor([0.0])).tolist()
([0.5], [0.5])
"""
from __future__ import annotations

import math

import numpy as np

from ._ops import elementwise as E
from ._ops import pointwise as P
from ._ops import reduce as R
from ._ops import softmax as SM
from ._ops.core import make
from ._tensor_base import TensorBase as Tensor
from ._xp import get_array_module

erf, erfc, erfinv, expm1, log1p, exp2 = E.erf, P.erfc, P.erfinv, E.expm1, E.log1p, P.exp2
expit, logit, sinc, round, xlogy = E.sigmoid, P.logit, P.sinc, E.round, P.xlogy  # noqa: A001
gammaln, digamma, psi, multigammaln = P.lgamma, P.digamma, P.digamma, P.mvlgamma
logsumexp = R.logsumexp
_SQRT2 = math.sqrt(2.0)


def softmax(input, dim, *, dtype=None):
    """``tb.softmax`` (torch.special's spelling).

    Args:
        input: the tensor.
        dim: the dimension.
        dtype: cast to it first.
    """
    return SM.softmax(input, dim, dtype)


def log_softmax(input, dim, *, dtype=None):
    """``tb.log_softmax`` (torch.special's spelling).

    Args:
        input: the tensor.
        dim: the dimension.
        dtype: cast to it first.
    """
    return SM.log_softmax(input, dim, dtype)


def ndtr(input):
    """The standard normal CDF, ``0.5 * erfc(-x / sqrt(2))``.

    Args:
        input: the tensor.
    """
    return E.mul(P.erfc(E.div(E.neg(input), _SQRT2)), 0.5)


def ndtri(input):
    """The inverse of :func:`ndtr`, ``sqrt(2) * erfinv(2 p - 1)``.

    Args:
        input: probabilities.
    """
    return E.mul(P.erfinv(E.sub(E.mul(input, 2.0), 1.0)), _SQRT2)


def log_ndtr(input):
    """``log(ndtr(x))``, by ``log(erfc)`` (accurate for negative x to about -30 in float64).

    Args:
        input: the tensor.
    """
    return E.log(ndtr(input))


def xlog1py(input, other):
    """``input * log1p(other)``, 0 where ``input`` is 0.

    Args:
        input: the factor.
        other: the argument of log1p.
    """
    return E.where(E.eq_(input, 0), 0.0, E.mul(input, E.log1p(other)))


def entr(input):
    """The elementwise entropy ``-x log x`` (0 at 0, -inf below 0).

    Args:
        input: the tensor.
    """
    x = input
    val = E.neg(P.xlogy(x, x))
    return E.where(E.lt_(x, 0), float("-inf"), val)


def polygamma(n, input):
    """The ``n``-th derivative of digamma, for n = 0 (digamma) and 1 (trigamma).

    Args:
        n: the order (0 or 1).
        input: the tensor.

    Raises:
        NotImplementedError: n >= 2.
    """
    if n == 0:
        return P.digamma(input)
    if n != 1:
        raise NotImplementedError(f"special.polygamma(n={n}): TensorBrain has orders 0 and 1")
    x = input._data
    return make(P._trigamma(get_array_module(x), x), (input,), None, "PolygammaBackward")


def _bessel(name, fn, scaled):
    def op(input):
        x = input._data.astype(np.float64) if input._data.dtype.kind in "biu" else input._data
        xp = get_array_module(x)
        if xp is not np:
            import cupyx.scipy.special as sp  # type: ignore
            return Tensor._wrap(getattr(sp, name)(x))
        out = fn(np.asarray(x, dtype=np.float64))
        if scaled:
            out = out * np.exp(-np.abs(x))
        return Tensor._wrap(out.astype(x.dtype if x.dtype.kind == "f" else np.float32))
    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"The modified Bessel function ``{name}`` (no gradient), as "
                  f"``torch.special.{name}``.\n\nArgs:\n    input: the tensor.\n")
    return op


def _i1(x):
    """I1 by its power series (|x| < 40: all terms positive, so float64 keeps its precision)
    and Hankel's asymptotic expansion beyond."""
    ax = np.abs(x)
    small = ax < 40
    xs = np.where(small, x, 0.0)
    term = xs / 2
    total = term.copy()
    for k in range(1, 120):
        term = term * (xs / 2) ** 2 / (k * (k + 1))
        total = total + term
    big = np.where(small, 1.0, ax)
    series, coef = np.ones_like(big), np.ones_like(big)
    for k in range(1, 12):   # sum_k (-1)^k prod_j (4 - (2j - 1)^2) / (k! (8x)^k)
        coef = coef * -(4 - (2 * k - 1) ** 2) / (k * 8 * big)
        series = series + coef
    asym = np.exp(big) / np.sqrt(2 * np.pi * big) * series
    return np.where(small, total, np.sign(x) * asym)


i0 = _bessel("i0", np.i0, False)
i0e = _bessel("i0e", np.i0, True)
i1 = _bessel("i1", _i1, False)
i1e = _bessel("i1e", _i1, True)

__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "exp2", "expit", "expm1", "gammaln",
           "i0", "i0e", "i1", "i1e", "log1p", "log_ndtr", "log_softmax", "logit", "logsumexp",
           "multigammaln", "ndtr", "ndtri", "polygamma", "psi", "round", "sinc", "softmax",
           "xlog1py", "xlogy"]
