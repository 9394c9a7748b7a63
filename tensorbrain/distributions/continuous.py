"""``Uniform``, ``Exponential``, ``Laplace`` and ``Gumbel`` (``torch.distributions``), each
reparameterised (``rsample`` gives gradients to the parameters), with torch's ``log_prob``,
``cdf``, ``icdf``, ``entropy``, ``mean``, ``variance`` and argument checks. Sampling uses
TensorBrain's generator (``tb.manual_seed``): the same distribution, not torch's numbers.
"""
from __future__ import annotations

import math

import numpy as np

from .._factories import rand
from ..tensor import Tensor
from .distribution import Distribution, as_param, check, host

_EULER = 0.57721566490153286061


class _Reparam(Distribution):
    """A location/scale family sampled as ``icdf(u)``, ``u ~ Uniform(0, 1)``."""

    has_rsample = True
    _params: tuple = ()

    def _setup(self, validate_args, **params):
        like = next((p for p in params.values() if isinstance(p, Tensor)), None)
        values = {k: as_param(v, like) for k, v in params.items()}
        shape = np.broadcast_shapes(*(tuple(v.shape) for v in values.values()))
        for k, v in values.items():
            setattr(self, k, v.expand(*shape))
        Distribution.__init__(self, shape, (), validate_args)
        return values

    def _uniform(self, sample_shape, low=1e-12, high=1 - 1e-7):
        shape = tuple(self._extended_shape(sample_shape))
        first = getattr(self, self._params[0])
        u = rand(*shape, dtype=first.dtype, device=first.device)
        return u.clamp(low, high)

    def rsample(self, sample_shape=()):
        """A reparameterised sample ``icdf(u)``: gradients flow to the parameters.

        Args:
            sample_shape: the leading shape of the sample.

        Returns:
            Tensor: the sample.
        """
        return self.icdf(self._uniform(sample_shape))


class Uniform(_Reparam):
    """The uniform distribution on ``[low, high)``.

    Args:
        low: the lower bound.
        high: the upper bound (> low).
        validate_args: check the arguments; None means yes.

    Example:
        >>> import tensorbrain as tb
        >>> tb.distributions.Uniform(0.0, 4.0).log_prob(tb.tensor(1.0)).exp().item()
        0.25
    """

    _params = ("low", "high")

    def __init__(self, low, high, validate_args=None):
        self._setup(validate_args, low=low, high=high)
        if self._validate_args:
            check(bool(np.all(host(self.low) < host(self.high))), "Uniform",
                  "parameters low < high")

    @property
    def mean(self):
        """``(low + high) / 2``."""
        return (self.low + self.high) / 2

    @property
    def mode(self):
        """NaN: every point is a mode."""
        return self.low * float("nan")

    @property
    def variance(self):
        """``(high - low)**2 / 12``."""
        return (self.high - self.low) ** 2 / 12

    def log_prob(self, value):
        """``-log(high - low)`` inside the support, ``-inf`` outside.

        Args:
            value: the points.
        """
        inside = (value >= self.low) & (value < self.high)
        return (-(self.high - self.low).log()).masked_fill(~inside, float("-inf"))

    def cdf(self, value):
        """``(value - low) / (high - low)``, clamped to [0, 1].

        Args:
            value: the points.
        """
        return ((value - self.low) / (self.high - self.low)).clamp(0, 1)

    def icdf(self, value):
        """``low + value * (high - low)``.

        Args:
            value: probabilities.
        """
        return self.low + value * (self.high - self.low)

    def entropy(self):
        """``log(high - low)``."""
        return (self.high - self.low).log()


class Exponential(_Reparam):
    """The exponential distribution with ``rate``.

    Args:
        rate: the rate (> 0).
        validate_args: check the arguments.

    Example:
        >>> import tensorbrain as tb
        >>> tb.distributions.Exponential(2.0).mean.item()
        0.5
    """

    _params = ("rate",)

    def __init__(self, rate, validate_args=None):
        self._setup(validate_args, rate=rate)
        if self._validate_args:
            check(bool(np.all(host(self.rate) > 0)), "Exponential", "parameter rate (> 0)")

    @property
    def mean(self):
        """``1 / rate``."""
        return self.rate.reciprocal()

    @property
    def mode(self):
        """0."""
        return self.rate * 0

    @property
    def variance(self):
        """``1 / rate**2``."""
        return self.rate.pow(-2)

    def log_prob(self, value):
        """``log(rate) - rate * value`` (for value >= 0).

        Args:
            value: the points.
        """
        return self.rate.log() - self.rate * value

    def cdf(self, value):
        """``1 - exp(-rate * value)``.

        Args:
            value: the points.
        """
        return 1 - (-self.rate * value).exp()

    def icdf(self, value):
        """``-log(1 - value) / rate``.

        Args:
            value: probabilities.
        """
        return -(1 - value).log() / self.rate

    def entropy(self):
        """``1 - log(rate)``."""
        return 1.0 - self.rate.log()


class Laplace(_Reparam):
    """The Laplace distribution with ``loc`` and ``scale``.

    Args:
        loc: the location.
        scale: the scale (> 0).
        validate_args: check the arguments.

    Example:
        >>> import tensorbrain as tb
        >>> tb.distributions.Laplace(0.0, 1.0).cdf(tb.tensor(0.0)).item()
        0.5
    """

    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._setup(validate_args, loc=loc, scale=scale)
        if self._validate_args:
            check(bool(np.all(host(self.scale) > 0)), "Laplace", "parameter scale (> 0)")

    @property
    def mean(self):
        """``loc``."""
        return self.loc

    @property
    def mode(self):
        """``loc``."""
        return self.loc

    @property
    def variance(self):
        """``2 scale**2``."""
        return 2 * self.scale.pow(2)

    def log_prob(self, value):
        """``-log(2 scale) - |value - loc| / scale``.

        Args:
            value: the points.
        """
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        """``0.5 - 0.5 sign(d) expm1(-|d| / scale)``, ``d = value - loc``.

        Args:
            value: the points.
        """
        d = value - self.loc
        return 0.5 - 0.5 * d.sign() * (-d.abs() / self.scale).expm1()

    def icdf(self, value):
        """``loc - scale * sign(t) * log1p(-2 |t|)``, ``t = value - 0.5``.

        Args:
            value: probabilities.
        """
        t = value - 0.5
        return self.loc - self.scale * t.sign() * (-2 * t.abs()).log1p()

    def entropy(self):
        """``1 + log(2 scale)``."""
        return 1 + (2 * self.scale).log()


class Gumbel(_Reparam):
    """The Gumbel distribution with ``loc`` and ``scale``.

    Args:
        loc: the location.
        scale: the scale (> 0).
        validate_args: check the arguments.

    Example:
        >>> import tensorbrain as tb
        >>> round(tb.distributions.Gumbel(0.0, 1.0).mean.item(), 4)
        0.5772
    """

    _params = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self._setup(validate_args, loc=loc, scale=scale)
        if self._validate_args:
            check(bool(np.all(host(self.scale) > 0)), "Gumbel", "parameter scale (> 0)")

    @property
    def mean(self):
        """``loc + scale * euler_gamma``."""
        return self.loc + self.scale * _EULER

    @property
    def mode(self):
        """``loc``."""
        return self.loc

    @property
    def variance(self):
        """``(pi scale)**2 / 6``."""
        return (math.pi * self.scale).pow(2) / 6

    def log_prob(self, value):
        """``-(z + exp(-z)) - log(scale)``, ``z = (value - loc) / scale``.

        Args:
            value: the points.
        """
        z = (value - self.loc) / self.scale
        return -(z + (-z).exp()) - self.scale.log()

    def cdf(self, value):
        """``exp(-exp(-z))``.

        Args:
            value: the points.
        """
        return (-(-(value - self.loc) / self.scale).exp()).exp()

    def icdf(self, value):
        """``loc - scale * log(-log(value))``.

        Args:
            value: probabilities.
        """
        return self.loc - self.scale * (-value.log()).log()

    def entropy(self):
        """``log(scale) + 1 + euler_gamma``."""
        return self.scale.log() + (1 + _EULER)


__all__ = ["Exponential", "Gumbel", "Laplace", "Uniform"]
