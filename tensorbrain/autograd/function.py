"""``tb.autograd.Function``: user-defined ops with a hand-written backward, as in PyTorch.

>>> import tensorbrain as tb
>>> class Cube(tb.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x * x
...     @staticmethod
...     def backward(ctx, grad):
...         (x,) = ctx.saved_tensors
...         return grad * 3 * x * x
>>> x = tb.tensor([2.0], requires_grad=True)
>>> Cube.apply(x).backward(); x.grad.tolist()
[12.0]
"""
from __future__ import annotations

from . import grad_mode


class FunctionCtx:
    """What ``forward`` hands to ``backward``: saved tensors and which inputs need a gradient."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, grad)``, call ``apply``.

    ``forward`` runs without recording a graph and returns one Tensor; ``backward`` returns one
    gradient (a Tensor or None) per argument of ``forward``. Tensors saved with
    ``ctx.save_for_backward`` are checked for in-place changes like the built-in ops' are.
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must define forward(ctx, ...)")

    @staticmethod
    def backward(ctx, grad):
        raise NotImplementedError("a Function subclass must define backward(ctx, grad)")

    @classmethod
    def apply(cls, *args):
        from .._ops.core import make
        from ..tensor import Tensor
        ctx = FunctionCtx(tuple(isinstance(a, Tensor) and a.requires_grad for a in args))
        with grad_mode.no_grad():
            out = cls.forward(ctx, *args)
        if not isinstance(out, Tensor):
            raise TypeError(f"{cls.__name__}.forward must return one Tensor, got {type(out).__name__}")
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]

        def backward(g):
            with grad_mode.no_grad():
                grads = cls.backward(ctx, Tensor._wrap(g))
            if not isinstance(grads, tuple):
                grads = (grads,)
            if len(grads) != len(args):
                raise RuntimeError(f"{cls.__name__}.backward returned {len(grads)} gradients, "
                                   f"forward took {len(args)} arguments")
            return tuple(None if grads[i] is None else grads[i]._data for i in positions)
        res = make(out._data, tuple(args[i] for i in positions), backward, cls.__name__ + "Backward",
                   tuple(ctx.saved_tensors))
        res._version = out._version   # same array: an in-place change of res must show on out
        return res
