"""``tb.testing.assert_close`` / ``assert_allclose`` / ``make_tensor``, as ``torch.testing``.

``assert_close`` compares tensors, numbers, and (recursively) sequences and mappings of them,
with torch's default tolerances per dtype (float32: ``rtol=1.3e-6, atol=1e-5``; float64:
``1e-7, 1e-7``; float16: ``1e-3, 1e-5``; bfloat16: ``1.6e-2, 1e-5``; integers and bool:
exact), checks shape, dtype and device unless told not to, and raises ``AssertionError``
naming the greatest mismatch, as torch's.
"""
from __future__ import annotations

import numbers

import numpy as np

from .. import _dtype, _xp
from ..tensor import Tensor

_TOLERANCES = {np.dtype(np.float16): (1e-3, 1e-5), np.dtype(_dtype.bfloat16): (1.6e-2, 1e-5),
               np.dtype(np.float32): (1.3e-6, 1e-5), np.dtype(np.float64): (1e-7, 1e-7),
               np.dtype(np.complex64): (1.3e-6, 1e-5), np.dtype(np.complex128): (1e-7, 1e-7)}


def _tol(dtype):
    return _TOLERANCES.get(np.dtype(dtype), (0.0, 0.0))


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None,
                 equal_nan=False, check_device=True, check_dtype=True, check_layout=True,
                 check_stride=False, msg=None):
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are close, as
    ``torch.testing.assert_close``.

    Args:
        actual: a tensor, number, or a sequence/mapping of them.
        expected: the same structure.
        allow_subclasses: accepted.
        rtol: the relative tolerance (with ``atol``; default by dtype, see above).
        atol: the absolute tolerance.
        equal_nan: NaNs in the same places count as equal.
        check_device: the devices must match.
        check_dtype: the dtypes must match.
        check_layout: accepted.
        check_stride: accepted.
        msg: a message to use instead (a string, or a function of the generated one).

    Raises:
        AssertionError: a mismatch (the message names it).
        ValueError: only one of ``rtol`` and ``atol`` given.

    Example:
        >>> import tensorbrain as tb
        >>> tb.testing.assert_close(tb.tensor([1.0]), tb.tensor([1.0 + 1e-7]))
    """
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got "
                         f"no {'rtol' if rtol is None else 'atol'}.")
    _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, "")


def _fail(text, msg):
    raise AssertionError(msg(text) if callable(msg) else (msg or text))


def _compare(a, b, rtol, atol, equal_nan, check_device, check_dtype, msg, where):
    if isinstance(b, dict):
        if not isinstance(a, dict) or set(a) != set(b):
            _fail(f"The mappings differ in their keys{where}", msg)
        for k in b:
            _compare(a[k], b[k], rtol, atol, equal_nan, check_device, check_dtype, msg,
                     f"{where}[{k!r}]")
        return
    if isinstance(b, (list, tuple)) and not isinstance(b, Tensor):
        if not isinstance(a, (list, tuple)) or len(a) != len(b):
            _fail(f"The sequences differ in length{where}", msg)
        for i, (x, y) in enumerate(zip(a, b)):
            _compare(x, y, rtol, atol, equal_nan, check_device, check_dtype, msg,
                     f"{where}[{i}]")
        return
    if isinstance(a, Tensor) != isinstance(b, Tensor):
        _fail(f"Expected both inputs to be tensors or both numbers{where}, got "
              f"{type(a).__name__} and {type(b).__name__}", msg)
    if isinstance(b, Tensor):
        if tuple(a.shape) != tuple(b.shape):
            _fail(f"The values for attribute 'shape' do not match{where}: {a.shape} != "
                  f"{b.shape}.", msg)
        if check_dtype and a.dtype != b.dtype:
            _fail(f"The values for attribute 'dtype' do not match{where}: {a.dtype} != "
                  f"{b.dtype}.", msg)
        if check_device and a.device != b.device:
            _fail(f"The values for attribute 'device' do not match{where}: {a.device} != "
                  f"{b.device}.", msg)
        x, y, dtype = _xp.to_numpy(a._data), _xp.to_numpy(b._data), b.dtype
    elif isinstance(b, numbers.Number):
        x, y = np.asarray(a), np.asarray(b)
        dtype = np.float64 if isinstance(b, float) else np.asarray(b).dtype
    else:
        _fail(f"No comparison for inputs of type {type(b).__name__}{where}", msg)
        return
    r, t = (rtol, atol) if rtol is not None else _tol(dtype)
    if x.dtype.kind in "fcV":
        x, y = x.astype(np.complex128 if x.dtype.kind == "c" else np.float64), \
            y.astype(np.complex128 if y.dtype.kind == "c" else np.float64)
    close = np.isclose(x, y, rtol=r, atol=t, equal_nan=equal_nan)
    if not close.all():
        bad = int((~close).sum())
        diff = np.abs(x.astype(np.float64) - y.astype(np.float64)) if x.dtype.kind != "c" \
            else np.abs(x - y)
        i = np.unravel_index(np.nanargmax(np.where(close, -np.inf, diff)), diff.shape) \
            if diff.ndim else ()
        kind = "Tensor-likes" if isinstance(b, Tensor) else "Scalars"
        _fail(f"{kind} are not close{where}!\n\nMismatched elements: {bad} / {close.size} "
              f"({100.0 * bad / max(close.size, 1):.1f}%)\nGreatest absolute difference: "
              f"{diff[i]} at index {tuple(int(v) for v in i)} (up to {t} allowed)\n"
              f"(rtol={r}, atol={t})", msg)


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """torch's deprecated form of :func:`assert_close` (no dtype or device checks; NaNs equal).

    Args:
        actual: the values.
        expected: the expected values (converted to tensors when not).
        rtol: the relative tolerance.
        atol: the absolute tolerance.
        equal_nan: NaNs in the same places count as equal.
        msg: the message.
    """
    from .._factories import as_tensor
    a = actual if isinstance(actual, Tensor) else as_tensor(actual)
    b = expected if isinstance(expected, Tensor) else as_tensor(expected, dtype=a.dtype)
    assert_close(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True,
                 check_dtype=False, msg=msg or None)


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False,
                noncontiguous=False, exclude_zero=False, memory_format=None):
    """A tensor of random values in ``[low, high)`` (torch's default ranges: [-9, 9] for floats
    and signed integers, [0, 10) for uint8, {False, True} for bool), as
    ``torch.testing.make_tensor``.

    Args:
        *shape: the shape, as ints or one sequence.
        dtype: the dtype.
        device: the device.
        low: the lower bound.
        high: the upper bound.
        requires_grad: whether autograd records operations on the result.
        noncontiguous: accepted.
        exclude_zero: replace zeros by the dtype's smallest positive step.
        memory_format: accepted.

    Returns:
        Tensor: the tensor.
    """
    from .. import _random
    from .._factories import tensor
    from .._ops.shape import _shape_arg
    dims = _shape_arg(shape)
    dt = _dtype.as_dtype(dtype)
    rng = _random._rng(None)
    if dt == np.bool_:
        arr = rng.integers(0, 2, dims).astype(bool)
    elif dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -9 if low is None else int(low)
        hi = 10 if high is None else int(high)
        arr = rng.integers(lo if low is None else int(low), hi, dims).astype(dt)
    else:
        lo, hi = (-9.0 if low is None else low), (9.0 if high is None else high)
        arr = rng.uniform(lo, hi, dims).astype(dt)
    if exclude_zero:
        arr = np.where(arr == 0, 1 if dt.kind in "iub" else np.finfo(np.float32).tiny, arr)
    t = tensor(arr, device=device)
    return t.requires_grad_(True) if requires_grad else t
