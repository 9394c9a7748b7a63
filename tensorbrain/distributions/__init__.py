"""``tensorbrain.distributions``: probability distributions, as ``torch.distributions``.

The ones real training programs use: :class:`Categorical` (policy gradients, sampling tokens),
:class:`Normal` (reparameterised sampling, Gaussian policies), :class:`Bernoulli`, and
:func:`kl_divergence` between two of the same family. ``sample`` draws without gradient,
``rsample`` (Normal) with it; ``log_prob`` and ``entropy`` are differentiable in the parameters.

>>> import tensorbrain as tb
>>> from tensorbrain.distributions import Categorical
>>> m = Categorical(probs=tb.tensor([0.25, 0.75]))
>>> round(m.log_prob(tb.tensor(1)).exp().item(), 4)
0.75
"""
from .bernoulli import Bernoulli
from .categorical import Categorical
from .continuous import Exponential, Gumbel, Laplace, Uniform
from . import exponential, gumbel, laplace, uniform  # noqa: F401,E402  (torch's module paths)
from .distribution import Distribution
from .kl import kl_divergence, register_kl
from .normal import Normal

__all__ = ["Bernoulli", "Categorical", "Distribution", "Normal", "kl_divergence", "register_kl",
           "Exponential", "Gumbel", "Laplace", "Uniform"]

