"""NAdam and RAdam (PyTorch's formulas, including ``decoupled_weight_decay``)."""
from __future__ import annotations

import math

from .._xp import get_array_module
from ._checks import check_flags, check_hparams
from .optimizer import Optimizer, step_count


def _decay(p, g, group):
    """L2 (added to the gradient) or decoupled (``p *= 1 - lr wd``) weight decay."""
    wd = group["weight_decay"]
    if wd == 0:
        return g
    if group["decoupled_weight_decay"]:
        p *= 1 - group["lr"] * wd
        return g
    return g + wd * p


def _moments(xp, p, g, state, b1, b2):
    if "exp_avg" not in state:
        state["step"] = 0.0
        state["exp_avg"] = xp.zeros_like(p)
        state["exp_avg_sq"] = xp.zeros_like(p)
    state["step"] += 1
    m, v = state["exp_avg"], state["exp_avg_sq"]
    m += (1 - b1) * (g - m)          # lerp, as torch
    v *= b2
    v += (1 - b2) * g * g
    return m, v, step_count(state["step"])


class NAdam(Optimizer):
    """``torch.optim.NAdam``: Adam with Nesterov momentum and the momentum schedule
    ``mu_t = b1 (1 - 0.5 * 0.96^(t * momentum_decay))``. ``foreach`` is accepted and ignored.

    Args:
        params: parameters or parameter-group dicts.
        lr: learning rate; betas: decays of the two moments; eps: added to the denominator.
        weight_decay: L2 penalty added to the gradient, or with ``decoupled_weight_decay``
            a decay ``p *= 1 - lr * weight_decay`` (as AdamW).
        momentum_decay: ``psi`` of the momentum schedule.
        maximize: ascend instead of descend (the gradient's sign is flipped).
        foreach: accepted for torch compatibility and ignored.
        capturable, differentiable: must be False (``ValueError`` otherwise).

    Raises:
        ValueError: a negative lr, eps, weight_decay or momentum_decay, a beta outside [0, 1).

    >>> import tensorbrain as tb
    >>> w = tb.ones(2, requires_grad=True)
    >>> opt = tb.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); w.shape
    tb.Size([2])
    """

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        check_hparams(lr, eps, weight_decay, betas)
        if momentum_decay < 0.0:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        check_flags("NAdam", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, g, state, group):
        xp = get_array_module(p)
        lr, (b1, b2), eps, md = group["lr"], group["betas"], group["eps"], group["momentum_decay"]
        if group["maximize"]:
            g = -g
        g = _decay(p, g, group)
        state.setdefault("mu_product", 1.0)
        m, v, t = _moments(xp, p, g, state, b1, b2)
        mu = b1 * (1.0 - 0.5 * 0.96 ** (t * md))
        mu_next = b1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * md))
        state["mu_product"] *= mu
        mu_prod = state["mu_product"]
        denom = xp.sqrt(v / (1 - b2 ** t)) + eps
        p -= (lr * (1 - mu) / (1 - mu_prod)) * (g / denom)
        p -= (lr * mu_next / (1 - mu_prod * mu_next)) * (m / denom)


class RAdam(Optimizer):
    """``torch.optim.RAdam``: Adam with the variance rectification of Liu et al.; while the
    approximated SMA length ``rho_t <= 5`` the step is un-adapted momentum SGD.
    ``foreach`` is accepted and ignored.

    Args:
        params: parameters or parameter-group dicts.
        lr: learning rate; betas: decays of the two moments; eps: added to the denominator.
        weight_decay: L2 penalty added to the gradient, or with ``decoupled_weight_decay``
            a decay ``p *= 1 - lr * weight_decay`` (as AdamW).
        maximize: ascend instead of descend (the gradient's sign is flipped).
        foreach: accepted for torch compatibility and ignored.
        capturable, differentiable: must be False (``ValueError`` otherwise).

    Raises:
        ValueError: a negative lr, eps or weight_decay, a beta outside [0, 1).

    >>> import tensorbrain as tb
    >>> w = tb.ones(2, requires_grad=True)
    >>> opt = tb.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward(); opt.step(); [round(v, 4) for v in w.tolist()]
    [0.8, 0.8]
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        check_hparams(lr, eps, weight_decay, betas)
        check_flags("RAdam", capturable, differentiable)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, g, state, group):
        xp = get_array_module(p)
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        if group["maximize"]:
            g = -g
        g = _decay(p, g, group)
        m, v, t = _moments(xp, p, g, state, b1, b2)
        bc1, bc2 = 1 - b1 ** t, 1 - b2 ** t
        rho_inf = 2 / (1 - b2) - 1
        rho_t = rho_inf - 2 * t * (b2 ** t) / bc2
        if rho_t > 5.0:
            rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf
                             / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            adaptive = math.sqrt(bc2) / (xp.sqrt(v) + eps)
            p -= (lr * rect / bc1) * m * adaptive
        else:
            p -= (lr / bc1) * m
