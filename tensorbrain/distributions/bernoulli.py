"""``Bernoulli``: 1 with probability p, else 0."""
from __future__ import annotations

import numpy as np

from .._sampling import bernoulli
from ..autograd import grad_mode
from ..nn import functional as F
from ..tensor import Tensor
from .distribution import Distribution, as_param, check, clamp_probs, host


class Bernoulli(Distribution):
    """The Bernoulli distribution (``torch.distributions.Bernoulli``).

    Args:
        probs: the probability of 1 (a tensor or a number in [0, 1]).
        logits: the log-odds of 1 (a tensor or a number).
        validate_args: check the arguments; None means yes.

    Raises:
        ValueError: neither or both of ``probs``/``logits``, or (validating) probabilities outside
            [0, 1].

    Example:
        >>> import tensorbrain as tb
        >>> m = tb.distributions.Bernoulli(probs=tb.tensor([0.25]))
        >>> round(m.log_prob(tb.tensor([1.0])).exp().item(), 4)
        0.25
    """

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        param = as_param(probs if probs is not None else logits)
        super().__init__(tuple(param.shape), (), validate_args)
        if probs is not None:
            if self._validate_args:
                v = host(param)
                check(bool(np.all((v >= 0) & (v <= 1))), "Bernoulli", "parameter probs (in [0, 1])")
            self.probs = param
            ps = clamp_probs(param)
            self.logits = ps.log() - (-ps).log1p()
        else:
            self.logits = param
            self.probs = param.sigmoid()
        self._param = param

    @property
    def mean(self):
        """The mean, ``probs``."""
        return self.probs

    @property
    def mode(self):
        """1 where ``probs >= 0.5``, else 0 (torch gives NaN at exactly 0.5; we give 1)."""
        return (self.probs >= 0.5).to(self.probs.dtype)

    @property
    def variance(self):
        """The variance, ``probs * (1 - probs)``."""
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        """Draw zeros and ones without gradient; shape ``sample_shape + batch_shape``.

        Args:
            sample_shape: the leading shape of the sample.

        Returns:
            Tensor: the sample, in the parameter's dtype.
        """
        shape = tuple(self._extended_shape(sample_shape))
        with grad_mode.no_grad():
            return bernoulli(self.probs.detach().expand(*shape))

    def log_prob(self, value):
        """The log probability of ``value`` (0 or 1).

        Args:
            value: a tensor broadcastable with the batch shape.

        Returns:
            Tensor: ``-binary_cross_entropy_with_logits(logits, value)`` elementwise.
        """
        if not isinstance(value, Tensor):
            value = as_param(value, self.logits)
        shape = np.broadcast_shapes(tuple(value.shape), tuple(self.logits.shape))
        return -F.binary_cross_entropy_with_logits(self.logits.expand(*shape),
                                                   value.to(self.logits.dtype).expand(*shape),
                                                   reduction="none")

    def entropy(self):
        """The entropy of each distribution in the batch.

        Returns:
            Tensor: a tensor of ``batch_shape``.
        """
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

    def __repr__(self):
        return f"Bernoulli(probs: {tuple(self.probs.shape)})"
