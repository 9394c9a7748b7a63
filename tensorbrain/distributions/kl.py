"""``kl_divergence(p, q)`` and ``register_kl``, as ``torch.distributions.kl``."""
from __future__ import annotations

from ..nn import functional as F
from .bernoulli import Bernoulli
from .categorical import Categorical
from .normal import Normal

_KL: dict = {}


def register_kl(type_p, type_q):
    """A decorator that registers ``fn(p, q)`` as the KL divergence of two distribution types.

    Args:
        type_p: the class of ``p``.
        type_q: the class of ``q``.

    Returns:
        The decorator.
    """
    def decorator(fn):
        _KL[type_p, type_q] = fn
        return fn
    return decorator


def kl_divergence(p, q):
    """``KL(p || q)`` for each distribution in the batch.

    Args:
        p: a distribution.
        q: a distribution of a type for which a KL is registered with ``p``'s type.

    Returns:
        Tensor: a tensor of the batch shape.

    Raises:
        NotImplementedError: no KL is registered for the pair of types.
    """
    for (tp, tq), fn in _KL.items():
        if isinstance(p, tp) and isinstance(q, tq):
            return fn(p, q)
    raise NotImplementedError(f"No KL(p || q) is implemented for p={type(p).__name__}, "
                              f"q={type(q).__name__} (TensorBrain has Normal/Normal, "
                              f"Categorical/Categorical, Bernoulli/Bernoulli; register_kl adds more)")


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = t.masked_fill((q.probs == 0).expand_as(t), float("inf"))
    t = t.masked_fill((p.probs == 0).expand_as(t), 0.0)
    return t.sum(-1)


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    # p log(p/q) + (1-p) log((1-p)/(1-q)), written with softplus of the logits (torch's form)
    t1 = p.probs * (F.softplus(-q.logits) - F.softplus(-p.logits))
    t2 = (1 - p.probs) * (F.softplus(q.logits) - F.softplus(p.logits))
    return t1 + t2
