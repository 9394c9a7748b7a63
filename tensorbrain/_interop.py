"""Interop with other array libraries: DLPack both ways, NumPy ufuncs, foreign state-dict values.

The :class:`~tensorbrain.Tensor` methods ``__dlpack__``, ``__dlpack_device__`` and
``__array_ufunc__`` delegate here, so ``tensor.py`` stays about tensors.

- DLPack: a Tensor exports its NumPy/CuPy array's own capsule (zero-copy: torch, NumPy, CuPy and
  JAX see the same memory); :func:`from_dlpack` imports any object with ``__dlpack__`` (or a
  legacy capsule) as a Tensor sharing its memory.
- NumPy ufuncs: ``np.exp(t)``, ``np.ones(3) + t`` return Tensors. A ufunc that TensorBrain has
  an op for goes through that op, so autograd sees it; any other ufunc on a tensor that requires
  grad raises instead of silently dropping the graph.
- :func:`to_array`: the array behind a state-dict value (a Tensor, a NumPy/CuPy array, a torch
  tensor, a Python number or list), so ``load_state_dict`` accepts torch's state dicts.

>>> import numpy as np, tensorbrain as tb
>>> t = tb.tensor([1.0, 2.0])
>>> type(np.ones(2) + t).__name__
'Tensor'
>>> a = np.from_dlpack(t); a[0] = 5.0; t.tolist()
[5.0, 2.0]
"""
from __future__ import annotations

import numpy as np

from . import _xp
from ._tensor_base import TensorBase as Tensor

# DLPack device types (dlpack.h DLDeviceType)
_KDLCPU, _KDLCUDA, _KDLCUDAHOST, _KDLCUDAMANAGED = 1, 2, 3, 13


# ***** DLPack *****
def dlpack(tensor, stream=None, max_version=None, dl_device=None, copy=None):
    """``Tensor.__dlpack__``: the capsule of the tensor's array (the memory is shared)."""
    if tensor.requires_grad:
        raise RuntimeError("Can't export tensors that require gradient, use tensor.detach() "
                           "(as torch)")
    kwargs = {}
    if stream is not None:
        kwargs["stream"] = stream
    if max_version is not None:
        kwargs["max_version"] = max_version
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    if copy is not None:
        kwargs["copy"] = copy
    if tensor._data.dtype == _bf16() and not _xp.is_cupy_array(tensor._data):
        # NumPy's DLPack knows no bfloat16 (ml_dtypes' dtype is opaque to it): export the same
        # memory as uint16 and relabel the capsule's dtype as DLPack's bfloat16
        return _relabel(tensor._data.view(np.uint16).__dlpack__(**kwargs), _KDLUINT, _KDLBFLOAT)
    return tensor._data.__dlpack__(**kwargs)


def dlpack_device(tensor):
    """``Tensor.__dlpack_device__``: ``(device_type, device_id)`` of the tensor's memory."""
    return tensor._data.__dlpack_device__()


def from_dlpack(ext_tensor):
    """A Tensor sharing memory with ``ext_tensor`` (anything with ``__dlpack__``, or a capsule).

    Args:
        ext_tensor: a torch/CuPy/JAX tensor, a NumPy array, a TensorBrain Tensor, or a legacy
            DLPack capsule (``torch.utils.dlpack.to_dlpack(x)``).

    Returns:
        Tensor: on the CPU for host memory, on the GPU (a CuPy array) for CUDA memory. Writes
        through either side are seen by the other.

    Raises:
        TypeError: ``ext_tensor`` supports neither ``__dlpack__`` nor is a capsule.
        RuntimeError: CUDA memory while CuPy is not usable here; another device type.

    Example:
        >>> import numpy as np, tensorbrain as tb
        >>> a = np.arange(3.0)
        >>> t = tb.from_dlpack(a)
        >>> t[0] = 9.0
        >>> a.tolist()
        [9.0, 1.0, 2.0]
    """
    if isinstance(ext_tensor, Tensor):
        return Tensor._wrap(ext_tensor._data)
    if type(ext_tensor).__name__ == "PyCapsule":
        return Tensor._wrap(_from_capsule(ext_tensor))
    if not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ (a torch/CuPy/JAX tensor, "
                        f"a NumPy array) or a DLPack capsule, got {type(ext_tensor).__name__}")
    device_type = _KDLCPU
    if hasattr(ext_tensor, "__dlpack_device__"):
        device_type = int(ext_tensor.__dlpack_device__()[0])
    if device_type in (_KDLCUDA, _KDLCUDAMANAGED):
        return Tensor._wrap(_xp.cupy().from_dlpack(ext_tensor))
    if device_type in (_KDLCPU, _KDLCUDAHOST):
        try:  # a versioned capsule carries the read-only flag; NumPy makes a legacy one read-only
            capsule = ext_tensor.__dlpack__(max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0
            capsule = ext_tensor.__dlpack__()
        return Tensor._wrap(_host_from_dlpack(capsule, device_type))
    raise RuntimeError(f"from_dlpack: DLPack device type {device_type} is not supported "
                       f"(TensorBrain holds CPU (1) and CUDA (2) memory)")


class _Capsule:
    """Wraps a legacy capsule so ``np.from_dlpack``/``cupy.from_dlpack`` can take it."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **_):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def _from_capsule(capsule):
    # The capsule does not say its device without parsing it; try the host first (NumPy
    # refuses device memory with a clear error), then CuPy.
    try:
        return _host_from_dlpack(capsule, _KDLCPU)
    except (BufferError, RuntimeError, ValueError) as host_error:
        if not _xp.cuda_available():
            raise RuntimeError(f"from_dlpack: the capsule is not host memory ({host_error}) and "
                               f"CUDA is not usable here") from None
    return _xp.cupy().from_dlpack(capsule)


# ***** bfloat16 over DLPack *****
# DLPack has a bfloat16 code (kDLBfloat); NumPy does not read or write it. A bfloat16 tensor
# crosses as the capsule of its uint16 view with the code byte rewritten (and back on import), the
# only field that differs. The code sits at a fixed offset of the DLTensor (dlpack.h): after
# data (8 bytes), device (8) and ndim (4); a versioned capsule has 32 bytes before its DLTensor.
_KDLUINT, _KDLBFLOAT = 1, 4
_CODE_OFFSET = {b"dltensor": 20, b"dltensor_versioned": 32 + 20}


def _bf16():
    from ._dtype import bfloat16
    return bfloat16


def _code_byte(capsule):
    """The DLTensor's dtype code of an unconsumed capsule, as a ctypes byte to read or write."""
    import ctypes
    api = ctypes.pythonapi
    api.PyCapsule_GetName.restype, api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    name = api.PyCapsule_GetName(capsule)
    if name not in _CODE_OFFSET:
        raise BufferError(f"from_dlpack: a capsule named {name!r} is not an unconsumed DLPack "
                          f"tensor (it can be consumed once)")
    return ctypes.c_uint8.from_address(api.PyCapsule_GetPointer(capsule, name) + _CODE_OFFSET[name])


def _relabel(capsule, old: int, new: int):
    code = _code_byte(capsule)
    if code.value != old:
        raise BufferError(f"DLPack: expected dtype code {old}, the capsule says {code.value}")
    code.value = new
    return capsule


def _host_from_dlpack(capsule, device_type):
    """A NumPy array on a host capsule; bfloat16 (which NumPy refuses) comes in as uint16 and is
    viewed as ml_dtypes' bfloat16."""
    bf16 = _code_byte(capsule).value == _KDLBFLOAT
    if bf16:
        _relabel(capsule, _KDLBFLOAT, _KDLUINT)
    arr = np.from_dlpack(_Capsule(capsule, (device_type, 0)))
    return arr.view(_bf16()) if bf16 else arr


def to_dlpack(tensor):
    """A legacy DLPack capsule of ``tensor`` (``torch.utils.dlpack.to_dlpack``).

    Prefer passing the Tensor itself to the consumer's ``from_dlpack``; the capsule can be
    consumed once.
    """
    return dlpack(tensor)


# ***** NumPy ufuncs *****
def _ufunc_ops():
    from ._ops import elementwise as E
    from ._ops import shape as S
    return {
        np.add: E.add, np.subtract: E.sub, np.multiply: E.mul, np.true_divide: E.div,
        np.power: E.pow, np.negative: E.neg, np.positive: lambda a: a,
        np.maximum: E.maximum, np.minimum: E.minimum, np.matmul: S.matmul,
        np.exp: E.exp, np.log: E.log, np.sqrt: E.sqrt, np.absolute: E.abs, np.sign: E.sign,
        np.sin: E.sin, np.cos: E.cos, np.tanh: E.tanh, np.log1p: E.log1p, np.expm1: E.expm1,
        np.square: E.square, np.reciprocal: E.reciprocal,
        np.less: E.lt_, np.greater: E.gt_, np.less_equal: E.le_, np.greater_equal: E.ge_,
        np.equal: E.eq_, np.not_equal: E.ne_,
        np.floor: E.floor, np.ceil: E.ceil, np.trunc: E.trunc, np.isnan: E.isnan,
        np.isinf: E.isinf, np.isfinite: E.isfinite, np.logical_not: E.logical_not,
    }


_OPS = None


def array_ufunc(tensor, ufunc, method, *inputs, **kwargs):
    """``Tensor.__array_ufunc__``: NumPy ufuncs on Tensors return Tensors.

    ``__call__`` of a ufunc TensorBrain has an op for runs that op (autograd records it). Other
    ufuncs and methods (``reduce``, ``accumulate``, ``out=``) run on the arrays and wrap the
    result; on a tensor that requires grad (with grad mode on) they raise, since the result
    could not carry the graph.
    """
    global _OPS
    from .autograd import is_grad_enabled
    if _OPS is None:
        _OPS = _ufunc_ops()
    op = _OPS.get(ufunc) if method == "__call__" and not kwargs else None
    if op is not None:
        args = [x if isinstance(x, Tensor) else _foreign(x, tensor) for x in inputs]
        return op(*args)
    tracked = [x for x in list(inputs) + list(kwargs.get("out", ()))
               if isinstance(x, Tensor) and x.requires_grad]
    if tracked and is_grad_enabled():
        call = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
        raise TypeError(f"{call} on a Tensor that requires grad: TensorBrain has no op for it, so "
                        f"the result could not carry the autograd graph. Use the tb op (tb.*), "
                        f"or call it on tensor.detach() / under tb.no_grad()")
    raw = [x._data if isinstance(x, Tensor) else x for x in inputs]
    if "out" in kwargs:
        kwargs["out"] = tuple(x._data if isinstance(x, Tensor) else x for x in kwargs["out"])
    result = getattr(ufunc, method)(*raw, **kwargs)
    if method == "at":
        return None
    if isinstance(result, tuple):
        return tuple(_wrap_result(r) for r in result)
    return _wrap_result(result)


def _foreign(x, like):
    """A non-Tensor ufunc operand: arrays become Tensors, Python scalars stay scalars."""
    if isinstance(x, (int, float, bool, complex)):
        return x
    xp = _xp.get_array_module(like._data)
    return Tensor._wrap(xp.asarray(x))


def _wrap_result(result):
    if isinstance(result, Tensor):
        return result
    if isinstance(result, np.generic):
        result = np.asarray(result)
    return Tensor._wrap(result)


# ***** foreign values in state dicts *****
def to_array(value, what="value"):
    """The NumPy/CuPy array behind ``value`` for copying into a Tensor.

    Accepts Tensors, NumPy and CuPy arrays, NumPy scalars, Python numbers and lists, and torch
    tensors (on any device; a bfloat16 one stays bfloat16 on the CPU and becomes float32 on a
    GPU, since CuPy has no bfloat16).

    Raises:
        TypeError: any other type, naming it and ``what``.
    """
    if isinstance(value, Tensor):
        return value._data
    if isinstance(value, np.ndarray) or _xp.is_cupy_array(value):
        return value
    if isinstance(value, (np.generic, int, float, bool, list, tuple)):
        return np.asarray(value)
    module = type(value).__module__ or ""
    if module.startswith("torch") and hasattr(value, "detach"):
        return _torch_to_array(value)
    raise TypeError(f"{what}: unsupported type {type(value).__module__}.{type(value).__name__}; "
                    f"expected a tensorbrain Tensor, a NumPy/CuPy array, a torch tensor or a "
                    f"number")


def _torch_to_array(value):
    import torch
    value = value.detach()
    if value.dtype == torch.bfloat16:
        if not value.is_cuda:  # the same bits, viewed as ml_dtypes' bfloat16: stays bfloat16
            return value.view(torch.int16).numpy().view(_bf16())
        value = value.float()  # CuPy has no bfloat16
    if value.is_cuda and _xp.cuda_available():
        return _xp.cupy().from_dlpack(value.contiguous())
    return value.cpu().numpy()
