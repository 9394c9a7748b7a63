"""Lazy layers (``torch.nn.LazyLinear``, ``LazyConv2d``, ``LazyBatchNorm2d``...): the input
size is read from the first input. Until then the parameters are
:class:`~tensorbrain.nn.parameter.UninitializedParameter`; the first forward builds the
ordinary layer with that size, materialises the same parameter objects with its initial values
(so an optimizer made before it keeps working) and turns the module into that layer
(``type(m)`` becomes ``Linear``...), as torch's. The table :data:`LAZY` lists them.
"""
from __future__ import annotations

from ...autograd import grad_mode
from ..parameter import UninitializedBuffer, UninitializedParameter
from . import batchnorm, conv, instancenorm, linear
from .module import Module

#: lazy class name -> (the class it becomes, which input dimension is its size, the
#: number of dimensions of a batched input (None: always the last dimension)).
LAZY = {
    "LazyLinear": (linear.Linear, None),
    "LazyConv1d": (conv.Conv1d, 3), "LazyConv2d": (conv.Conv2d, 4), "LazyConv3d": (conv.Conv3d, 5),
    "LazyConvTranspose1d": (conv.ConvTranspose1d, 3),
    "LazyConvTranspose2d": (conv.ConvTranspose2d, 4),
    "LazyConvTranspose3d": (conv.ConvTranspose3d, 5),
    "LazyBatchNorm1d": (batchnorm.BatchNorm1d, 0), "LazyBatchNorm2d": (batchnorm.BatchNorm2d, 0),
    "LazyBatchNorm3d": (batchnorm.BatchNorm3d, 0),
    "LazyInstanceNorm1d": (instancenorm.InstanceNorm1d, 3),
    "LazyInstanceNorm2d": (instancenorm.InstanceNorm2d, 4),
    "LazyInstanceNorm3d": (instancenorm.InstanceNorm3d, 5),
}


class LazyModuleMixin(Module):
    """The shared behaviour (see the module docstring). Subclasses set ``cls_to_become`` and
    ``_batched_ndim``; the constructor takes the layer's arguments without its input size."""

    cls_to_become: type = Module
    _batched_ndim: int | None = None

    def __init__(self, *args, **kwargs):
        super().__init__()
        self._lazy_args = (args, kwargs)
        probe = self.cls_to_become(*self._probe_args(args, kwargs), **kwargs)
        for name, p in probe._parameters.items():
            self.register_parameter(name, None if p is None else UninitializedParameter(
                p.requires_grad))
        for name, b in probe._buffers.items():
            self.register_buffer(name, None if b is None else UninitializedBuffer())

    def _probe_args(self, args, kwargs):
        # the smallest input size the layer accepts (a grouped convolution needs `groups`)
        return (kwargs.get("groups", 1), *args)

    def has_uninitialized_params(self) -> bool:
        """Whether the first forward has not happened yet."""
        return any(isinstance(p, UninitializedParameter) for p in self._parameters.values())

    def initialize_parameters(self, input) -> None:
        """Build the real layer for ``input``'s size and take its parameters and buffers.

        Args:
            input: the first input.
        """
        args, kwargs = self._lazy_args
        nd = self._batched_ndim
        size = input.shape[-1] if nd is None else (
            input.shape[1] if nd == 0 or input.ndim == nd else input.shape[0])
        real = self.cls_to_become(size, *args, **kwargs)
        with grad_mode.no_grad():
            for name, p in real._parameters.items():
                mine = self._parameters.get(name)
                if isinstance(mine, UninitializedParameter):
                    mine.materialize(tuple(p.shape), dtype=p.dtype)
                    mine._data[...] = p._data
                    real._parameters[name] = mine
            for name, b in real._buffers.items():
                mine = self._buffers.get(name)
                if isinstance(mine, UninitializedBuffer) and b is not None:
                    mine.materialize(tuple(b.shape), dtype=b.dtype)
                    mine._data[...] = b._data
                    real._buffers[name] = mine
        state = dict(real.__dict__)
        state["training"] = self.training
        for key in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks"):
            if key in self.__dict__:
                state[key] = self.__dict__[key]
        self.__dict__.clear()
        self.__dict__.update(state)
        self.__class__ = type(real)

    def forward(self, input, *args, **kwargs):
        if self.has_uninitialized_params():
            self.initialize_parameters(input)
        return self.forward(input, *args, **kwargs)


def _make(name, target, batched_ndim):
    doc = (f"``{target.__name__}`` whose input size is read from the first input "
           f"(``torch.nn.{name}``); it takes ``{target.__name__}``'s arguments without that size.")
    return type(name, (LazyModuleMixin,), {"cls_to_become": target,
                                           "_batched_ndim": batched_ndim, "__doc__": doc,
                                           "__module__": __name__})


for _name, (_target, _nd) in LAZY.items():
    globals()[_name] = _make(_name, _target, _nd)
del _name, _target, _nd

__all__ = ["LAZY", "LazyModuleMixin", *sorted(LAZY)]
