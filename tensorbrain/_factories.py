"""The factory functions: ``tb.tensor``, ``tb.zeros``, ``tb.randn``, ``tb.arange``, ... (as torch's).

Each builds a new :class:`~tensorbrain.tensor.Tensor` from nothing but a shape, a value or data;
they are re-exported by ``tensorbrain`` and ``tensorbrain.tensor``.
"""
from __future__ import annotations

import numbers

import numpy as np

from . import _dtype, _random, _xp
from ._device import as_device
from ._ops import shape as S
from ._array_data import _array_from, device_of  # noqa: F401  (device_of: re-exported)
from ._tensor_base import TensorBase as Tensor


def _infer_dtype(data):
    if isinstance(data, bool):
        return _dtype.bool_
    if isinstance(data, numbers.Integral):
        return _dtype.int64
    if isinstance(data, numbers.Real):
        return _dtype.get_default_dtype()
    return None




def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new tensor holding a copy of ``data`` (nested lists, scalars, arrays, tensors).

    Args:
        data: the values.
        dtype: the dtype; None infers it (Python floats give the default dtype, Python ints
            int64).
        device: the device; None keeps a CuPy array's device, else CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.

    Raises:
        TypeError: no dtype can be inferred for ``data``.

    >>> import tensorbrain as tb
    >>> tb.tensor([[1.0, 2.0]]).dtype, tb.tensor([1, 2]).dtype
    (dtype('float32'), dtype('int64'))
    """
    t = Tensor._wrap(_array_from(data._data if isinstance(data, Tensor) else data, dtype, device))
    if requires_grad:
        t.requires_grad_(True)
    return t


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, without a copy where possible (as ``torch.as_tensor``).

    A tensor is returned as is, a CPU NumPy array of the right dtype is wrapped (memory shared);
    anything else is copied as by :func:`tensor`.

    Args:
        data: a tensor, array or array-like data.
        dtype: the dtype wanted; None keeps or infers it.
        device: the device wanted; None keeps it.

    Returns:
        Tensor: the tensor.
    """
    if isinstance(data, Tensor) and dtype is None and device is None:
        return data
    if isinstance(data, np.ndarray) and device in (None, "cpu") and (dtype is None or np.dtype(dtype) == data.dtype):
        return Tensor._wrap(data)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(array: np.ndarray) -> Tensor:
    """A tensor sharing memory with ``array`` (changes to one show in the other).

    Args:
        array: a NumPy array.

    Returns:
        Tensor: the tensor.

    Raises:
        TypeError: ``array`` is not a ``numpy.ndarray``.
    """
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects a numpy.ndarray, got {type(array).__name__}")
    return Tensor._wrap(array)


def _full(shape, value, dtype, device, requires_grad):
    shape = S._shape_arg(shape)
    dev = as_device(device)
    dtype = _dtype.as_dtype(dtype)
    if dtype is None:
        dtype = _infer_dtype(value) if not isinstance(value, float) else _dtype.get_default_dtype()
    xp = _xp.cupy() if dev.type == "cuda" else np
    if dev.type == "cuda":
        with xp.cuda.Device(dev.index if dev.index is not None else xp.cuda.runtime.getDevice()):
            arr = xp.full(shape, value, dtype=dtype)
    elif dev.type == "meta":
        arr = _xp.meta_array(shape, dtype)
    else:
        arr = np.full(shape, value, dtype=dtype)
    t = Tensor._wrap(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def zeros(*size, dtype=None, device=None, requires_grad=False):
    """A tensor filled with zeros.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype (float32).
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.zeros(2, 3).shape
        tb.Size([2, 3])
    """
    return _full(size, 0.0, dtype or _dtype.get_default_dtype(), device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    """A tensor filled with ones.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype (float32).
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.
    """
    return _full(size, 1.0, dtype or _dtype.get_default_dtype(), device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    """A tensor whose values are not initialised.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype (float32).
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.
    """
    shape = S._shape_arg(size)
    dev = as_device(device)
    dtype = _dtype.as_dtype(dtype) or _dtype.get_default_dtype()
    if dev.type == "meta":
        t = Tensor._wrap(_xp.meta_array(shape, dtype))
    else:
        xp = _xp.cupy() if dev.type == "cuda" else np
        t = Tensor._wrap(xp.empty(shape, dtype=dtype))
    if requires_grad:
        t.requires_grad_(True)
    return t


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor filled with ``fill_value``.

    Args:
        size: the shape (a sequence of ints).
        fill_value: the value.
        dtype: the dtype; None infers it from ``fill_value`` (floats give the default dtype).
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.
    """
    return _full(size, fill_value, dtype, device, requires_grad)


def _like(fn):
    def like(t, dtype=None, device=None, requires_grad=False, **kw):
        if getattr(t, "_spec", None) is not None:   # a DTensor: same layout (see its _like)
            return t._like(fn, dict(kw, dtype=dtype or t.dtype, device=device or t.device,
                                    requires_grad=requires_grad))
        return fn(*t.shape, **kw, dtype=dtype or t.dtype, device=device or t.device,
                  requires_grad=requires_grad)
    like.__name__ = like.__qualname__ = fn.__name__ + "_like"
    like.__doc__ = (f"A tensor like ``tb.{fn.__name__}`` of ``t``'s shape, and its dtype and "
                    f"device unless given, as ``torch.{fn.__name__}_like``.\n\nArgs:\n"
                    f"    t: the tensor whose shape (and dtype, device) to take.\n"
                    f"    dtype: the dtype; default ``t.dtype``.\n"
                    f"    device: the device; default ``t.device``.\n"
                    f"    requires_grad: whether autograd records operations on the result.\n"
                    f"    **kw: further keyword arguments of ``tb.{fn.__name__}``.\n\n"
                    f"Returns:\n    Tensor: the new tensor.\n")
    return like


zeros_like = _like(zeros)
ones_like = _like(ones)
empty_like = _like(empty)


def full_like(t, fill_value, dtype=None, device=None, requires_grad=False):
    """A tensor of ``t``'s shape filled with ``fill_value``.

    Args:
        t: the tensor whose shape (and, by default, dtype and device) is used.
        fill_value: the value.
        dtype: the dtype; None for ``t``'s.
        device: the device; None for ``t``'s.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the new tensor.
    """
    if getattr(t, "_spec", None) is not None:   # a DTensor: same layout (see its _like)
        return t._like(lambda *shape, **kw: full(shape, fill_value, **kw),
                       dict(dtype=dtype or t.dtype, device=device or t.device,
                            requires_grad=requires_grad))
    return full(t.shape, fill_value, dtype=dtype or t.dtype, device=device or t.device,
                requires_grad=requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    """The values ``start, start + step, ...`` below ``end``, as ``torch.arange``.

    ``arange(end)`` counts from 0.

    Args:
        start: the first value (or ``end`` when ``end`` is None).
        end: the bound, not included.
        step: the difference between neighbours.
        dtype: the dtype; None gives int64 for integer arguments, else the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: a 1-D tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.arange(0, 1, 0.25).tolist()
        [0.0, 0.25, 0.5, 0.75]
    """
    if end is None:
        start, end = 0, start
    if dtype is None:
        dtype = _dtype.int64 if all(isinstance(v, numbers.Integral) for v in (start, end, step)) \
            else _dtype.get_default_dtype()
    t = tensor(np.arange(start, end, step, dtype=np.float64 if np.dtype(dtype).kind == "f" else None)
               .astype(dtype), device=device)
    return t.requires_grad_(True) if requires_grad else t


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    """``steps`` evenly spaced values from ``start`` to ``end``, both included.

    Args:
        start: the first value.
        end: the last value.
        steps: the number of values.
        dtype: the dtype; None for the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: a 1-D tensor.
    """
    t = tensor(np.linspace(start, end, steps).astype(dtype or _dtype.get_default_dtype()), device=device)
    return t.requires_grad_(True) if requires_grad else t


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    """A 2-D tensor with ones on the diagonal and zeros elsewhere.

    Args:
        n: the number of rows.
        m: the number of columns; None for ``n``.
        dtype: the dtype; None for the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the ``n x m`` tensor.
    """
    t = tensor(np.eye(n, m, dtype=dtype or _dtype.get_default_dtype()), device=device)
    return t.requires_grad_(True) if requires_grad else t


def rand(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """A tensor of samples of the uniform distribution on ``[0, 1)``.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.
        generator: a :class:`Generator`; None for the default one (see :func:`manual_seed`).

    Returns:
        Tensor: the new tensor.
    """
    t = empty(*size, dtype=dtype, device=device)
    t.uniform_(0.0, 1.0, generator=generator)
    return t.requires_grad_(True) if requires_grad else t


def randn(*size, dtype=None, device=None, requires_grad=False, generator=None):
    """A tensor of samples of the standard normal distribution.

    Args:
        *size: the shape, as ints or one sequence of ints.
        dtype: the dtype; None for the default dtype.
        device: the device; default CPU.
        requires_grad: whether autograd records operations on the result.
        generator: a :class:`Generator`; None for the default one (see :func:`manual_seed`).

    Returns:
        Tensor: the new tensor.
    """
    t = empty(*size, dtype=dtype, device=device)
    t.normal_(0.0, 1.0, generator=generator)
    return t.requires_grad_(True) if requires_grad else t


def randint(low, high=None, size=(), dtype=None, device=None, generator=None, requires_grad=False):
    """Integers drawn uniformly from ``[low, high)``: ``randint(high, size)`` or
    ``randint(low, high, size)``, as torch.

    Args:
        low: the lowest value (or ``high`` when ``high`` is None or a shape).
        high: one above the highest value.
        size: the shape.
        dtype: the dtype; None for int64.
        device: the device; default CPU.
        generator: a :class:`Generator`; None for the default one.
        requires_grad: accepted for torch compatibility (integer tensors cannot require grad).

    Returns:
        Tensor: the new tensor.
    """
    if isinstance(high, (tuple, list)) and size == ():
        low, high, size = 0, low, high  # randint(high, size)
    if high is None:
        low, high = 0, low
    arr = _random.integers(low, high, tuple(size), generator)
    return tensor(arr.astype(dtype or _dtype.int64), device=device)


def randperm(n, dtype=None, device=None, generator=None):
    """A random permutation of ``0 .. n-1``.

    Args:
        n: the number of values.
        dtype: the dtype; None for int64.
        device: the device; default CPU.
        generator: a :class:`Generator`; None for the default one.

    Returns:
        Tensor: a 1-D tensor.
    """
    return tensor(_random.permutation(n, generator).astype(dtype or _dtype.int64), device=device)


def rand_like(t, **kw):
    """A tensor of ``t``'s shape with samples of the uniform distribution on ``[0, 1)``.

    Args:
        t: the tensor whose shape (and, by default, dtype and device) is used.
        **kw: ``dtype=`` and ``device=`` override ``t``'s.

    Returns:
        Tensor: the new tensor.
    """
    if getattr(t, "_spec", None) is not None:   # a DTensor: same layout (see its _like)
        return t._like(rand, dict(dtype=kw.get("dtype", t.dtype),
                                 device=kw.get("device", t.device)), random=True)
    return rand(*t.shape, dtype=kw.get("dtype", t.dtype), device=kw.get("device", t.device))


def randn_like(t, **kw):
    """A tensor of ``t``'s shape with samples of the standard normal distribution.

    Args:
        t: the tensor whose shape (and, by default, dtype and device) is used.
        **kw: ``dtype=`` and ``device=`` override ``t``'s.

    Returns:
        Tensor: the new tensor.
    """
    if getattr(t, "_spec", None) is not None:   # a DTensor: same layout (see its _like)
        return t._like(randn, dict(dtype=kw.get("dtype", t.dtype),
                                 device=kw.get("device", t.device)), random=True)
    return randn(*t.shape, dtype=kw.get("dtype", t.dtype), device=kw.get("device", t.device))
