"""``tensorbrain.distributions``: probability distributions, as ``torch.distributions``.

The ones real training programs use: :class:`Categorical` (policy gradients, sampling tokens),
:class:`Normal` (reparameterised sampling, Gaussian policies), :class:`Bernoulli`, and
:func:`kl_divergence` between two of the same family. ``sample`` draws without gradient,
``rsample`` (Normal, Gamma, Beta...) with it; ``log_prob`` and ``entropy`` are differentiable in the parameters.

>>> import tensorbrain as tb
>>> from tensorbrain.distributions import Categorical
>>> m = Categorical(probs=tb.tensor([0.25, 0.75]))
>>> round(m.log_prob(tb.tensor(1)).exp().item(), 4)
0.75
"""
from .bernoulli import Bernoulli
from .beta import Beta
from .categorical import Categorical
from .continuous import Exponential, Gumbel, Laplace, Uniform
from . import beta, exponential, gamma, gumbel, laplace, uniform  # noqa: F401,E402  (torch's module paths)
from .distribution import Distribution
from .gamma import Gamma
from .kl import kl_divergence, register_kl
from .normal import Normal

__all__ = ["Bernoulli", "Beta", "Categorical", "Gamma", "Distribution", "Normal", "kl_divergence", "register_kl",
           "Exponential", "Gumbel", "Laplace", "Uniform"]

