"""Tensor methods from torch's older API that real programs still use: ``x.new(...)``,
``resize_`` / ``resize_as_`` (the A3C ``SharedAdam`` builds its state with
``p.data.new().resize_as_(p.data).zero_()``) and the ``_grad`` alias of ``.grad``: a base class of
``tensorbrain.tensor.Tensor``.
"""
from __future__ import annotations

import numbers

from . import _xp
from ._factories import empty, tensor


class LegacyMethods:
    """torch's older Tensor methods.

    Requires: ``_data``, ``_version``, ``_base``, ``grad``, ``requires_grad``, ``dtype``,
    ``device`` (``TensorBase``).
    """

    __slots__ = ()

    @property
    def _grad(self):
        """torch's alias of ``.grad``: A3C workers hand their gradients to the shared model with
        ``shared_param._grad = param.grad``."""
        return self.grad

    @_grad.setter
    def _grad(self, value):
        self.grad = value

    def new(self, *args, **kwargs):
        """A new tensor with this tensor's dtype and device (torch's legacy constructor).

        ``x.new()`` is empty (0 elements), ``x.new(2, 3)`` / ``x.new((2, 3))`` uninitialised of
        that shape, ``x.new([1, 2])`` holds the given data.

        Args:
            *args: nothing, sizes, one shape, or data (a list, an array or a Tensor).
            **kwargs: ``device=`` (``dtype=`` is refused, as torch's ``new`` has none).

        Returns:
            Tensor: the new tensor.
        """
        device = kwargs.pop("device", None) or self.device
        if kwargs:
            raise TypeError(f"new() got unexpected keyword arguments {sorted(kwargs)}")
        if not args:
            return empty(0, dtype=self.dtype, device=device)
        if all(isinstance(a, numbers.Integral) for a in args):
            return empty(*args, dtype=self.dtype, device=device)
        if len(args) == 1 and isinstance(args[0], tuple) and all(isinstance(a, numbers.Integral) for a in args[0]):
            return empty(*args[0], dtype=self.dtype, device=device)
        if len(args) == 1:
            return tensor(args[0], dtype=self.dtype, device=device)
        raise TypeError(f"new(): cannot make a tensor from {args!r}")

    def resize_(self, *sizes):
        """Give this tensor a new shape in place, keeping its values in order as far as they go.

        As torch: elements beyond the old number are uninitialised; unlike ``view`` the number of
        elements may change.

        Args:
            *sizes: the new shape, as ints or one sequence.

        Returns:
            Tensor: self.

        Raises:
            RuntimeError: the tensor requires grad, or is a view of another tensor.
        """
        shape = tuple(sizes[0]) if len(sizes) == 1 and not isinstance(sizes[0], numbers.Integral) else tuple(sizes)
        if self.requires_grad:
            raise RuntimeError("cannot resize variables that require grad")
        if self._base is not None:
            raise RuntimeError("resize_: cannot resize a view of another tensor; clone() it first")
        old = self._data
        xp = _xp.get_array_module(old)
        n = 1
        for s in shape:
            n *= int(s)
        if n == old.size:
            new = xp.ascontiguousarray(old).reshape(shape)
        else:
            new = xp.empty(shape, dtype=old.dtype)
            k = min(n, old.size)
            new.reshape(-1)[:k] = old.reshape(-1)[:k]
        self._data = new
        self._version[0] += 1
        return self

    def resize_as_(self, other):
        """``resize_(other.shape)``.

        Args:
            other: the tensor whose shape is taken.

        Returns:
            Tensor: self.
        """
        return self.resize_(*other.shape)

    def resize_as(self, tensor):
        """This tensor's values in ``tensor``'s shape, as torch's (deprecated) out-of-place
        ``Tensor.resize_as``: autograd's resize, which only reshapes (same number of elements;
        the result shares the data when this tensor is contiguous) and is differentiable.

        Args:
            tensor: the tensor whose shape is taken.

        Returns:
            Tensor: the reshaped tensor.

        Raises:
            RuntimeError: the numbers of elements differ (torch's message).
        """
        sizes = tuple(tensor.shape)
        numel = 1
        for s in sizes:
            numel *= int(s)
        if numel != self.numel():
            raise RuntimeError(
                f"requested resize to {'x'.join(map(str, sizes))} ({numel} elements in total), "
                f"but the given tensor has a size of {'x'.join(map(str, self.shape))} "
                f"({self.numel()} elements). autograd's resize can only change the shape of a "
                f"given tensor, while preserving the number of elements. ")
        return self.reshape(sizes)


__all__ = ["LegacyMethods"]
