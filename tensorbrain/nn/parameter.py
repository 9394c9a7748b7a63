"""``tb.nn.Parameter``: a Tensor that a Module registers as a learnable parameter.

A Parameter shares its array with the tensor it wraps (as ``torch.nn.Parameter`` shares storage),
so optimizers and collectives can keep working on ``param._data`` in place.

>>> import tensorbrain as tb
>>> p = tb.nn.Parameter(tb.zeros(2))
>>> p.requires_grad, isinstance(p, tb.Tensor)
(True, True)
"""
from __future__ import annotations

import numpy as np

from .. import _dtype, _xp
from ..tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor with ``requires_grad=True`` by default, registered by ``Module.__setattr__``."""

    #: FSDP's parameters: ``(lo, hi, process groups)`` slices that are shards (clip_grad_norm_)
    _grad_norm_parts: list[tuple]

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = Tensor._wrap(np.empty((0,), dtype=np.float32))
        if getattr(data, "_spec", None) is not None:  # a DTensor: stay one (as torch does)
            return type(data)._as_parameter(data, requires_grad)
        array = data._data if isinstance(data, Tensor) else _xp.get_array_module(data).asarray(data)
        if requires_grad and not _dtype.is_float_or_complex(array.dtype):
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients "
                               f"(got {array.dtype}); pass requires_grad=False for integer "
                               f"parameters")
        p = Tensor.__new__(cls)
        p._init_from(array, requires_grad)
        if isinstance(data, Tensor):
            p._version = data._version  # the same memory: one version counter, as a view would
        return p

    def __init__(self, data=None, requires_grad=True):
        pass  # everything happens in __new__ (Tensor.__init__ would copy the data)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Buffer(Tensor):
    """Marks a tensor as a buffer when assigned to a Module attribute (``torch.nn.Buffer``)."""

    def __new__(cls, data=None, persistent=True):
        if data is None:  # unpickling (copy.deepcopy) builds the object first, then its state
            data = np.empty((0,), dtype=np.float32)
        array = data._data if isinstance(data, Tensor) else _xp.get_array_module(data).asarray(data)
        b = Tensor.__new__(cls)
        b._init_from(array, False)
        b.persistent = persistent
        return b

    def __init__(self, data=None, persistent=True):
        pass


class UninitializedParameter(Parameter):
    """A parameter whose shape is not known yet (a lazy module's, as
    ``torch.nn.parameter.UninitializedParameter``): ``materialize(shape)`` turns this same
    object into an ordinary :class:`Parameter`, so optimizers holding it stay valid.

    Args:
        requires_grad: whether the parameter will require grad.
        device: where it will live.
        dtype: its dtype.
    """

    def __new__(cls, requires_grad=True, device=None, dtype=None):
        p = Parameter.__new__(cls, None, False)
        p.requires_grad = requires_grad
        p.__dict__["_lazy"] = (device, dtype)
        return p

    def __init__(self, requires_grad=True, device=None, dtype=None):
        pass

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the parameter ``shape`` (uninitialised values) and make it a Parameter.

        Args:
            shape: the shape.
            device: the device (default the one given at construction).
            dtype: the dtype (default the one given, else the default dtype).
        """
        from .._factories import empty
        d0, t0 = self.__dict__.pop("_lazy", (None, None))
        self._data = empty(*shape, dtype=dtype or t0 or _dtype.get_default_dtype(),
                           device=device or d0)._data
        self.__class__ = Parameter  # type: ignore[assignment]  # materialised, as torch's

    def __repr__(self):
        return "<UninitializedParameter>"


class UninitializedBuffer(Buffer):
    """A buffer whose shape is not known yet (``torch.nn.parameter.UninitializedBuffer``).

    Args:
        requires_grad: accepted.
        device: where it will live.
        dtype: its dtype.
    """

    def __new__(cls, requires_grad=False, device=None, dtype=None):
        b = Buffer.__new__(cls, None)
        b.__dict__["_lazy"] = (device, dtype)
        return b

    def __init__(self, requires_grad=False, device=None, dtype=None):
        pass

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the buffer ``shape`` and make it an ordinary tensor buffer.

        Args:
            shape: the shape.
            device: the device.
            dtype: the dtype.
        """
        from .._factories import empty
        d0, t0 = self.__dict__.pop("_lazy", (None, None))
        self._data = empty(*shape, dtype=dtype or t0 or _dtype.get_default_dtype(),
                           device=device or d0)._data
        self.__class__ = Buffer  # type: ignore[assignment]  # materialised, as torch's
