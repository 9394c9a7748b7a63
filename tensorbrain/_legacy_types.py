"""torch's legacy typed tensor classes: ``torch.FloatTensor(...)``, ``torch.LongTensor(...)``,
``torch.cuda.FloatTensor``..., ``isinstance(x, torch.FloatTensor)``, ``x.type(torch.FloatTensor)``
and ``x.type()`` (``'torch.FloatTensor'``).

Each class is made by :class:`LegacyTensorType` from the table :data:`TYPES` (name -> dtype);
an instance check asks the tensor's dtype and device, as torch does, and calling the class makes
an ordinary :class:`~tensorbrain.tensor.Tensor`:

- ``FloatTensor()``: empty; ``FloatTensor(2, 3)`` or ``FloatTensor(tb.Size([2, 3]))``:
  uninitialised of that shape; ``FloatTensor([1, 2])`` (a list, tuple, array or tensor): that
  data in the class's dtype.
- ``torch.cuda.FloatTensor(...)``: the same on the current GPU (a clear error without one).

>>> import tensorbrain as tb
>>> x = tb.LongTensor([1, 2])
>>> x.dtype == tb.int64, isinstance(x, tb.LongTensor), isinstance(x, tb.FloatTensor)
(True, True, False)
>>> x.type(tb.FloatTensor).type()
'torch.FloatTensor'
"""
from __future__ import annotations

import numbers

import numpy as np

from . import _dtype
from ._factories import empty, tensor
from ._tensor_base import Size, TensorBase as Tensor

#: The classes' names and dtypes, as torch's.
TYPES = {
    "FloatTensor": _dtype.float32, "DoubleTensor": _dtype.float64, "HalfTensor": _dtype.float16,
    "BFloat16Tensor": _dtype.bfloat16, "ByteTensor": _dtype.uint8, "CharTensor": _dtype.int8,
    "ShortTensor": _dtype.int16, "IntTensor": _dtype.int32, "LongTensor": _dtype.int64,
    "BoolTensor": _dtype.bool_,
}
_NAME_OF = {np.dtype(d): n for n, d in TYPES.items()}


class LegacyTensorType(type):
    """The metaclass of the legacy classes: an instance check by dtype and device, and a call
    that builds a Tensor (torch's legacy constructor rules)."""

    dtype: np.dtype
    is_cuda: bool

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype == cls.dtype and obj.is_cuda == cls.is_cuda

    def __subclasscheck__(cls, sub) -> bool:
        return isinstance(sub, LegacyTensorType) and sub.dtype == cls.dtype and \
            sub.is_cuda == cls.is_cuda

    def __call__(cls, *args, device=None):
        dev = ("cuda" if cls.is_cuda else "cpu") if device is None else device
        if not args:
            return empty(0, dtype=cls.dtype, device=dev)
        if all(isinstance(a, numbers.Integral) and not isinstance(a, bool) for a in args):
            return empty(*args, dtype=cls.dtype, device=dev)        # FloatTensor(2, 3)
        if len(args) == 1 and isinstance(args[0], Size):
            return empty(*args[0], dtype=cls.dtype, device=dev)     # FloatTensor(x.size())
        if len(args) == 1:
            data = args[0]
            if isinstance(data, Tensor) and data.dtype != cls.dtype:
                raise TypeError(f"expected {cls.dtype} ({cls.__module__}.{cls.__name__}) but got "
                                f"{data.dtype}: convert with .to({cls.dtype}) or "
                                f".type({cls.__module__}.{cls.__name__}) first")
            return tensor(data, dtype=cls.dtype, device=dev)
        raise TypeError(f"{cls.__module__}.{cls.__name__}() got {len(args)} arguments that are "
                        f"neither sizes (ints) nor one sequence of data: {args!r}")

    def __repr__(cls) -> str:
        return f"<class '{cls.__module__}.{cls.__name__}'>"


def _make(name: str, dtype, cuda: bool) -> LegacyTensorType:
    module = "tensorbrain.cuda" if cuda else "tensorbrain"
    doc = (f"``torch{module[len('tensorbrain'):]}.{name}``: the legacy class of {'CUDA' if cuda else 'CPU'} tensors of dtype "
           f"{np.dtype(dtype)}; ``isinstance`` checks a tensor's dtype and device, calling it "
           f"makes a Tensor (see ``tensorbrain/_legacy_types.py``).")
    cls = LegacyTensorType(name, (), {"__doc__": doc, "__module__": module})
    cls.dtype, cls.is_cuda = np.dtype(dtype), cuda
    return cls


#: ``torch.FloatTensor``... (``tb.FloatTensor``...).
CPU_TYPES = {name: _make(name, dt, False) for name, dt in TYPES.items()}
#: ``torch.cuda.FloatTensor``... (``tb.cuda.FloatTensor``...).
CUDA_TYPES = {name: _make(name, dt, True) for name, dt in TYPES.items()}


def type_name(t: Tensor) -> str:
    """``t.type()``: torch's name of the tensor's legacy class, e.g. ``'torch.cuda.LongTensor'``.

    Args:
        t: the tensor.
    """
    name = _NAME_OF.get(np.dtype(t.dtype))
    if name is None:   # complex: torch has no legacy class for them, but names one
        name = {"complex64": "ComplexFloatTensor", "complex128": "ComplexDoubleTensor"}.get(
            str(t.dtype), f"{t.dtype}Tensor")
    return f"torch.{'cuda.' if t.is_cuda else ''}{name}"


def resolve(spec):
    """A ``type(...)`` argument as ``(dtype, device or None)``: a legacy class or its name
    (``'torch.cuda.FloatTensor'``), or a dtype.

    Args:
        spec: the argument.

    Raises:
        TypeError: a string that names no legacy class and no dtype.
    """
    if isinstance(spec, LegacyTensorType):
        return spec.dtype, ("cuda" if spec.is_cuda else "cpu")
    if isinstance(spec, str) and spec.startswith("torch."):
        short = spec[len("torch."):]
        cuda = short.startswith("cuda.")
        short = short[len("cuda."):] if cuda else short
        if short in TYPES:
            return np.dtype(TYPES[short]), ("cuda" if cuda else "cpu")
        raise TypeError(f"invalid type: {spec!r} (expected a legacy class name such as "
                        f"'torch.FloatTensor', or a dtype)")
    return _dtype.as_dtype(spec), None


__all__ = ["CPU_TYPES", "CUDA_TYPES", "LegacyTensorType", "TYPES", "resolve", "type_name"]
