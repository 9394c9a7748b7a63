"""The in-place shape changes of torch's Tensor: ``squeeze_``, ``unsqueeze_``, ``t_``,
``transpose_``, ``swapaxes_``, ``swapdims_``, ``as_strided_``, from one table,
:data:`INPLACE_VIEWS` (name -> the out-of-place op). Each gives the tensor the op's result in
place (the same memory, a new shape) and, under autograd, the op's graph node, as torch's do;
a leaf that requires grad is refused, as for every in-place op. A base class of
``tensorbrain.tensor.Tensor``.
"""
from __future__ import annotations

from ._ops import combine as C
from ._ops import shape as S
from ._tensor_base import TensorBase as Tensor
from .autograd import grad_mode

def inplace_view(name, op):
    """The method ``name``: ``self`` takes ``op(self, ...)``'s shape in place."""
    def method(self, *args, **kwargs):
        self._check_inplace(name)
        old = self
        if grad_mode.is_grad_enabled() and self.grad_fn is not None:
            old = Tensor._wrap(self._data, self.requires_grad)   # the graph's node for the
            old.grad_fn = self.grad_fn                           # value before the change
        out = op(old, *args, **kwargs)
        self._data = out._data
        if grad_mode.is_grad_enabled() and out.grad_fn is not None:
            self.grad_fn, self.requires_grad = out.grad_fn, out.requires_grad
        self._version[0] += 1
        return self
    method.__name__ = method.__qualname__ = name
    method.__doc__ = (f"In-place ``{name[:-1]}``: this tensor takes the shape (and strides) "
                      f"``{name[:-1]}`` would give, on the same memory, as "
                      f"``torch.Tensor.{name}``.\n\nArgs:\n    *args: ``{name[:-1]}``'s "
                      f"arguments.\n    **kwargs: its keyword arguments.\n\nReturns:\n"
                      f"    Tensor: self.\n")
    return method


class InplaceViews:
    """In-place view changes (a base class of Tensor): each takes the shape its op gives."""

    squeeze_ = inplace_view("squeeze_", S.squeeze)
    unsqueeze_ = inplace_view("unsqueeze_", S.unsqueeze)
    t_ = inplace_view("t_", S.t)
    transpose_ = inplace_view("transpose_", S.transpose)
    swapaxes_ = inplace_view("swapaxes_", S.transpose)
    swapdims_ = inplace_view("swapdims_", S.transpose)
    as_strided_ = inplace_view("as_strided_", C.as_strided)
