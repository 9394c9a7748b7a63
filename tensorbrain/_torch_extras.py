"""Small names of the ``torch`` namespace that programs reach for, exported by
``tensorbrain/__init__.py``: the constants (``pi``, ``inf``, ``nan``, ``e``, ``newaxis``), the
determinism switches, the autocast queries of torch's older API, ``frombuffer``, ``logspace``,
``get_device_module``, the ``float8`` dtypes (ml_dtypes')
and the symbolic-shape types (``SymInt``...), each as torch's.

The determinism switches are stored and reported (``are_deterministic_algorithms_enabled``):
TensorBrain's CPU ops are deterministic already (NumPy), and on a GPU the scatter-adds (CuPy's
atomics) are not made deterministic by them; ``warn_only`` and the debug mode are kept too.

>>> import tensorbrain as tb
>>> tb.use_deterministic_algorithms(True); tb.are_deterministic_algorithms_enabled()
True
>>> tb.use_deterministic_algorithms(False)
"""
from __future__ import annotations

import enum

import math

import ml_dtypes
import numpy as np

from . import _dtype, _xp

pi = math.pi
e = math.e
inf = math.inf
nan = math.nan
newaxis = None

# ***** determinism *****
_determinism = {"enabled": False, "warn_only": False, "debug_mode": 0}


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Ask for deterministic algorithms (stored; see the module docstring).

    Args:
        mode: on or off.
        warn_only: warn instead of raising where an op has no deterministic form.
    """
    _determinism["enabled"], _determinism["warn_only"] = bool(mode), bool(warn_only)
    _determinism["debug_mode"] = (1 if warn_only else 2) if mode else 0


def are_deterministic_algorithms_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` turned them on."""
    return bool(_determinism["enabled"])


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether they were turned on with ``warn_only=True``."""
    return bool(_determinism["enabled"] and _determinism["warn_only"])


def set_deterministic_debug_mode(debug_mode) -> None:
    """torch's other spelling: 0/"default", 1/"warn", 2/"error".

    Args:
        debug_mode: the mode.

    Raises:
        RuntimeError: an unknown mode.
    """
    names = {"default": 0, "warn": 1, "error": 2}
    level = names.get(debug_mode, debug_mode)
    if level not in (0, 1, 2):
        raise RuntimeError(f"invalid value of debug_mode, expected one of `default`, `warn`, "
                           f"`error`, but got {debug_mode}")
    use_deterministic_algorithms(level > 0, warn_only=level == 1)


def get_deterministic_debug_mode() -> int:
    """0, 1 or 2 (see :func:`set_deterministic_debug_mode`)."""
    return _determinism["debug_mode"]


# ***** torch's older autocast queries *****
def get_autocast_gpu_dtype():
    """The dtype CUDA autocast runs its low-precision ops in (float16 unless set)."""
    from .amp import get_autocast_dtype
    return get_autocast_dtype("cuda")


def get_autocast_cpu_dtype():
    """The dtype CPU autocast runs its low-precision ops in (bfloat16 unless set)."""
    from .amp import get_autocast_dtype
    return get_autocast_dtype("cpu")


def is_autocast_cpu_enabled() -> bool:
    """Whether a CPU autocast region is active."""
    from .amp import is_autocast_enabled
    return is_autocast_enabled("cpu")


# ***** tensors from other objects *****
def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0, requires_grad=False):
    """A 1-D tensor viewing ``buffer``'s bytes (no copy), as ``torch.frombuffer``.

    Args:
        buffer: any object with the buffer protocol (bytes, bytearray, memoryview, array).
        dtype: the element dtype.
        count: how many elements (-1: all that fit after ``offset``).
        offset: the first byte.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: the view (read-only when ``buffer`` is).

    Example:
        >>> import tensorbrain as tb
        >>> tb.frombuffer(bytearray(b"\\x01\\x02"), dtype=tb.uint8).tolist()
        [1, 2]
    """
    from .tensor import Tensor
    t = Tensor._wrap(np.frombuffer(buffer, dtype=_dtype.as_dtype(dtype), count=count,
                                   offset=offset))
    return t.requires_grad_(True) if requires_grad else t


def logspace(start, end, steps, base=10.0, *, dtype=None, device=None, requires_grad=False):
    """``steps`` values from ``base ** start`` to ``base ** end``, evenly spaced in the
    exponent, as ``torch.logspace``.

    Args:
        start: the first exponent.
        end: the last exponent.
        steps: the number of values.
        base: the base.
        dtype: the dtype (default float).
        device: the device.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: 1-D.

    Example:
        >>> import tensorbrain as tb
        >>> tb.logspace(0, 2, 3).tolist()
        [1.0, 10.0, 100.0]
    """
    from ._factories import tensor
    arr = np.logspace(start, end, steps, base=base).astype(dtype or _dtype.get_default_dtype())
    t = tensor(arr, device=device)
    return t.requires_grad_(True) if requires_grad else t


def get_device_module(device=None):
    """The module of a device type: ``tb.cuda`` for CUDA, ``tb.cpu`` otherwise (and by
    default, without a GPU), as ``torch.get_device_module``.

    Args:
        device: a device, a type name, or None for the current accelerator.
    """
    from . import cpu, cuda
    kind = getattr(device, "type", device)
    if kind is None:
        kind = "cuda" if _xp.cuda_available() else "cpu"
    return cuda if str(kind).split(":")[0] == "cuda" else cpu


# ***** dtypes ml_dtypes adds to NumPy *****
FLOAT8 = {name: np.dtype(getattr(ml_dtypes, name)) for name in
          ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
           "float8_e8m0fnu") if hasattr(ml_dtypes, name)}

#: torch's "shell" dtypes ``uint1`` .. ``uint7``: one byte per element, storage only (a tensor
#: of them can be made, ``empty``/``zeros``, and carried; no arithmetic, no conversion), as
#: torch's, which leaves their meaning to libraries such as torchao. Each is an opaque one-byte
#: NumPy dtype of its own (a one-field record named after it), so it equals no other dtype and
#: NumPy refuses arithmetic on it, as torch does.
SHELL_UINTS = {f"uint{bits}": np.dtype([(f"uint{bits}", "u1")]) for bits in range(1, 8)}

#: torch's quantized dtypes, opaque record dtypes of their storage size in the same way: they
#: name what observers and qconfigs compute parameters for (TensorBrain has no quantized
#: tensors, so no kernel computes with them).
QUANTIZED = {name: np.dtype([(name, code)]) for name, code in
             (("qint8", "i1"), ("quint8", "u1"), ("qint32", "i4"), ("quint4x2", "u1"),
              ("quint2x4", "u1"))}
qint8, quint8, qint32 = QUANTIZED["qint8"], QUANTIZED["quint8"], QUANTIZED["qint32"]


def dtype_name(dtype) -> str:
    """A dtype's torch name without ``torch.``: ``"qint8"``, ``"uint4"``, ``"float32"``."""
    dtype = np.dtype(dtype)
    return dtype.names[0] if dtype.names else dtype.name


class qscheme:
    """A quantization scheme (torch's ``torch.qscheme``): ``tb.per_tensor_affine`` ..."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self):
        return f"tb.{self.name}"

    def __reduce__(self):
        return (_qscheme_named, (self.name,))


def _qscheme_named(name: str) -> qscheme:
    return QSCHEMES[name]


QSCHEMES = {name: qscheme(name) for name in
            ("per_tensor_affine", "per_channel_affine", "per_tensor_symmetric",
             "per_channel_symmetric", "per_channel_affine_float_qparams")}
per_tensor_affine = QSCHEMES["per_tensor_affine"]
per_channel_affine = QSCHEMES["per_channel_affine"]
per_tensor_symmetric = QSCHEMES["per_tensor_symmetric"]
per_channel_symmetric = QSCHEMES["per_channel_symmetric"]
per_channel_affine_float_qparams = QSCHEMES["per_channel_affine_float_qparams"]


# ***** symbolic-shape types (they only exist under tracing, which TensorBrain does not do) *****
class SymInt(int):
    """torch's symbolic integer type; shapes here are plain ints, so nothing is a SymInt unless
    made so (annotations and ``isinstance`` checks work)."""


class SymFloat(float):
    """torch's symbolic float type (see :class:`SymInt`)."""


class SymBool(int):
    """torch's symbolic bool type (see :class:`SymInt`)."""


class Tag(enum.Enum):
    """torch's operator tags (``torch.Tag.inplace``, ``torch.Tag.nondeterministic_seeded``...),
    with torch's values. TensorBrain's ops carry no tags (there is no ``torch.ops`` registry),
    so the names only serve programs that name or compare them."""
    core = 0
    cudagraph_unsafe = 1
    data_dependent_output = 2
    dynamic_output_shape = 3
    flexible_layout = 4
    generated = 5
    inplace = 6
    inplace_view = 7
    maybe_aliasing_or_mutating = 8
    needs_contiguous_strides = 9
    needs_exact_strides = 10
    needs_fixed_stride_order = 11
    nondeterministic_bitwise = 12
    nondeterministic_seeded = 13
    out = 14
    out_variant = 15
    pointwise = 16
    pt2_compliant_tag = 17
    reduction = 18
    view_copy = 19

    def __int__(self) -> int:
        return self.value


# ***** small torch-namespace functions of the scanned programs' long tail *****
def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False, **kwargs):
    """A 0-d tensor holding ``s``, of the default float dtype unless ``dtype`` says otherwise
    (``torch.scalar_tensor``).

    Args:
        s: a Python number or a one-element tensor.
        dtype: the dtype (default: ``tb.get_default_dtype()``).
        device: the device.
        requires_grad: record operations on it.
        **kwargs: torch's ``layout`` / ``pin_memory`` (accepted).

    Raises:
        RuntimeError: a complex ``s`` with a real dtype (torch's overflow error).
    """
    from . import _dtype
    from ._factories import tensor
    value = s.item() if hasattr(s, "item") else s
    dt = _dtype.get_default_dtype() if dtype is None else dtype
    if isinstance(value, complex) and not np.issubdtype(np.dtype(dt), np.complexfloating):
        raise RuntimeError("value cannot be converted to type float without overflow")
    return tensor(value, dtype=dt, device=device, requires_grad=requires_grad)


def cond(pred, true_fn, false_fn, operands=(), **kwargs):
    """``true_fn(*operands)`` if ``pred`` else ``false_fn(*operands)``, as ``torch.cond``
    (eager: only the chosen branch runs; torch's tracing of both branches has no counterpart).

    Args:
        pred: a bool or a one-element tensor.
        true_fn: the branch for a true ``pred``.
        false_fn: the branch for a false ``pred``.
        operands: the branches' arguments (a tuple or list).

    Raises:
        RuntimeError: ``pred`` is a tensor of more than one element.
    """
    if hasattr(pred, "numel"):
        if pred.numel() != 1:
            raise RuntimeError(f"Expected pred to be bool or single-element tensor, but got "
                               f"{pred}.")
        pred = bool(pred.item())
    return (true_fn if pred else false_fn)(*operands)


def sym_ite(b, t, f):
    """``t if b else f`` (``torch.sym_ite``; shapes are plain values here)."""
    return t if b else f


def set_default_tensor_type(t) -> None:
    """Set the default float dtype from a legacy type (``tb.DoubleTensor``) or its name, as the
    deprecated ``torch.set_default_tensor_type``.

    Args:
        t: a CPU floating-point legacy class, or its name (``"torch.DoubleTensor"``).

    Raises:
        TypeError: a non-floating type.
        NotImplementedError: a CUDA type (it would also move the default device, which
            TensorBrain does not do through this call).
    """
    from . import _dtype
    from ._legacy_types import resolve
    from ._unsupported import NotSupportedError, _message
    dtype, device = resolve(t)
    if not np.issubdtype(np.dtype(dtype), np.floating) and np.dtype(dtype) != _dtype.bfloat16:
        raise TypeError("only floating-point types are supported as the default type")
    if device == "cuda":
        raise NotSupportedError(_message(
            "torch.set_default_tensor_type(torch.cuda.*)", "it would make CUDA the default "
            "device", "tb.set_default_dtype(...) and model.to('cuda')"))
    _dtype.set_default_dtype(dtype)


__all__ = ["FLOAT8", "SymBool", "SymFloat", "SymInt", "Tag", "cond", "scalar_tensor", "set_default_tensor_type", "sym_ite",
           "are_deterministic_algorithms_enabled", "e", "frombuffer",
           "get_autocast_cpu_dtype", "get_autocast_gpu_dtype", "get_deterministic_debug_mode",
           "get_device_module", "inf", "is_autocast_cpu_enabled",
           "is_deterministic_algorithms_warn_only_enabled", "logspace", "nan", "newaxis", "pi",
           "set_deterministic_debug_mode", "use_deterministic_algorithms"]
