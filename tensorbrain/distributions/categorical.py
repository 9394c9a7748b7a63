"""``Categorical``: one of K categories, with given probabilities or logits."""
from __future__ import annotations

import numpy as np

from .. import _dtype
from .._sampling import multinomial
from ..tensor import Tensor, arange
from .distribution import Distribution, as_param, check, clamp_probs, host


class Categorical(Distribution):
    """A categorical distribution over ``0 .. K-1`` (``torch.distributions.Categorical``).

    Exactly one of ``probs`` (non-negative, normalised along the last dimension) and ``logits``
    (unnormalised log probabilities) is given; the last dimension indexes the categories, the
    others are the batch.

    Args:
        probs: a tensor of weights, shape ``batch_shape + (K,)``.
        logits: a tensor of log weights, shape ``batch_shape + (K,)``.
        validate_args: check the arguments; None means yes.

    Raises:
        ValueError: neither or both of ``probs``/``logits``, a 0-d parameter, or (validating)
            negative or non-finite probabilities.

    Example:
        >>> import tensorbrain as tb
        >>> m = tb.distributions.Categorical(logits=tb.zeros(4))
        >>> round(m.entropy().item(), 4)  # log(4)
        1.3863
    """

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        param = as_param(probs if probs is not None else logits)
        if param.dim() < 1:
            raise ValueError("`probs` / `logits` parameter must be at least one-dimensional "
                             f"(got shape {tuple(param.shape)}): the last dimension indexes the "
                             f"categories")
        super().__init__(tuple(param.shape[:-1]), (), validate_args)
        if probs is not None:
            if self._validate_args:
                v = host(param)
                check(bool(np.all(np.isfinite(v)) and np.all(v >= 0) and np.all(v.sum(-1) > 0)),
                      "Categorical", "parameter probs (non-negative, finite, not all zero)")
            self.probs = param / param.sum(-1, keepdim=True)
            self.logits = clamp_probs(self.probs).log()
        else:
            if self._validate_args:
                check(not np.any(np.isnan(host(param))), "Categorical", "parameter logits (no NaN)")
            self.logits = param - param.logsumexp(dim=-1, keepdim=True)
            self.probs = self.logits.softmax(-1)
        self._param = param
        self._num_events = int(param.shape[-1])

    @property
    def param_shape(self):
        """The shape of the parameter: ``batch_shape + (K,)``."""
        return self._param.shape

    @property
    def mean(self):
        """NaN: a categorical distribution has no mean (as torch)."""
        return self.probs.new_full(tuple(self._extended_shape()), float("nan"))

    @property
    def mode(self):
        """The most probable category."""
        return self.probs.argmax(-1)

    @property
    def variance(self):
        """NaN: a categorical distribution has no variance (as torch)."""
        return self.mean

    def sample(self, sample_shape=()):
        """Draw categories, shape ``sample_shape + batch_shape`` (int64, no gradient).

        Args:
            sample_shape: the leading shape of the sample.

        Returns:
            Tensor: the drawn indices.
        """
        shape = self._extended_shape(sample_shape)
        n = int(np.prod(tuple(sample_shape), dtype=np.int64))
        probs_2d = self.probs.detach().reshape(-1, self._num_events)
        samples_2d = multinomial(probs_2d, n, True).T
        return samples_2d.reshape(tuple(shape))

    def log_prob(self, value):
        """The log probability of the categories in ``value``.

        Args:
            value: integer categories, broadcastable with ``batch_shape``.

        Returns:
            Tensor: the log probabilities; differentiable in the parameter.

        Raises:
            ValueError: (validating) a value that is not a category in ``0 .. K-1``.
        """
        if not isinstance(value, Tensor):
            value = as_param(value).long()
        if self._validate_args:
            v = host(value)
            check(bool(np.all((v >= 0) & (v < self._num_events) & (v == np.round(v)))),
                  "Categorical", f"value (an integer in [0, {self._num_events}))")
        value = value.long().unsqueeze(-1)
        shape = np.broadcast_shapes(tuple(value.shape), tuple(self.logits.shape))
        log_pmf = self.logits.expand(*shape)
        index = value.expand(*(shape[:-1] + (1,)))
        return log_pmf.gather(-1, index).squeeze(-1)

    def entropy(self):
        """The entropy ``-sum p log p`` of each distribution in the batch.

        Returns:
            Tensor: a tensor of ``batch_shape``.
        """
        min_real = float(np.finfo(np.dtype(self.logits.dtype)).min)
        logits = self.logits.clamp(min=min_real)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        """The categories ``0 .. K-1``, shaped ``(K,) + batch_shape`` (or ``(K, 1, ...)``).

        Args:
            expand: expand over the batch shape.

        Returns:
            Tensor: int64 values.
        """
        values = arange(self._num_events, dtype=_dtype.int64, device=self.probs.device)
        values = values.view(-1, *([1] * len(self._batch_shape)))
        return values.expand(-1, *self._batch_shape) if expand else values

    def __repr__(self):
        return f"Categorical(probs: {tuple(self._param.shape)})"
