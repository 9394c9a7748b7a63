"""``Adapters``: the Tensor methods whose form differs from their op's (``view_as``, ``where``,
``softmax``, ``new_full``, ``new_zeros``, ...), a base class of ``tensorbrain.tensor.Tensor``.
"""
from __future__ import annotations

from ._factories import empty, full, ones, tensor, zeros
from ._ops import elementwise as E
from ._ops import shape as S
from ._ops import softmax as _softmax

def _new_filled(fill):
    """``new_zeros``/``new_ones``/``new_empty``: ``fill(size)`` with ``self``'s dtype and device
    unless given, as ``torch.Tensor.new_<fill>``."""
    def new(self, size, *more, dtype=None, device=None, requires_grad=False, **kw):
        shape = S._shape_arg((size,) + more) if more or isinstance(size, int) else tuple(size)
        return fill(shape, dtype=dtype or self.dtype, device=device or self.device,
                    requires_grad=requires_grad, **kw)
    name = "new_" + fill.__name__
    new.__name__, new.__qualname__ = name, f"Adapters.{name}"
    new.__doc__ = (f"A tensor like ``tb.{fill.__name__}(size)`` with ``self``'s dtype and device "
                   f"unless given, as ``torch.Tensor.{name}``.\n\nArgs:\n"
                   f"    size: the shape, as ints or one tuple.\n    *more: further sizes.\n"
                   f"    dtype: the dtype; default ``self.dtype``.\n"
                   f"    device: the device; default ``self.device``.\n"
                   f"    requires_grad: whether autograd records operations on the result.\n"
                   f"    **kw: further keyword arguments of ``tb.{fill.__name__}``.\n\n"
                   f"Returns:\n    Tensor: the new tensor.\n")
    return new


class Adapters:
    """Methods whose form differs from the op's (argument order, a shape from another tensor).

    Requires: ``shape``, ``dtype``, ``device`` (``TensorBase``).
    """

    __slots__ = ()

    def view_as(self, other):
        """``self.view(*other.shape)``, as ``torch.Tensor.view_as``.

        Args:
            other: the tensor whose shape to take.

        Returns:
            Tensor: a view of ``self``.
        """
        return S.reshape(self, *other.shape)

    def reshape_as(self, other):
        """``self.reshape(*other.shape)``, as ``torch.Tensor.reshape_as``.

        Args:
            other: the tensor whose shape to take.

        Returns:
            Tensor: ``self``'s elements in ``other``'s shape.
        """
        return S.reshape(self, *other.shape)

    def where(self, condition, other):
        """``tb.where(condition, self, other)``, as ``torch.Tensor.where``.

        Args:
            condition: a bool tensor: where True, take ``self``.
            other: the values elsewhere (a tensor or a number).

        Returns:
            Tensor: the broadcast shape of the three.
        """
        return E.where(condition, self, other)

    def softmax(self, dim, dtype=None):
        """``tb.softmax(self, dim)``, as ``torch.Tensor.softmax``.

        Args:
            dim: the dimension to normalise over.
            dtype: if given, ``self`` is cast to it first.

        Returns:
            Tensor: ``self``'s shape.
        """
        return _softmax.softmax(self, dim, dtype)

    def log_softmax(self, dim, dtype=None):
        """``tb.log_softmax(self, dim)``, as ``torch.Tensor.log_softmax``.

        Args:
            dim: the dimension to normalise over.
            dtype: if given, ``self`` is cast to it first.

        Returns:
            Tensor: ``self``'s shape.
        """
        return _softmax.log_softmax(self, dim, dtype)

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        """A new tensor from ``data`` with ``self``'s dtype and device unless given.

        Args:
            data: a number, a nested list, an array or a tensor (copied).
            dtype: the dtype; default ``self.dtype``.
            device: the device; default ``self.device``.
            requires_grad: whether autograd records operations on the result.

        Returns:
            Tensor: the new tensor.

        Example:
            >>> import tensorbrain as tb
            >>> tb.zeros(2, dtype=tb.float64).new_tensor([1, 2]).dtype == tb.float64
            True
        """
        return tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                      requires_grad=requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        """A tensor of ``size`` filled with ``fill_value``, ``self``'s dtype and device unless
        given.

        Args:
            size: the shape (a tuple or list).
            fill_value: the value of every element.
            dtype: the dtype; default ``self.dtype``.
            device: the device; default ``self.device``.
            requires_grad: whether autograd records operations on the result.

        Returns:
            Tensor: the new tensor.
        """
        return full(size, fill_value, dtype=dtype or self.dtype, device=device or self.device,
                    requires_grad=requires_grad)

    new_zeros, new_ones, new_empty = _new_filled(zeros), _new_filled(ones), _new_filled(empty)
