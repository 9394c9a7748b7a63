"""Adamax (Adam with the infinity norm; PyTorch's formulas)."""
from __future__ import annotations

from .._xp import get_array_module
from ._checks import check_flags, check_hparams
from .optimizer import Optimizer, step_count


class Adamax(Optimizer):
    """``torch.optim.Adamax``: ``m = b1 m + (1 - b1) g``; ``u = max(b2 u, |g| + eps)``;
    ``p -= lr / (1 - b1^t) * m / u``. ``foreach`` is accepted and ignored.

    Args:
        params: parameters or parameter-group dicts.
        lr: learning rate; betas: decays of the first moment and of the infinity norm.
        eps: added to ``|g|`` in the infinity norm.
        weight_decay: L2 penalty added to the gradient.
        maximize: ascend instead of descend (the gradient's sign is flipped).
        foreach: accepted for torch compatibility and ignored.
        capturable, differentiable: must be False (``ValueError`` otherwise).

    Raises:
        ValueError: a negative lr, eps or weight_decay, a beta outside [0, 1).

    >>> import tensorbrain as tb
    >>> w = tb.ones(2, requires_grad=True)
    >>> opt = tb.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); [round(v, 4) for v in w.tolist()]
    [0.9, 0.9]
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        check_hparams(lr, eps, weight_decay, betas)
        check_flags("Adamax", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize))

    def _update(self, p, g, state, group):
        xp = get_array_module(p)
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * p
        if "exp_avg" not in state:
            state["step"] = 0.0
            state["exp_avg"] = xp.zeros_like(p)
            state["exp_inf"] = xp.zeros_like(p)
        state["step"] += 1
        m, u = state["exp_avg"], state["exp_inf"]
        m *= b1
        m += (1 - b1) * g
        u *= b2
        xp.maximum(u, xp.abs(g) + eps, out=u)
        p -= (lr / (1 - b1 ** step_count(state["step"]))) * (m / u)
