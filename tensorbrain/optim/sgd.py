"""SGD with momentum, dampening, Nesterov and weight decay (PyTorch's formulas)."""
from __future__ import annotations

import numpy as np

from .. import _native
from .._ops import cuda_fused
from .._xp import get_array_module, is_cupy_array
from ._checks import check_flags
from .optimizer import Optimizer, required


class SGD(Optimizer):
    """``torch.optim.SGD``: v = mu*v + (1-dampening)*g; p -= lr*(g + mu*v if nesterov else v).

    >>> import tensorbrain as tb
    >>> w = tb.nn.Parameter(tb.ones(2)) if hasattr(tb.nn, "Parameter") else tb.ones(2, requires_grad=True)
    >>> opt = tb.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w * w).sum().backward(); opt.step(); w.tolist()
    [0.800000011920929, 0.800000011920929]
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False, fused=None):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        check_flags("SGD", differentiable=differentiable, fused=fused, foreach=foreach)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _update(self, p, g, state, group):
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        if is_cupy_array(p) and p.dtype == g.dtype == np.float32 and isinstance(lr, (int, float)):
            # on the GPU one launch per parameter (_ops/cuda_fused.py), not four to six
            buf = cuda_fused.sgd_step(p, g, state.get("momentum_buffer"), lr, mu,
                                      group["dampening"], wd, group["nesterov"], group["maximize"])
            if mu != 0:
                state["momentum_buffer"] = buf
            return
        tmp = self._scratch(p)
        if group["maximize"]:
            g = -g
        if wd != 0:
            g = g + wd * p  # a fresh array: the caller's .grad stays untouched, as in torch
        buf = state.get("momentum_buffer") if mu != 0 else None
        if mu != 0 and buf is None:   # the first step: the buffer starts as the gradient
            buf = state["momentum_buffer"] = g.copy()
            sgd_step(p, _lookahead(buf, g, mu, tmp) if group["nesterov"] else buf, None, lr, 0.0,
                     1.0, False, tmp)
            return
        damp, nesterov = 1 - group["dampening"], group["nesterov"]
        native = _native.loaded()
        if native is not None and isinstance(lr, (int, float)) and all(
                type(a) is np.ndarray and a.dtype == np.float32 and a.flags.c_contiguous
                for a in (p, g, p if buf is None else buf)):
            native.sgd_step(p, g, buf, lr, mu, damp, nesterov)   # one pass, the same bits
        else:
            sgd_step(p, g, buf, lr, mu, damp, nesterov, tmp)


def sgd_step(p, g, buf, lr, mu, damp, nesterov, tmp):
    """SGD's update of one parameter, in place: the NumPy twin of ``tensorbrain._C.sgd_step``
    (csrc/kernels/sgd.cpp), which does the same in one pass.

    buf = mu*buf + damp*g; p -= lr*(g + mu*buf if nesterov else buf); without a buffer p -= lr*g.

    Args:
        p: the parameter's array.
        g: its gradient.
        buf: the momentum buffer (an earlier step made it), or None: no momentum.
        lr: the learning rate.
        mu: the momentum.
        damp: ``1 - dampening``.
        nesterov: Nesterov momentum.
        tmp: scratch of ``p``'s shape and dtype.
    """
    if buf is not None:
        buf *= mu
        if damp == 1:
            buf += g
        else:
            _mul(g, damp, tmp)
            buf += tmp
        g = _lookahead(buf, g, mu, tmp) if nesterov else buf
    _mul(g, lr, tmp)
    p -= tmp


def _lookahead(buf, g, mu, tmp):
    """Nesterov's direction ``g + mu * buf``, in ``tmp``."""
    _mul(buf, mu, tmp)
    tmp += g
    return tmp


def _mul(a, b, out):
    # ``multiply(out=)`` exists on NumPy and CuPy alike: no allocation per step.
    get_array_module(a).multiply(a, b, out=out)
