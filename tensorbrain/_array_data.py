"""Arrays from user data: ``tb.tensor``'s and ``Tensor()``'s dtype and device rules
(:func:`_array_from`: Python floats give the default dtype, ints int64, a CuPy array keeps its
GPU) and :func:`device_of`, the device an array lives on. Below the tensor: no Tensor here.
"""
from __future__ import annotations

import numpy as np

from . import _dtype, _xp
from ._device import CPU, META, as_device, device


def _array_on(data, dtype, dev: device):
    if dev.type == "cuda":
        cp = _xp.cupy()
        with cp.cuda.Device(dev.index if dev.index is not None else cp.cuda.runtime.getDevice()):
            return cp.asarray(data, dtype=dtype)
    return np.asarray(data, dtype=dtype)


def _array_from(data, dtype=None, device=None):
    """A new array holding a copy of ``data`` (not a tensor: callers pass its array), with
    ``tb.tensor``'s dtype and device rules."""
    dtype = _dtype.as_dtype(dtype)
    dev = as_device(device) if device is not None else (
        device_of(data) if _xp.is_cupy_array(data) else as_device(None))
    if dev.type == "meta":
        shaped = data if hasattr(data, "shape") else np.asarray(data)
        if dtype is None and shaped.dtype == np.float64 and not hasattr(data, "dtype"):
            dtype = _dtype.get_default_dtype()
        return _xp.meta_array(shaped.shape, dtype or shaped.dtype)
    if dtype is None and not hasattr(data, "dtype"):
        arr = np.asarray(_xp.to_numpy(data) if _xp.is_cupy_array(data) else data)
        if arr.dtype == np.float64:
            dtype = _dtype.get_default_dtype()  # Python floats -> float32, as in PyTorch
        elif arr.dtype == np.complex128:   # Python complex -> the default float's complex
            dtype = np.result_type(_dtype.get_default_dtype(), np.complex64)
        elif arr.dtype.kind == "i":
            dtype = _dtype.int64
        elif arr.dtype == object:
            raise TypeError(f"tb.tensor: could not infer a dtype for {type(data).__name__} data")
        data = arr
    arr = _array_on(data, dtype, dev)
    if arr is data:
        arr = arr.copy()
    return arr


def device_of(array) -> device:
    """The :class:`device` of a NumPy or CuPy array.

    Args:
        array: the array.

    Returns:
        device: ``cuda:N`` for a CuPy array, else ``cpu``.
    """
    if _xp.is_cupy_array(array):
        return device("cuda", array.device.id)
    if _xp.is_meta(array):
        return META
    return CPU
