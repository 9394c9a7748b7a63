"""The in-place random fills of torch's Tensor that ``_tensor_base`` does not write out:
``random_``, ``exponential_``, ``geometric_``, ``log_normal_``, ``cauchy_``.

Each method is an ordinary definition that names its draw (from the same NumPy generator as
``tb.rand``, or the ``generator=`` passed; the draw checks its arguments) and hands it to
:meth:`RandomFills._fill`.
The draws follow torch's distributions and argument rules (``exponential_(lambd)`` needs
``lambd > 0``, ``geometric_(p)`` counts trials from 1); a seed does not give torch's numbers.
A base class of ``tensorbrain.tensor.Tensor``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import _random
from .autograd import grad_mode

_FLOAT_RANGE = {np.dtype(np.float16): 2 ** 11, np.dtype(np.float32): 2 ** 24,
                np.dtype(np.float64): 2 ** 53}


def _top(dtype):
    """One above the largest value ``random_()`` draws: ``2**mantissa + 1`` for floats (every
    integer up to it is exact), the dtype's max + 1 for integers, 2 for bool."""
    if dtype == np.bool_:
        return 2
    if dtype.kind in "fV":   # V: bfloat16
        return _FLOAT_RANGE.get(dtype, 2 ** 8) + 1
    return int(np.iinfo(dtype).max) + 1


def _draw_random(rng, shape, dtype, *args, frm=None, to=None):
    if len(args) == 1 and frm is None and to is None:
        lo, hi = 0, int(args[0])                      # random_(to)
    else:
        args = args + (None,) * (2 - len(args))
        frm = args[0] if frm is None else frm
        to = args[1] if to is None else to
        lo = 0 if frm is None else int(frm)
        hi = _top(dtype) if to is None else int(to)   # random_(from, None): up to the max
    if lo >= hi:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={lo} >= "
                           f"to={hi}")
    return rng.integers(lo, hi, size=shape, dtype=np.int64 if hi <= 2 ** 63 else np.uint64)


def _positive(name, what, value):
    if not value > 0:
        raise RuntimeError(f"{name} expects {what} > 0.0, but found {what}={value}")


def _draw_exponential(rng, shape, dtype, lambd=1.0):
    _positive("exponential_", "lambda", lambd)
    return rng.exponential(1.0 / lambd, size=shape)


def _draw_geometric(rng, shape, dtype, p):
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return rng.geometric(p, size=shape)


def _draw_log_normal(rng, shape, dtype, mean=1.0, std=2.0):
    _positive("log_normal_", "std", std)
    return rng.lognormal(mean, std, size=shape)


def _draw_cauchy(rng, shape, dtype, median=0.0, sigma=1.0):
    _positive("cauchy_", "sigma", sigma)
    return median + sigma * np.tan(math.pi * (rng.random(size=shape) - 0.5))


class RandomFills:
    """The in-place random fills (see the module docstring).

    Requires, from ``TensorBase``: ``_data``, ``_version``, ``_check_inplace(name)``.
    """

    __slots__ = ()
    _data: Any
    _version: list
    _check_inplace: Any

    def _fill(self, name: str, draw, floats_only: bool, generator, params, kwargs):
        """Fill this tensor in place with ``draw(rng, shape, dtype, *params, **kwargs)``."""
        if "from" in kwargs:   # torch's keyword is a Python keyword: random_(from=1, to=5)
            kwargs["frm"] = kwargs.pop("from")
        x = self._data
        if floats_only and x.dtype.kind not in "fV":
            raise RuntimeError(f"{name} expects a floating point tensor, got dtype {x.dtype}")
        self._check_inplace(name)
        values = draw(_random._rng(generator), x.shape, x.dtype, *params, **kwargs)
        with grad_mode.no_grad():
            x[...] = _random._place(np.asarray(values).astype(x.dtype), x)
        self._version[0] += 1
        return self

    def random_(self, *params, generator=None, **kwargs):
        """Fill with integers drawn uniformly from ``[from, to - 1]``: ``random_()`` covers
        ``[0, 2**mantissa]`` for floats (every integer there is exact) and ``[0, max]`` for integer
        dtypes; ``random_(to)`` is ``[0, to - 1]``. In place, as ``torch.Tensor.random_``.

        Args:
            *params: from, to, positional or by keyword.
            from: the lowest value (or ``to`` when it is the only argument).
            to: one above the highest value; None for the dtype's range.
            generator: a ``tb.Generator``; None for the default one.
            **kwargs: the parameters by name.

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: a parameter out of its range.
        """
        return self._fill("random_", _draw_random, False, generator, params, kwargs)

    def exponential_(self, *params, generator=None, **kwargs):
        """Fill with draws of the exponential distribution ``lambd * exp(-lambd * x)``. In place, as ``torch.Tensor.exponential_``.

        Args:
            *params: lambd, positional or by keyword.
            lambd: the rate (> 0).
            generator: a ``tb.Generator``; None for the default one.
            **kwargs: the parameters by name.

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: a parameter out of its range, or an integer tensor.
        """
        return self._fill("exponential_", _draw_exponential, True, generator, params, kwargs)

    def geometric_(self, *params, generator=None, **kwargs):
        """Fill with draws of the geometric distribution: the number of Bernoulli(p) trials
        up to and including the first success (1, 2, ...). In place, as ``torch.Tensor.geometric_``.

        Args:
            *params: p, positional or by keyword.
            p: the success probability, in (0, 1).
            generator: a ``tb.Generator``; None for the default one.
            **kwargs: the parameters by name.

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: a parameter out of its range.
        """
        return self._fill("geometric_", _draw_geometric, False, generator, params, kwargs)

    def log_normal_(self, *params, generator=None, **kwargs):
        """Fill with ``exp(x)`` for ``x`` drawn from ``Normal(mean, std)``. In place, as ``torch.Tensor.log_normal_``.

        Args:
            *params: mean, std, positional or by keyword.
            mean: the mean of the underlying normal.
            std: its standard deviation (> 0).
            generator: a ``tb.Generator``; None for the default one.
            **kwargs: the parameters by name.

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: a parameter out of its range, or an integer tensor.
        """
        return self._fill("log_normal_", _draw_log_normal, True, generator, params, kwargs)

    def cauchy_(self, *params, generator=None, **kwargs):
        """Fill with draws of the Cauchy distribution
        ``1 / (pi * sigma * (1 + ((x - median) / sigma)**2))``. In place, as ``torch.Tensor.cauchy_``.

        Args:
            *params: median, sigma, positional or by keyword.
            median: the location.
            sigma: the scale (> 0).
            generator: a ``tb.Generator``; None for the default one.
            **kwargs: the parameters by name.

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: a parameter out of its range, or an integer tensor.
        """
        return self._fill("cauchy_", _draw_cauchy, True, generator, params, kwargs)


__all__ = ["RandomFills"]
