"""Adam and AdamW (PyTorch's formulas, bias correction folded into the step size)."""
from __future__ import annotations

import math

import numpy as np

from .. import _native
from .._xp import get_array_module
from ._checks import check_flags
from .optimizer import Optimizer, step_count


class Adam(Optimizer):
    """``torch.optim.Adam`` (L2 weight decay added to the gradient; ``amsgrad`` optional)."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        check_flags(type(self).__name__, capturable, differentiable, fused, foreach)
        if decoupled_weight_decay:   # torch: Adam(decoupled_weight_decay=True) is AdamW
            self._decoupled = True
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _update(self, p, g, state, group):
        xp = get_array_module(p)
        lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        if group["maximize"]:
            g = -g
        if wd != 0:
            if self._decoupled:
                p *= 1 - lr * wd
            else:
                g = g + wd * p
        if "exp_avg" not in state:
            state["step"] = 0.0
            state["exp_avg"] = xp.zeros_like(p)
            state["exp_avg_sq"] = xp.zeros_like(p)
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = xp.zeros_like(p)
        state["step"] += 1
        step = step_count(state["step"])
        bias1 = 1 - b1 ** step
        bias2_sqrt = math.sqrt(1 - b2 ** step)
        m, v = state["exp_avg"], state["exp_avg_sq"]
        if group["amsgrad"]:
            tmp = self._scratch(p)
            _moments(xp, g, m, v, b1, b2, tmp)
            vmax = state["max_exp_avg_sq"]
            xp.maximum(vmax, v, out=vmax)
            xp.sqrt(vmax, out=tmp)
            _apply(p, m, tmp, bias2_sqrt, eps, lr / bias1)
            return
        native = _native.loaded()
        if native is not None and all(type(a) is np.ndarray and a.dtype == np.float32
                                      and a.flags.c_contiguous for a in (p, g, m, v)):
            native.adam_step(p, g, m, v, b1, b2, bias2_sqrt, eps, lr / bias1)
        else:
            adam_step(p, g, m, v, b1, b2, bias2_sqrt, eps, lr / bias1, self._scratch(p))


def _moments(xp, g, m, v, b1, b2, tmp):
    """m = b1*m + (1-b1)*g ; v = b2*v + (1-b2)*g*g, in place (``tmp``: scratch like ``g``)."""
    m *= b1
    xp.multiply(g, 1 - b1, out=tmp)
    m += tmp
    v *= b2
    xp.multiply(g, g, out=tmp)
    tmp *= 1 - b2
    v += tmp


def _apply(p, m, tmp, bias2_sqrt, eps, step_size):
    """p -= m / (tmp / bias2_sqrt + eps) * step_size, with ``tmp`` = sqrt of the second moment."""
    tmp /= bias2_sqrt
    tmp += eps
    get_array_module(p).divide(m, tmp, out=tmp)
    tmp *= step_size
    p -= tmp


def adam_step(p, g, m, v, b1, b2, bias2_sqrt, eps, step_size, tmp):
    """Adam's update of one parameter in place: the NumPy twin of ``tensorbrain._C.adam_step``
    (which runs it in one pass over float32; tests/test_adam_native.py holds the two together).
    ``tmp`` is scratch shaped like ``p``."""
    xp = get_array_module(p)
    _moments(xp, g, m, v, b1, b2, tmp)
    xp.sqrt(v, out=tmp)
    _apply(p, m, tmp, bias2_sqrt, eps, step_size)


class AdamW(Adam):
    """``torch.optim.AdamW``: decoupled weight decay ``p *= 1 - lr*wd`` (default wd 0.01)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, capturable=capturable, differentiable=differentiable,
                         fused=fused)
