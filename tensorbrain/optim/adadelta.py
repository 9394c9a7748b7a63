"""Adadelta (Zeiler 2012, PyTorch's formulas with ``lr`` scaling the step)."""
from __future__ import annotations

from .._xp import get_array_module
from ._checks import check_flags, check_hparams
from .optimizer import Optimizer


class Adadelta(Optimizer):
    """``torch.optim.Adadelta``: ``v = rho v + (1 - rho) g^2``;
    ``delta = sqrt(u + eps) / sqrt(v + eps) * g``; ``u = rho u + (1 - rho) delta^2``;
    ``p -= lr * delta``. ``foreach`` is accepted and ignored.

    Args:
        params: parameters or parameter-group dicts.
        lr: scales the step (1.0 is Zeiler's Adadelta).
        rho: decay of both running averages, in [0, 1].
        eps: added inside both square roots.
        weight_decay: L2 penalty added to the gradient.
        maximize: ascend instead of descend (the gradient's sign is flipped).
        foreach: accepted for torch compatibility and ignored.
        capturable, differentiable: must be False (``ValueError`` otherwise).

    Raises:
        ValueError: a negative lr, eps or weight_decay, rho outside [0, 1].

    >>> import tensorbrain as tb
    >>> w = tb.ones(2, requires_grad=True)
    >>> opt = tb.optim.Adadelta([w])
    >>> (w * w).sum().backward(); opt.step(); w.grad.shape
    tb.Size([2])
    """

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        check_hparams(lr, eps, weight_decay)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_flags("Adadelta", capturable, differentiable)
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, g, state, group):
        xp = get_array_module(p)
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * p
        if "square_avg" not in state:
            state["step"] = 0.0
            state["square_avg"] = xp.zeros_like(p)
            state["acc_delta"] = xp.zeros_like(p)
        state["step"] += 1
        v, u, tmp = state["square_avg"], state["acc_delta"], self._scratch(p)
        v *= rho
        v += (1 - rho) * g * g
        delta = xp.sqrt(u + eps)
        xp.add(v, eps, out=tmp)
        xp.sqrt(tmp, out=tmp)
        delta /= tmp
        delta *= g
        u *= rho
        u += (1 - rho) * delta * delta
        delta *= lr
        p -= delta
