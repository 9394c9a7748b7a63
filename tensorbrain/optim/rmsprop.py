"""RMSprop (PyTorch's formulas: eps added outside the square root; centered and momentum)."""
from __future__ import annotations

from .._xp import get_array_module
from ._checks import check_flags
from .optimizer import Optimizer


class RMSprop(Optimizer):
    """RMSprop (as ``torch.optim.RMSprop``): divides the gradient by a running RMS of it.

    Args:
        params: parameters or parameter groups.
        lr: the learning rate.
        alpha: smoothing constant of the squared-gradient average.
        eps: added to the denominator.
        weight_decay: L2 penalty.
        momentum: momentum factor.
        centered: normalise by the gradient's estimated variance instead of its second moment.
        capturable: must be False (CUDA graphs are not supported).
        foreach: accepted and ignored (torch's implementation choice).
        maximize: maximise the objective instead.
        differentiable: must be False.

    Raises:
        ValueError: a negative lr, eps, alpha or momentum, or capturable/differentiable set.
    """
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        check_flags("RMSprop", capturable, differentiable)   # foreach: accepted, ignored
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _update(self, p, g, state, group):
        xp = get_array_module(p)
        lr, alpha, eps, wd, mu = (group[k] for k in ("lr", "alpha", "eps", "weight_decay", "momentum"))
        if group["maximize"]:
            g = -g
        if wd != 0:
            g = g + wd * p
        if "square_avg" not in state:
            state["step"] = 0.0
            state["square_avg"] = xp.zeros_like(p)
            if mu > 0:
                state["momentum_buffer"] = xp.zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = xp.zeros_like(p)
        state["step"] += 1
        sq, tmp = state["square_avg"], self._scratch(p)
        sq *= alpha
        xp.multiply(g, g, out=tmp)
        tmp *= 1 - alpha
        sq += tmp
        if group["centered"]:
            ga = state["grad_avg"]
            ga *= alpha
            ga += (1 - alpha) * g
            xp.multiply(ga, ga, out=tmp)
            xp.subtract(sq, tmp, out=tmp)
            xp.sqrt(tmp, out=tmp)
        else:
            xp.sqrt(sq, out=tmp)
        tmp += eps
        if mu > 0:
            buf = state["momentum_buffer"]
            buf *= mu
            xp.divide(g, tmp, out=tmp)
            buf += tmp
            xp.multiply(buf, lr, out=tmp)
        else:
            xp.divide(g, tmp, out=tmp)
            tmp *= lr
        p -= tmp
