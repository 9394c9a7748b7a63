"""``torch.autograd.Variable`` (``torch.autograd.variable``): torch's pre-0.4 wrapper, which
is the tensor itself today: ``Variable(t)`` gives ``t`` (``requires_grad`` set when asked) and
``isinstance(t, Variable)`` is True for every tensor, as in torch.

>>> import tensorbrain as tb
>>> from tensorbrain.autograd import Variable
>>> v = Variable(tb.ones(2), requires_grad=True)
>>> v.requires_grad, isinstance(tb.ones(1), Variable)
(True, True)
"""
from __future__ import annotations

from .._tensor_base import TensorBase as Tensor


class _VariableMeta(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor)

    def __call__(cls, data, requires_grad: bool = False, volatile: bool = False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if requires_grad and not data.requires_grad:
            data.requires_grad_(True)
        return data


class Variable(metaclass=_VariableMeta):
    """``Variable(tensor, requires_grad=False)``: the tensor (see the module docstring).

    Args:
        data: the tensor.
        requires_grad: make it require grad.
        volatile: accepted (torch's removed flag).
    """


__all__ = ["Variable"]
