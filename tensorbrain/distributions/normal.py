"""``Normal``: the Gaussian with a location and a scale."""
from __future__ import annotations

import math

import numpy as np

from .._sampling import normal
from ..autograd import grad_mode
from ..tensor import Tensor
from .distribution import Distribution, as_param, check, host


class Normal(Distribution):
    """The normal distribution ``N(loc, scale**2)`` (``torch.distributions.Normal``).

    ``loc`` and ``scale`` broadcast against each other; the broadcast shape is the batch shape.

    Args:
        loc: the mean (a tensor or a number).
        scale: the standard deviation, > 0 (a tensor or a number).
        validate_args: check the arguments; None means yes.

    Raises:
        ValueError: (validating) a scale that is not positive, or a NaN location.

    Example:
        >>> import tensorbrain as tb
        >>> m = tb.distributions.Normal(tb.tensor([0.0]), tb.tensor([1.0]))
        >>> round(m.log_prob(tb.tensor([0.0])).item(), 4)  # -log(sqrt(2 pi))
        -0.9189
    """

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        like = loc if isinstance(loc, Tensor) else scale if isinstance(scale, Tensor) else None
        loc, scale = as_param(loc, like), as_param(scale, like)
        shape = np.broadcast_shapes(tuple(loc.shape), tuple(scale.shape))
        self.loc, self.scale = loc.expand(*shape), scale.expand(*shape)
        super().__init__(shape, (), validate_args)
        if self._validate_args:
            check(bool(np.all(host(scale) > 0)), "Normal", "parameter scale (> 0)")
            check(not np.any(np.isnan(host(loc))), "Normal", "parameter loc (a real number)")

    @property
    def mean(self):
        """The mean, ``loc``."""
        return self.loc

    @property
    def mode(self):
        """The mode, ``loc``."""
        return self.loc

    @property
    def stddev(self):
        """The standard deviation, ``scale``."""
        return self.scale

    @property
    def variance(self):
        """The variance, ``scale ** 2``."""
        return self.scale.pow(2)

    def sample(self, sample_shape=()):
        """Draw without gradient; shape ``sample_shape + batch_shape``.

        Args:
            sample_shape: the leading shape of the sample.

        Returns:
            Tensor: the sample.
        """
        shape = tuple(self._extended_shape(sample_shape))
        with grad_mode.no_grad():
            return normal(self.loc.expand(*shape), self.scale.expand(*shape))

    def rsample(self, sample_shape=()):
        """Draw ``loc + eps * scale`` with ``eps ~ N(0, 1)``: gradients flow to loc and scale.

        Args:
            sample_shape: the leading shape of the sample.

        Returns:
            Tensor: the sample.
        """
        shape = tuple(self._extended_shape(sample_shape))
        zeros = self.loc.detach().expand(*shape) * 0
        eps = normal(zeros, 1.0)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        """The log density at ``value``.

        Args:
            value: a tensor (or number) broadcastable with the batch shape.

        Returns:
            Tensor: ``-(value - loc)**2 / (2 scale**2) - log(scale) - log(sqrt(2 pi))``.
        """
        var = self.scale ** 2
        log_scale = self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - math.log(math.sqrt(2 * math.pi))

    def cdf(self, value):
        """The cumulative distribution function at ``value``.

        Args:
            value: a tensor broadcastable with the batch shape.

        Returns:
            Tensor: probabilities in [0, 1].
        """
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def entropy(self):
        """The entropy ``0.5 + 0.5 log(2 pi) + log(scale)``.

        Returns:
            Tensor: a tensor of ``batch_shape``.
        """
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()

    def __repr__(self):
        return f"Normal(loc: {tuple(self.loc.shape)}, scale: {tuple(self.scale.shape)})"
