"""``tb.nn.Parameter``: a Tensor that a Module registers as a learnable parameter.

A Parameter shares its array with the tensor it wraps (as ``torch.nn.Parameter`` shares storage),
so optimizers and collectives can keep working on ``param.data`` in place.

>>> import tensorbrain as tb
>>> p = tb.nn.Parameter(tb.zeros(2))
>>> p.requires_grad, isinstance(p, tb.Tensor)
(True, True)
"""
from __future__ import annotations

import numpy as np

from .. import _xp
from ..tensor import Tensor


class Parameter(Tensor):
    """A leaf tensor with ``requires_grad=True`` by default, registered by ``Module.__setattr__``."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = Tensor._wrap(np.empty((0,), dtype=np.float32))
        array = data.data if isinstance(data, Tensor) else _xp.get_array_module(data).asarray(data)
        if requires_grad and array.dtype.kind not in "fc":
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

    def __deepcopy__(self, memo):
        """``copy.deepcopy``: a new Parameter on a copy of the array (torch's: no ``.grad``)."""
        if id(self) not in memo:
            from .._ops._raw import raw
            memo[id(self)] = type(self)(raw(self).copy(), self.requires_grad)
        return memo[id(self)]

    def __reduce_ex__(self, proto):
        raise TypeError("Parameters are not picklable in TensorBrain; save a state_dict with "
                        "tb.save(model.state_dict(), path) instead")


class Buffer(Tensor):
    """Marks a tensor as a buffer when assigned to a Module attribute (``torch.nn.Buffer``)."""

    def __new__(cls, data, persistent=True):
        array = data.data if isinstance(data, Tensor) else _xp.get_array_module(data).asarray(data)
        b = Tensor.__new__(cls)
        b._init_from(array, False)
        b.persistent = persistent
        return b

    def __init__(self, data, persistent=True):
        pass
