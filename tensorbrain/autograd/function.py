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

from .._ops.core import make
from .._tensor_base import TensorBase as Tensor
from . import grad_mode


class FunctionCtx:
    """What ``forward`` hands to ``backward``: saved tensors and which inputs need a gradient.

    Args:
        needs_input_grad: one bool per ``forward`` argument: whether it needs a gradient.
    """

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = ()

    def save_for_backward(self, *tensors):
        """Keep tensors for ``backward`` (as ``ctx.saved_tensors``).

        Saved tensors are checked for in-place changes before backward, like the built-in ops' are.

        Args:
            *tensors: the tensors ``backward`` needs.
        """
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
        """Gradient of the output to gradients of ``forward``'s arguments (override it).

        Args:
            ctx: the context ``forward`` filled.
            grad: the gradient of the output.

        Returns:
            One gradient (a Tensor or None) per argument of ``forward``.

        Raises:
            NotImplementedError: the subclass did not define it.
        """
        raise NotImplementedError("a Function subclass must define backward(ctx, grad)")

    @classmethod
    def apply(cls, *args):
        """Run ``forward`` and record the op in the graph, so ``backward`` is called.

        Args:
            *args: the arguments of ``forward`` (tensors and others).

        Returns:
            The Tensor ``forward`` returned, with this function as its ``grad_fn``.

        Raises:
            TypeError: ``forward`` did not return one Tensor.

        Example:
            >>> import tensorbrain as tb
            >>> class Square(tb.autograd.Function):
            ...     @staticmethod
            ...     def forward(ctx, x):
            ...         ctx.save_for_backward(x)
            ...         return x * x
            ...     @staticmethod
            ...     def backward(ctx, grad):
            ...         (x,) = ctx.saved_tensors
            ...         return 2 * x * grad
            >>> x = tb.tensor([3.0], requires_grad=True)
            >>> Square.apply(x).sum().backward(); x.grad.tolist()
            [6.0]
        """
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


def once_differentiable(fn):
    """``torch.autograd.function.once_differentiable``: marks a ``backward`` that cannot itself
    be differentiated; TensorBrain has no higher-order gradients, so ``fn`` is returned as it
    is.

    Args:
        fn: the backward staticmethod's function.
    """
    return fn
