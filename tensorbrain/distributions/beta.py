"""``torch.distributions.beta``: :class:`Beta`, reparameterised through two gamma variates.

``rsample`` is ``X / (X + Y)`` with ``X ~ Gamma(concentration1)``, ``Y ~ Gamma(concentration0)``
(:mod:`.gamma`'s implicit gradients): the same distribution and the same expected gradients as
torch's, whose Dirichlet sampler draws the same two gamma variates.
"""
from __future__ import annotations

import numpy as np

from .distribution import Distribution, as_param, broadcast_params, check, host
from .gamma import _standard_gamma


class Beta(Distribution):
    """The beta distribution on (0, 1), as ``torch.distributions.Beta``; ``rsample`` is
    differentiable in both concentrations.

    Args:
        concentration1: alpha (> 0).
        concentration0: beta (> 0).
        validate_args: check the arguments; None means yes.

    Raises:
        ValueError: a concentration is not positive (with ``validate_args``).

    Example:
        >>> import tensorbrain as tb
        >>> m = tb.distributions.Beta(tb.tensor([2.0]), tb.tensor([6.0]))
        >>> m.mean.tolist()
        [0.25]
    """

    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        (self.concentration1, self.concentration0), shape = broadcast_params(concentration1,
                                                                            concentration0)
        super().__init__(shape, (), validate_args)
        if self._validate_args:
            for name in ("concentration1", "concentration0"):
                check(bool(np.all(host(getattr(self, name)) > 0)), "Beta", f"parameter {name}")

    @property
    def mean(self):
        """``a / (a + b)``."""
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        """``(a - 1) / (a + b - 2)`` with ``a - 1`` and ``b - 1`` clamped at 0; 1 where both
        concentrations are below 1 (torch's Dirichlet rule)."""
        from .._ops.elementwise import where
        m1 = (self.concentration1 - 1).clamp(min=0.0)
        m0 = (self.concentration0 - 1).clamp(min=0.0)
        both = (self.concentration1 < 1) & (self.concentration0 < 1)
        return where(both, m1 * 0 + 1, m1 / (m1 + m0))

    @property
    def variance(self):
        """``a b / ((a + b)**2 (a + b + 1))``."""
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        """A reparameterised sample: gradients flow to both concentrations.

        Args:
            sample_shape: the leading shape of the sample.

        Returns:
            Tensor: the sample.
        """
        shape = tuple(self._extended_shape(sample_shape))
        x = _standard_gamma(self.concentration1.expand(*shape))
        y = _standard_gamma(self.concentration0.expand(*shape))
        eps = float(np.finfo(np.dtype(x.dtype)).eps)
        return (x / (x + y)).clamp(eps, 1 - eps)

    def log_prob(self, value):
        """``(a - 1) log x + (b - 1) log(1 - x) - log B(a, b)``.

        Args:
            value: the points in (0, 1).
        """
        value = as_param(value, self.concentration1)
        a, b = self.concentration1, self.concentration0
        return ((a - 1).xlogy(value) + (b - 1).xlogy(1 - value)
                + (a + b).lgamma() - a.lgamma() - b.lgamma())

    def entropy(self):
        """``log B(a, b) - (a - 1) psi(a) - (b - 1) psi(b) + (a + b - 2) psi(a + b)``."""
        a, b = self.concentration1, self.concentration0
        total = a + b
        return (a.lgamma() + b.lgamma() - total.lgamma() - (a - 1) * a.digamma()
                - (b - 1) * b.digamma() + (total - 2) * total.digamma())

    def __repr__(self):
        return f"Beta(concentration1: {self.concentration1}, concentration0: {self.concentration0})"


__all__ = ["Beta"]
