"""The base class of the distributions, and the helpers they share (torch.distributions.utils)."""
from __future__ import annotations

import numpy as np

from .. import _xp
from ..tensor import Size, Tensor, as_tensor


class Distribution:
    """A distribution with a batch shape and an event shape (``torch.distributions.Distribution``).

    Args:
        batch_shape: the shape of the batch of independent distributions.
        event_shape: the shape of one draw of one distribution.
        validate_args: check the parameters (and values passed to ``log_prob``); None means
            yes, as torch's default.
    """

    has_rsample = False
    _validate_default = True

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        self._validate_args = self._validate_default if validate_args is None else validate_args

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        """Whether distributions check their arguments unless told otherwise.

        Args:
            value: True to check (the default), False not to.
        """
        Distribution._validate_default = bool(value)

    @property
    def batch_shape(self) -> Size:
        """The shape over which the parameters are batched."""
        return self._batch_shape

    @property
    def event_shape(self) -> Size:
        """The shape of a single sample of one distribution."""
        return self._event_shape

    @property
    def mean(self):
        """The mean of the distribution."""
        raise NotImplementedError(f"{type(self).__name__} has no mean")

    @property
    def mode(self):
        """The mode of the distribution."""
        raise NotImplementedError(f"{type(self).__name__} has no mode")

    @property
    def variance(self):
        """The variance of the distribution."""
        raise NotImplementedError(f"{type(self).__name__} has no variance")

    @property
    def stddev(self):
        """The standard deviation (the square root of the variance)."""
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        """Draw a sample of shape ``sample_shape + batch_shape + event_shape``, without gradient
        (a reparameterised family's ``rsample``, detached).

        Args:
            sample_shape: the leading shape of the sample.

        Returns:
            Tensor: the sample.
        """
        if self.has_rsample:
            return self.rsample(sample_shape).detach()
        raise NotImplementedError(f"{type(self).__name__}.sample")

    def rsample(self, sample_shape=()):
        """A reparameterised sample: gradients flow to the parameters.

        Args:
            sample_shape: the leading shape of the sample.

        Returns:
            Tensor: the sample.

        Raises:
            NotImplementedError: the distribution has no reparameterised sampler.
        """
        raise NotImplementedError(f"{type(self).__name__} has no rsample (has_rsample is False)")

    def sample_n(self, n):
        """``sample((n,))`` (torch's old name).

        Args:
            n: the number of samples.

        Returns:
            Tensor: the samples.
        """
        return self.sample((n,))

    def log_prob(self, value):
        """The log of the probability (density or mass) of ``value``.

        Args:
            value: a tensor broadcastable to ``batch_shape + event_shape``.

        Returns:
            Tensor: the log probabilities.
        """
        raise NotImplementedError(f"{type(self).__name__}.log_prob")

    def entropy(self):
        """The entropy of each distribution in the batch.

        Returns:
            Tensor: a tensor of ``batch_shape``.
        """
        raise NotImplementedError(f"{type(self).__name__}.entropy")

    def perplexity(self):
        """``exp(entropy())``.

        Returns:
            Tensor: a tensor of ``batch_shape``.
        """
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def __repr__(self):
        return f"{type(self).__name__}()"


def host(t) -> np.ndarray:
    """A tensor's values as a NumPy array, for argument checks."""
    return _xp.to_numpy(t._data) if isinstance(t, Tensor) else np.asarray(t)


def as_param(value, like=None) -> Tensor:
    """A parameter as a floating-point tensor (numbers take ``like``'s dtype and device)."""
    if isinstance(value, Tensor):
        return value if value.is_floating_point() else value.float()
    if like is not None:
        return as_tensor(np.asarray(value, dtype=np.dtype(like.dtype))).to(like.device)
    return as_tensor(np.asarray(value, dtype=np.float32))


def broadcast_params(*values) -> tuple[list, tuple]:
    """Parameters as floating-point tensors broadcast to one shape (numbers take the first
    tensor's dtype and device), and that shape: torch's ``broadcast_all``.

    Args:
        *values: tensors or numbers.
    """
    like = next((v for v in values if isinstance(v, Tensor)), None)
    params = [as_param(v, like) for v in values]
    shape = tuple(np.broadcast_shapes(*(tuple(p.shape) for p in params)))
    return [p.expand(*shape) for p in params], shape


def clamp_probs(probs: Tensor) -> Tensor:
    """Probabilities clamped to ``[eps, 1 - eps]`` of their dtype (torch.distributions.utils)."""
    eps = float(np.finfo(np.dtype(probs.dtype)).eps)
    return probs.clamp(min=eps, max=1 - eps)


def check(ok: bool, dist: str, what: str) -> None:
    """Raise torch's ``ValueError`` for an invalid argument.

    Raises:
        ValueError: ``ok`` is False.
    """
    if not ok:
        raise ValueError(f"Expected {what} of {dist} to satisfy its constraint (pass "
                         f"validate_args=False to skip this check)")
