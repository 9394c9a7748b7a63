"""Complex numbers: ``view_as_real``, ``view_as_complex``, ``polar``, ``complex``, ``real``,
``imag``, ``conj``, ``angle``, as torch's (rotary position embeddings build on them).

Complex tensors are NumPy's complex64/complex128 (``tb.complex64`` = ``tb.cfloat``). Gradients
follow torch's convention (conjugate Wirtinger: the gradient of a real loss with respect to
``z`` is ``dL/dRe z + i dL/dIm z``), so ``mul``, ``div``, ``exp``, ``matmul``, ``abs`` and the
linear ops (``add``, ``sum``, ``reshape``, ``cat``...) give torch's gradients on complex
inputs, as do the ops here. ``view_as_real`` / ``view_as_complex`` share memory with their
input, as torch's views do.
"""
from __future__ import annotations

import numpy as np

from .. import _dtype
from .._xp import get_array_module
from .core import make, make_view, unbroadcast

_COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
               np.dtype(np.float64): np.dtype(np.complex128)}
_REAL_OF = {v: k for k, v in _COMPLEX_OF.items()}


def view_as_real(a):
    """A real view of a complex tensor, with a last dimension of 2 (real, imaginary).

    As ``torch.view_as_real``: memory is shared, and the gradient is the complex tensor of the
    two parts.

    Args:
        a: a complex64 or complex128 tensor.

    Returns:
        Tensor: float32 or float64, shape ``(*a.shape, 2)``.

    Raises:
        RuntimeError: ``a`` is not complex.

    Example:
        >>> import tensorbrain as tb
        >>> tb.view_as_real(tb.tensor([1 + 2j])).tolist()
        [[1.0, 2.0]]
    """
    z = a._data
    if z.dtype not in _REAL_OF:
        raise RuntimeError(f"view_as_real is only supported for complex tensors, got {z.dtype}")
    xp = get_array_module(z)
    zc = z if z.flags.c_contiguous or z.ndim == 0 else xp.ascontiguousarray(z)
    out = zc.reshape(zc.shape + (1,)).view(_REAL_OF[z.dtype])

    def backward(g):
        return (xp.ascontiguousarray(g).view(z.dtype).reshape(z.shape),)
    return make_view(out, a, backward, "ViewAsRealBackward")


def view_as_complex(a):
    """A complex view of a real tensor whose last dimension holds (real, imaginary) pairs.

    As ``torch.view_as_complex``: memory is shared; the last dimension must have size 2 and
    stride 1 (``x.float().reshape(*x.shape[:-1], -1, 2)`` makes one).

    Args:
        a: a float32 or float64 tensor of shape ``(..., 2)``.

    Returns:
        Tensor: complex64 or complex128 of shape ``a.shape[:-1]``.

    Raises:
        RuntimeError: the dtype is not float32/float64, the last dimension is not 2, or its
            stride is not 1.

    Example:
        >>> import tensorbrain as tb
        >>> tb.view_as_complex(tb.tensor([[1.0, 2.0]])).tolist()
        [(1+2j)]
    """
    x = a._data
    if x.dtype not in _COMPLEX_OF:
        raise RuntimeError(f"view_as_complex is only supported for float and double tensors, "
                           f"but got a tensor of scalar type: {x.dtype}")
    if x.ndim == 0 or x.shape[-1] != 2:
        raise RuntimeError(f"Tensor must have a last dimension of size 2, got shape "
                           f"{tuple(x.shape)}")
    if x.strides[-1] != x.itemsize:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    xp = get_array_module(x)
    xc = x if x.flags.c_contiguous else xp.ascontiguousarray(x)
    out = xc.view(_COMPLEX_OF[x.dtype]).reshape(x.shape[:-1])

    def backward(g):
        gc = xp.ascontiguousarray(g)
        return (gc.reshape(gc.shape + (1,)).view(x.dtype),)
    return make_view(out, a, backward, "ViewAsComplexBackward")


def polar(abs, angle):  # noqa: A002  (torch's argument names)
    """``abs * (cos(angle) + i sin(angle))``, as ``torch.polar``.

    Args:
        abs: the magnitudes (float32 or float64).
        angle: the angles in radians, broadcast with ``abs`` (same dtype).

    Returns:
        Tensor: complex64 or complex128, the broadcast shape.

    Raises:
        TypeError: the dtypes differ or are not float32/float64.

    Example:
        >>> import tensorbrain as tb
        >>> tb.polar(tb.tensor([2.0]), tb.tensor([0.0])).tolist()
        [(2+0j)]
    """
    r, t = abs._data, angle._data
    if r.dtype != t.dtype or r.dtype not in _COMPLEX_OF:
        raise TypeError(f"polar: expected abs and angle of the same dtype, float or double, got "
                        f"{r.dtype} and {t.dtype}")
    xp = get_array_module(r)
    unit = (xp.cos(t) + 1j * xp.sin(t)).astype(_COMPLEX_OF[r.dtype])
    out = r * unit

    def backward(g):
        gr = unbroadcast((g * unit.conj()).real, r.shape) if abs.requires_grad else None
        gt = unbroadcast((g * (-1j * out.conj())).real, t.shape) if angle.requires_grad else None
        return gr, gt
    return make(out.astype(_COMPLEX_OF[r.dtype]), (abs, angle), backward, "PolarBackward")


def complex(real, imag):  # noqa: A001  (torch's name)
    """``real + i imag``, as ``torch.complex``.

    Args:
        real: the real parts (float32 or float64).
        imag: the imaginary parts, broadcast with ``real`` (same dtype).

    Returns:
        Tensor: complex64 or complex128.

    Raises:
        TypeError: the dtypes differ or are not float32/float64.

    Example:
        >>> import tensorbrain as tb
        >>> tb.complex(tb.tensor([1.0]), tb.tensor([-1.0])).tolist()
        [(1-1j)]
    """
    a, b = real._data, imag._data
    if a.dtype != b.dtype or a.dtype not in _COMPLEX_OF:
        raise TypeError(f"complex: expected real and imag of the same dtype, float or double, "
                        f"got {a.dtype} and {b.dtype}")
    out = (a + 1j * b).astype(_COMPLEX_OF[a.dtype])

    def backward(g):
        return (unbroadcast(g.real, a.shape) if real.requires_grad else None,
                unbroadcast(g.imag, b.shape) if imag.requires_grad else None)
    return make(out, (real, imag), backward, "ComplexBackward")


def real(a):
    """The real part (a view for complex tensors; the tensor itself for real ones).

    Args:
        a: the input tensor.

    Returns:
        Tensor: the real parts, as ``torch.real``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.real(tb.tensor([1 + 2j])).tolist()
        [1.0]
    """
    z = a._data
    if z.dtype.kind != "c":
        return a
    return make_view(z.real, a, lambda g: (g.astype(z.dtype),), "RealBackward")


def imag(a):
    """The imaginary part of a complex tensor (a view), as ``torch.imag``.

    Args:
        a: a complex tensor.

    Returns:
        Tensor: the imaginary parts.

    Raises:
        RuntimeError: ``a`` is not complex.

    Example:
        >>> import tensorbrain as tb
        >>> tb.imag(tb.tensor([1 + 2j])).tolist()
        [2.0]
    """
    z = a._data
    if z.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return make_view(z.imag, a, lambda g: (1j * g.astype(z.dtype),), "ImagBackward")


def conj(a):
    """The complex conjugate (the tensor itself when it is real), as ``torch.conj``.

    Args:
        a: the input tensor.

    Returns:
        Tensor: ``a`` with its imaginary parts negated.

    Example:
        >>> import tensorbrain as tb
        >>> tb.conj(tb.tensor([1 + 2j])).tolist()
        [(1-2j)]
    """
    z = a._data
    if z.dtype.kind != "c":
        return a
    return make(z.conj(), (a,), lambda g: (g.conj(),), "ConjBackward")


def resolve(a):
    """``a`` itself: TensorBrain's conjugates and negations are computed at once, never lazy
    bits (torch's ``resolve_conj`` / ``resolve_neg``).

    Args:
        a: the input tensor.

    Returns:
        Tensor: ``a``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.resolve_conj(tb.tensor([1 + 2j])).tolist()
        [(1+2j)]
    """
    return a


def angle(a):
    """The argument (phase) of each element, in radians, as ``torch.angle``: ``atan2(imag,
    real)`` for complex tensors; ``pi`` for negative real numbers and 0 otherwise.

    Args:
        a: the input tensor.

    Returns:
        Tensor: real, ``a``'s shape (float for integer inputs).

    Example:
        >>> import tensorbrain as tb
        >>> tb.angle(tb.tensor([1.0, -1.0])).tolist()
        [0.0, 3.1415927410125732]
    """
    z = a._data
    xp = get_array_module(z)
    if z.dtype.kind in "biu":
        z = z.astype(_dtype.get_default_dtype())
    out = xp.angle(z).astype(z.real.dtype, copy=False)
    if z.dtype.kind != "c":
        return make(out, (a,), lambda g: (xp.zeros_like(g),), "AngleBackward")

    def backward(g):
        with np.errstate(divide="ignore", invalid="ignore"):
            return ((g * (1j * z / (z * z.conj()).real)).astype(z.dtype),)
    return make(out, (a,), backward, "AngleBackward", (a,))


def adjoint(a):
    """The conjugate transpose of the last two dimensions (``a.mH``), as
    ``torch.adjoint``.

    Args:
        a: a tensor of at least 2 dimensions.

    Returns:
        Tensor: ``conj(a).transpose(-2, -1)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.adjoint(tb.tensor([[1 + 1j, 2.0]])).tolist()
        [[(1-1j)], [(2-0j)]]
    """
    from .shape import transpose
    return transpose(conj(a), -2, -1)


class ComplexAttributes:
    """``Tensor.real``, ``Tensor.imag``, ``Tensor.H`` and ``Tensor.mH`` (properties, as
    torch's); installed on Tensor by ``tensorbrain/tensor.py``."""

    @property
    def real(self):
        """The real part (see :func:`real`)."""
        return real(self)

    @property
    def imag(self):
        """The imaginary part (see :func:`imag`)."""
        return imag(self)

    @property
    def H(self):  # noqa: N802  (torch's name)
        """The conjugate transpose of a 2-D tensor."""
        from .shape import t
        return t(conj(self))

    @property
    def mH(self):  # noqa: N802
        """The conjugate transpose of the last two dimensions."""
        return adjoint(self)


def is_complex(a) -> bool:
    """Whether ``a``'s dtype is complex, as ``torch.is_complex``.

    Args:
        a: a tensor.

    Returns:
        bool: True for complex64/complex128.

    Example:
        >>> import tensorbrain as tb
        >>> tb.is_complex(tb.tensor([1j])), tb.is_complex(tb.ones(1))
        (True, False)
    """
    return a._data.dtype.kind == "c"


__all__ = ["ComplexAttributes", "adjoint", "angle", "complex",
           "conj", "imag", "is_complex", "polar", "real", "resolve", "view_as_complex",
           "view_as_real"]
