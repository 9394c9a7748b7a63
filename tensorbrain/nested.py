"""``tb.nested`` (``torch.nested``): nested (ragged) tensors, a list of tensors that differ in
their leading sizes, as torch's strided nested tensors.

``nested_tensor(list)`` copies the components into a new leaf (``requires_grad`` makes each a
leaf that needs a gradient; ``nt.grad`` is then a nested tensor of their gradients);
``as_nested_tensor(list)`` keeps the components' autograd history. ``unbind()``, ``size(d)``
(for a regular dimension; an irregular one raises torch's error), ``dim()``, ``is_nested``,
``to_padded_tensor(padding, output_size)`` (differentiable: ``cat`` with padding blocks, then
``stack``), elementwise functions (``relu``, ``sin``, ``exp``...) and ``+ - * /`` between
nested tensors of the same structure or with a number, per component (so gradients are the
components'). Other ops raise RuntimeError naming them: unbind, or pad first. The jagged layout
(``layout=tb.jagged``) is accepted and stored the same way.

>>> import tensorbrain as tb
>>> nt = tb.nested.nested_tensor([tb.ones(2, 3), tb.ones(4, 3)])
>>> nt.is_nested, nt.dim(), nt.size(0), (nt * 2).to_padded_tensor(0.0).shape
(True, 3, 2, tb.Size([2, 4, 3]))
"""
from __future__ import annotations

import numbers
import operator

from . import _layout
from ._factories import tensor as _tensor
from ._unsupported import unsupported
from .tensor import Tensor

_WHY = "TensorBrain's nested tensors are lists of components (no jagged views)"
_USE = "tb.nested.nested_tensor and to_padded_tensor"
nested_tensor_from_jagged = unsupported("torch.nested.nested_tensor_from_jagged", _WHY, _USE)
narrow = unsupported("torch.nested.narrow", _WHY, _USE)
masked_select = unsupported("torch.nested.masked_select", _WHY, _USE)

#: Elementwise methods a nested tensor applies to each component.
UNARY = ("abs", "neg", "relu", "sigmoid", "tanh", "sin", "cos", "exp", "log", "sqrt", "rsqrt",
         "sign", "square", "silu", "erf", "log1p", "expm1", "reciprocal", "clone", "detach",
         "float", "double", "half", "bfloat16", "cpu", "cuda", "to", "contiguous")


def _binary(op, name: str):
    def method(self, other):
        if isinstance(other, NestedTensor):
            if [tuple(c.shape) for c in self._components] != \
                    [tuple(c.shape) for c in other._components]:
                raise RuntimeError(f"{name}: nested tensors of different structure: component "
                                   f"shapes {self._shapes()} and {other._shapes()}")
            return NestedTensor([op(a, b) for a, b in zip(self._components, other._components)])
        if isinstance(other, numbers.Number):
            return NestedTensor([op(a, other) for a in self._components])
        if isinstance(other, Tensor):
            raise RuntimeError("Expected both self and other to be nested, but got a nested "
                               "self and non-nested other")
        raise RuntimeError(f"{name} does not support broadcasting when given a NestedTensor")
    return method


def _unary(name: str):
    def method(self, *args, **kwargs):
        return NestedTensor([getattr(c, name)(*args, **kwargs) for c in self._components])
    method.__name__ = name
    method.__doc__ = f"``{name}`` of each component."
    return method


class NestedTensor(Tensor):
    """A nested tensor: components with the same number of dimensions (see the module
    docstring). Make one with :func:`nested_tensor` or :func:`as_nested_tensor`.

    Args:
        components: the tensors.
        layout: ``tb.strided`` or ``tb.jagged``.
    """

    def __init__(self, components: list, layout=None):
        self._components = list(components)
        self._layout = layout or _layout.strided
        self._fresh_graph_fields()

    @property
    def _data(self):
        raise RuntimeError("this operation is not supported on a nested tensor: use unbind(), "
                           "to_padded_tensor() or the elementwise methods")

    @_data.setter
    def _data(self, value):
        raise RuntimeError("a nested tensor's storage cannot be replaced")

    def _shapes(self) -> list[tuple]:
        return [tuple(c.shape) for c in self._components]

    is_nested = property(lambda self: True, doc="True.")

    @property
    def layout(self):
        """``tb.strided`` (or ``tb.jagged`` when made so)."""
        return self._layout

    @property
    def dtype(self):
        """The components' dtype."""
        return self._components[0].dtype if self._components else _tensor([]).dtype

    @property
    def device(self):
        """The components' device."""
        return self._components[0].device if self._components else _tensor([]).device

    @property
    def requires_grad(self) -> bool:
        """Whether the components need gradients."""
        return any(c.requires_grad for c in self._components)

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        for c in self._components:
            c.requires_grad_(value)

    @property
    def is_leaf(self) -> bool:
        """True when every component is a leaf."""
        return all(c.is_leaf for c in self._components)

    @property
    def grad(self):
        """The components' gradients as a nested tensor (None before backward)."""
        grads = [c.grad for c in self._components]
        return None if any(g is None for g in grads) else NestedTensor(grads, self._layout)

    @grad.setter
    def grad(self, value) -> None:
        for i, c in enumerate(self._components):
            c.grad = None if value is None else value._components[i]

    def requires_grad_(self, requires_grad: bool = True) -> NestedTensor:
        """Make the components require grad.

        Args:
            requires_grad: the flag.
        """
        self.requires_grad = requires_grad
        return self

    def dim(self) -> int:
        """1 + the components' number of dimensions."""
        return 1 + (self._components[0].dim() if self._components else 0)

    ndim = property(dim, doc="The number of dimensions.")

    def size(self, dim=None):
        """The size of a regular dimension, as torch's nested ``size(dim)``.

        Args:
            dim: the dimension (required: a nested tensor has no single shape).

        Raises:
            RuntimeError: ``dim`` is None, or the components differ in that dimension.
        """
        if dim is None:
            raise RuntimeError("Internal error: NestedTensorImpl doesn't support sizes. Please "
                               "file an issue.")
        d = dim % self.dim()
        if d == 0:
            return len(self._components)
        sizes = {c.shape[d - 1] for c in self._components}
        if len(sizes) != 1:
            raise RuntimeError(f"Given dimension {dim} is irregular and does not have a size.")
        return sizes.pop()

    @property
    def shape(self):
        """Raises RuntimeError: a nested tensor has no single shape (torch's error)."""
        return self.size()

    def numel(self) -> int:
        """The total number of elements of the components."""
        return sum(c.numel() for c in self._components)

    def unbind(self, dim: int = 0) -> tuple:
        """The components (in the graph).

        Args:
            dim: 0.
        """
        if dim != 0:
            raise RuntimeError("unbind(): nested tensors can only be unbound along dimension 0")
        return tuple(self._components)

    def to_padded_tensor(self, padding: float, output_size=None) -> Tensor:
        """The components padded with ``padding`` to a common shape and stacked, as
        ``torch.Tensor.to_padded_tensor`` (differentiable).

        Args:
            padding: the fill value.
            output_size: the full padded shape (each size at least the largest component's).

        Raises:
            RuntimeError: ``output_size`` smaller than the components (torch's error).
        """
        from ._factories import full
        from ._ops.shape import cat, stack
        shapes = self._shapes()
        biggest = [max(s[i] for s in shapes) for i in range(self.dim() - 1)]
        if output_size is not None:
            output_size = [int(s) for s in output_size]
            if len(output_size) != self.dim() or output_size[0] != len(shapes) or \
                    any(o < b for o, b in zip(output_size[1:], biggest)):
                raise RuntimeError("Value in output_size is less than NestedTensor padded size. "
                                   "Truncation is not supported.")
            biggest = output_size[1:]
        padded = []
        for c in self._components:
            for d, want in enumerate(biggest):   # grow each dimension with a block of padding
                if c.shape[d] < want:
                    fill = list(c.shape)
                    fill[d] = want - c.shape[d]
                    c = cat([c, full(tuple(fill), padding, dtype=c.dtype, device=c.device)], d)
            padded.append(c)
        return stack(padded)

    __add__ = __radd__ = _binary(operator.add, "add")
    __sub__ = _binary(operator.sub, "sub")
    __rsub__ = _binary(lambda a, b: b - a, "sub")
    __mul__ = __rmul__ = _binary(operator.mul, "mul")
    __truediv__ = _binary(operator.truediv, "div")
    add, sub, mul, div = __add__, __sub__, __mul__, __truediv__

    def __neg__(self):
        return NestedTensor([-c for c in self._components], self._layout)

    def __repr__(self):
        inner = ",\n".join("  " + repr(c).replace("\n", "\n  ") for c in self._components)
        return f"nested_tensor([\n{inner}\n])"


for _name in UNARY:
    setattr(NestedTensor, _name, _unary(_name))


def nested_tensor(tensor_list, *, dtype=None, layout=None, device=None, requires_grad=False,
                  pin_memory=False) -> NestedTensor:
    """A nested tensor of copies of ``tensor_list`` (a new leaf), as
    ``torch.nested.nested_tensor``.

    Args:
        tensor_list: tensors (or nested lists of numbers) with the same number of dimensions.
        dtype: the dtype.
        layout: ``tb.strided`` (default) or ``tb.jagged``.
        device: the device.
        requires_grad: make the components leaves that need gradients.
        pin_memory: accepted.

    Raises:
        RuntimeError: components with different numbers of dimensions.
    """
    del pin_memory
    comps = []
    for t in tensor_list:
        t = t.detach().clone() if isinstance(t, Tensor) else _tensor(t, dtype=dtype)
        t = t.to(device=device or t.device, dtype=dtype or t.dtype)
        comps.append(t.requires_grad_(requires_grad))
    _check(comps)
    return NestedTensor(comps, layout)


def as_nested_tensor(ts, dtype=None, device=None, layout=None) -> NestedTensor:
    """A nested tensor of ``ts`` keeping their autograd history, as
    ``torch.nested.as_nested_tensor``.

    Args:
        ts: a list of tensors, or a tensor (its slices along dimension 0).
        dtype: the dtype.
        device: the device.
        layout: ``tb.strided`` or ``tb.jagged``.
    """
    if isinstance(ts, NestedTensor):
        return ts
    items = ts.unbind(0) if isinstance(ts, Tensor) else ts
    comps = [t.to(device=device or t.device, dtype=dtype or t.dtype) * 1 for t in items]
    _check(comps)
    return NestedTensor(comps, layout)


def _check(comps: list) -> None:
    dims = {c.dim() for c in comps}
    if len(dims) > 1:
        raise RuntimeError(f"All Tensors given to nested_tensor must have the same dimension. "
                           f"Got component shapes {[tuple(c.shape) for c in comps]}")


def to_padded_tensor(input: NestedTensor, padding: float, output_size=None) -> Tensor:  # noqa: A002
    """``input.to_padded_tensor(padding, output_size)`` (torch's function form).

    Args:
        input: a nested tensor.
        padding: the fill value.
        output_size: the padded shape, or None.
    """
    return input.to_padded_tensor(padding, output_size)


__all__ = ["NestedTensor", "as_nested_tensor", "masked_select", "narrow", "nested_tensor",
           "nested_tensor_from_jagged", "to_padded_tensor"]
