"""``tb.fft`` (``torch.fft``): discrete Fourier transforms with gradients, on NumPy's (CuPy's
on a GPU) FFT.

The complex transforms (``fft``, ``ifft``, ``fft2``, ``ifft2``, ``fftn``, ``ifftn``) and the
real ones (``rfft``, ``irfft``, ``rfft2``, ``irfft2``, ``rfftn``, ``irfftn``) take torch's
``n``/``s``, ``dim`` and ``norm`` (``"backward"``, ``"ortho"``, ``"forward"``). Their gradients
are the adjoint transforms (torch's conjugate-Wirtinger convention): a transform with ``norm``
has the inverse transform with the dual norm as its adjoint, ``rfft`` the zero-extended
``ifft``'s real part, ``irfft`` the ``rfft`` of the gradient with the doubled bins counted
twice. ``fftfreq``, ``rfftfreq``, ``fftshift`` and ``ifftshift`` are as torch's. Real inputs
of the complex transforms give complex outputs; float32 gives complex64, as torch.

>>> import tensorbrain as tb
>>> tb.fft.fft(tb.tensor([1.0, 0.0, 0.0, 0.0])).tolist()
[(1+0j), (1+0j), (1+0j), (1+0j)]
"""
from __future__ import annotations

import numbers

import numpy as np

from ._factories import tensor as _tensor
from ._ops.core import make
from ._xp import get_array_module

_DUAL = {"backward": "forward", "forward": "backward", "ortho": "ortho", None: "forward"}
_COMPLEX = {np.dtype(np.float32): np.complex64, np.dtype(np.float64): np.complex128,
            np.dtype(np.float16): np.complex64, np.dtype(np.complex64): np.complex64,
            np.dtype(np.complex128): np.complex128}


def _norm(norm):
    if norm not in (None, "backward", "forward", "ortho"):
        raise ValueError(f'Invalid normalization mode: "{norm}"')
    return norm or "backward"


def _axes_sizes(x, s, dim, default_all):
    if dim is None:
        dim = tuple(range(-len(s), 0)) if s is not None else \
            (tuple(range(x.ndim)) if default_all else (-2, -1))
    dim = (dim,) if isinstance(dim, numbers.Integral) else tuple(dim)
    if s is not None:
        s = (s,) if isinstance(s, numbers.Integral) else tuple(s)
    return dim, s


def _cdtype(x):
    return _COMPLEX.get(x.dtype, np.complex64)


def _c2c(name, a, s, dim, norm, inverse, default_all):
    x = a._data
    xp = get_array_module(x)
    dims, sizes = _axes_sizes(x, s, dim, default_all)
    norm = _norm(norm)
    fn = xp.fft.ifftn if inverse else xp.fft.fftn
    back = xp.fft.fftn if inverse else xp.fft.ifftn
    out = fn(x, s=sizes, axes=dims, norm=norm).astype(_cdtype(x), copy=False)
    real_in = x.dtype.kind != "c"

    def backward(g):
        gx = back(g, axes=dims, norm=_DUAL[norm])
        gx = _fit(xp, gx, x.shape, dims)   # undo the zero-padding / cropping of s
        return ((gx.real if real_in else gx).astype(x.dtype, copy=False),)
    return make(out, (a,), backward, name)


def _fit(xp, g, shape, dims):
    """``g`` cropped or zero-padded along ``dims`` to ``shape``."""
    for d in dims:
        n = shape[d]
        if g.shape[d] > n:
            g = xp.take(g, xp.arange(n), axis=d)
        elif g.shape[d] < n:
            pad = [(0, 0)] * g.ndim
            pad[d] = (0, n - g.shape[d])
            g = xp.pad(g, pad)
    return g


def fft(input, n=None, dim=-1, norm=None):
    """The 1-D discrete Fourier transform along ``dim``, as ``torch.fft.fft``.

    Args:
        input: a real or complex tensor.
        n: the transform length (crop or zero-pad); None keeps it.
        dim: the dimension.
        norm: ``"backward"`` (no scaling), ``"ortho"`` or ``"forward"`` (divide by n).

    Returns:
        Tensor: complex.
    """
    return _c2c("FftC2CBackward", input, None if n is None else (n,), (dim,), norm, False, False)


def ifft(input, n=None, dim=-1, norm=None):
    """The 1-D inverse discrete Fourier transform, as ``torch.fft.ifft``.

    Args:
        input: a real or complex tensor.
        n: the transform length.
        dim: the dimension.
        norm: the normalisation (``"backward"`` divides by n).

    Returns:
        Tensor: complex.
    """
    return _c2c("FftC2CBackward", input, None if n is None else (n,), (dim,), norm, True, False)


def fft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D transform over ``dim``, as ``torch.fft.fft2``.

    Args:
        input: the tensor.
        s: the transform sizes.
        dim: the two dimensions.
        norm: the normalisation.

    Returns:
        Tensor: complex.
    """
    return _c2c("FftC2CBackward", input, s, dim, norm, False, False)


def ifft2(input, s=None, dim=(-2, -1), norm=None):
    """The 2-D inverse transform, as ``torch.fft.ifft2``.

    Args:
        input: the tensor.
        s: the transform sizes.
        dim: the two dimensions.
        norm: the normalisation.

    Returns:
        Tensor: complex.
    """
    return _c2c("FftC2CBackward", input, s, dim, norm, True, False)


def fftn(input, s=None, dim=None, norm=None):
    """The N-D transform (all dimensions by default), as ``torch.fft.fftn``.

    Args:
        input: the tensor.
        s: the transform sizes.
        dim: the dimensions.
        norm: the normalisation.

    Returns:
        Tensor: complex.
    """
    return _c2c("FftC2CBackward", input, s, dim, norm, False, True)


def ifftn(input, s=None, dim=None, norm=None):
    """The N-D inverse transform, as ``torch.fft.ifftn``.

    Args:
        input: the tensor.
        s: the transform sizes.
        dim: the dimensions.
        norm: the normalisation.

    Returns:
        Tensor: complex.
    """
    return _c2c("FftC2CBackward", input, s, dim, norm, True, True)


def _r2c(a, s, dim, norm, default_all):
    x = a._data
    if x.dtype.kind == "c":
        raise RuntimeError("rfft expects a real input tensor, but got complex")
    xp = get_array_module(x)
    dims, sizes = _axes_sizes(x, s, dim, default_all)
    norm = _norm(norm)
    out = xp.fft.rfftn(x, s=sizes, axes=dims, norm=norm).astype(_cdtype(x), copy=False)
    full = [x.shape[d] if sizes is None else sizes[i] for i, d in enumerate(dims)]

    def backward(g):
        # zero-extend the half spectrum to the full one, then the adjoint of the full fft
        padded = _fit(xp, g, tuple(full[-1] if d == dims[-1] else g.shape[d]
                                   for d in range(g.ndim)), (dims[-1],))
        gx = xp.fft.ifftn(padded, s=full, axes=dims, norm=_DUAL[norm]).real
        return (_fit(xp, gx, x.shape, dims).astype(x.dtype, copy=False),)
    return make(out, (a,), backward, "FftR2CBackward")


def _c2r(a, s, dim, norm, default_all):
    x = a._data
    xp = get_array_module(x)
    dims, sizes = _axes_sizes(x, s, dim, default_all)
    norm = _norm(norm)
    last = sizes[-1] if sizes is not None else 2 * (x.shape[dims[-1]] - 1)
    full = ([x.shape[d] for d in dims[:-1]] if sizes is None else list(sizes[:-1])) + [last]
    out = xp.fft.irfftn(x, s=full, axes=dims, norm=norm)
    real = out.dtype

    def backward(g):
        gy = xp.fft.rfftn(g, s=full, axes=dims, norm=_DUAL[norm])
        m = gy.shape[dims[-1]]
        weight = xp.full(m, 2.0, dtype=real)
        weight[0] = 1.0
        if last % 2 == 0:
            weight[-1] = 1.0
        shape = [1] * gy.ndim
        shape[dims[-1]] = m
        gy = gy * weight.reshape(shape)
        return (_fit(xp, gy, x.shape, dims).astype(x.dtype if x.dtype.kind == "c"
                                                   else _cdtype(x), copy=False),)
    return make(out, (a,), backward, "FftC2RBackward")


def rfft(input, n=None, dim=-1, norm=None):
    """The 1-D transform of a real input, non-negative frequencies only, as
    ``torch.fft.rfft``.

    Args:
        input: a real tensor.
        n: the transform length.
        dim: the dimension.
        norm: the normalisation.

    Returns:
        Tensor: complex, ``n // 2 + 1`` along ``dim``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.fft.rfft(tb.tensor([1.0, 1.0, 1.0, 1.0])).tolist()
        [(4+0j), 0j, 0j]
    """
    return _r2c(input, None if n is None else (n,), (dim,), norm, False)


def irfft(input, n=None, dim=-1, norm=None):
    """The inverse of :func:`rfft`: a real signal from its non-negative frequencies, as
    ``torch.fft.irfft``.

    Args:
        input: the half spectrum (complex).
        n: the output length (default ``2 * (m - 1)``).
        dim: the dimension.
        norm: the normalisation.

    Returns:
        Tensor: real.
    """
    return _c2r(input, None if n is None else (n,), (dim,), norm, False)


def rfft2(input, s=None, dim=(-2, -1), norm=None):
    """:func:`rfft` over two dimensions, as ``torch.fft.rfft2``.

    Args:
        input: a real tensor.
        s: the transform sizes.
        dim: the two dimensions.
        norm: the normalisation.

    Returns:
        Tensor: complex.
    """
    return _r2c(input, s, dim, norm, False)


def irfft2(input, s=None, dim=(-2, -1), norm=None):
    """:func:`irfft` over two dimensions, as ``torch.fft.irfft2``.

    Args:
        input: the half spectrum.
        s: the output sizes.
        dim: the two dimensions.
        norm: the normalisation.

    Returns:
        Tensor: real.
    """
    return _c2r(input, s, dim, norm, False)


def rfftn(input, s=None, dim=None, norm=None):
    """:func:`rfft` over several dimensions (all by default), as ``torch.fft.rfftn``.

    Args:
        input: a real tensor.
        s: the transform sizes.
        dim: the dimensions.
        norm: the normalisation.

    Returns:
        Tensor: complex.
    """
    return _r2c(input, s, dim, norm, True)


def irfftn(input, s=None, dim=None, norm=None):
    """:func:`irfft` over several dimensions, as ``torch.fft.irfftn``.

    Args:
        input: the half spectrum.
        s: the output sizes.
        dim: the dimensions.
        norm: the normalisation.

    Returns:
        Tensor: real.
    """
    return _c2r(input, s, dim, norm, True)


def fftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The sample frequencies of an ``n``-point transform, as ``torch.fft.fftfreq``.

    Args:
        n: the transform length.
        d: the sample spacing.
        dtype: the dtype (default float).
        device: the device.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: ``[0, 1, ..., -1] / (d * n)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.fft.fftfreq(4).tolist()
        [0.0, 0.25, -0.5, -0.25]
    """
    from . import _dtype
    t = _tensor(np.fft.fftfreq(n, d).astype(dtype or _dtype.get_default_dtype()), device=device)
    return t.requires_grad_(True) if requires_grad else t


def rfftfreq(n, d=1.0, *, dtype=None, device=None, requires_grad=False):
    """The non-negative sample frequencies, as ``torch.fft.rfftfreq``.

    Args:
        n: the transform length.
        d: the sample spacing.
        dtype: the dtype.
        device: the device.
        requires_grad: whether autograd records operations on the result.

    Returns:
        Tensor: ``n // 2 + 1`` frequencies.

    Example:
        >>> import tensorbrain as tb
        >>> tb.fft.rfftfreq(4).tolist()
        [0.0, 0.25, 0.5]
    """
    from . import _dtype
    t = _tensor(np.fft.rfftfreq(n, d).astype(dtype or _dtype.get_default_dtype()), device=device)
    return t.requires_grad_(True) if requires_grad else t


def fftshift(input, dim=None):
    """``input`` rolled so the zero frequency is in the middle, as ``torch.fft.fftshift``.

    Args:
        input: the tensor.
        dim: the dimension(s); None for all.

    Returns:
        Tensor: the shifted tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.fft.fftshift(tb.tensor([0, 1, 2, 3])).tolist()
        [2, 3, 0, 1]
    """
    from ._ops.rearrange import roll
    dims = tuple(range(input.ndim)) if dim is None else \
        ((dim,) if isinstance(dim, numbers.Integral) else tuple(dim))
    return roll(input, tuple(input.shape[d] // 2 for d in dims), dims)


def ifftshift(input, dim=None):
    """The inverse of :func:`fftshift`, as ``torch.fft.ifftshift``.

    Args:
        input: the tensor.
        dim: the dimension(s); None for all.

    Returns:
        Tensor: the shifted tensor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.fft.ifftshift(tb.tensor([2, 3, 0, 1])).tolist()
        [0, 1, 2, 3]
    """
    from ._ops.rearrange import roll
    dims = tuple(range(input.ndim)) if dim is None else \
        ((dim,) if isinstance(dim, numbers.Integral) else tuple(dim))
    return roll(input, tuple(-(input.shape[d] // 2) for d in dims), dims)


__all__ = ["fft", "fft2", "fftfreq", "fftn", "fftshift", "ifft", "ifft2", "ifftn", "ifftshift",
           "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn"]
