"""Adagrad (PyTorch's formula: ``clr = lr / (1 + (step - 1) lr_decay)``; eps outside the sqrt)."""
from __future__ import annotations

from .._xp import get_array_module
from ._checks import check_flags, check_hparams
from .optimizer import Optimizer, step_count


class Adagrad(Optimizer):
    """``torch.optim.Adagrad``: ``sum += g^2; p -= clr * g / (sqrt(sum) + eps)``.

    ``foreach`` is accepted and ignored (each update is already vectorised per parameter).

    Args:
        params: parameters or parameter-group dicts.
        lr: learning rate; lr_decay: ``clr = lr / (1 + (step - 1) * lr_decay)``.
        weight_decay: L2 penalty added to the gradient.
        initial_accumulator_value: the starting value of the squared-gradient sum.
        eps: added to the square root of the sum.
        maximize: ascend instead of descend.
        foreach: accepted for torch compatibility and ignored.
        fused: accepted, as torch on the CPU (not together with ``foreach=True``).
        differentiable: must be False (``ValueError`` otherwise).

    Raises:
        ValueError: a negative lr, lr_decay, weight_decay, eps or initial accumulator value.

    >>> import tensorbrain as tb
    >>> w = tb.ones(2, requires_grad=True)
    >>> opt = tb.optim.Adagrad([w], lr=0.5)
    >>> (w * w).sum().backward(); opt.step(); [round(v, 4) for v in w.tolist()]
    [0.5, 0.5]
    """

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0,
                 initial_accumulator_value=0.0, eps=1e-10, foreach=None, *, maximize=False,
                 differentiable=False, fused=None):
        check_hparams(lr, eps, weight_decay)
        if lr_decay < 0.0:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if initial_accumulator_value < 0.0:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        check_flags("Adagrad", differentiable=differentiable, fused=fused, foreach=foreach)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize))

    def _update(self, p, g, state, group):
        xp = get_array_module(p)
        if group["maximize"]:
            g = -g
        if group["weight_decay"] != 0:
            g = g + group["weight_decay"] * p
        if "sum" not in state:
            state["step"] = 0.0
            state["sum"] = xp.full_like(p, group["initial_accumulator_value"])
        state["step"] += 1
        clr = group["lr"] / (1 + (step_count(state["step"]) - 1) * group["lr_decay"])
        s, tmp = state["sum"], self._scratch(p)
        xp.multiply(g, g, out=tmp)
        s += tmp
        xp.sqrt(s, out=tmp)
        tmp += group["eps"]
        xp.divide(g, tmp, out=tmp)
        tmp *= clr
        p -= tmp
