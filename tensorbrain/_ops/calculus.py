"""Small ops from the scanned programs' long tail, written from other ops (so their gradients
are those ops'): ``gradient`` (finite differences, numpy's and torch's formulas), ``fill``,
``expand_copy``, ``is_nonzero``. Each follows the torch function of the same name."""
from __future__ import annotations

import numbers

import numpy as np

from .._dtype import is_float_or_complex
from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module, to_numpy
from . import elementwise as E
from . import shape as S


def _coords(spacing, dims, shape):
    """The coordinates along each of ``dims`` (host float64 arrays), from torch's spacing forms."""
    if spacing is None or isinstance(spacing, numbers.Number):
        h = 1.0 if spacing is None else float(spacing)
        return [np.arange(shape[d], dtype=np.float64) * h for d in dims]
    spacing = list(spacing)
    if len(spacing) != len(dims):
        raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar or it's "
                           f"spacing and dim arguments to have the same length, but got a "
                           f"spacing argument of length {len(spacing)} and a dim argument of "
                           f"length {len(dims)}.")
    out = []
    for s, d in zip(spacing, dims):
        if isinstance(s, Tensor):
            c = to_numpy(s._data).astype(np.float64)
            if c.ndim != 1 or c.shape[0] != shape[d]:
                raise RuntimeError(f"torch.gradient expected each tensor to be on the same "
                                   f"device and of length {shape[d]} along dim {d}, got a "
                                   f"coordinate tensor of shape {tuple(c.shape)}")
            out.append(c)
        else:
            out.append(np.arange(shape[d], dtype=np.float64) * float(s))
    return out


def _stencil(a, dim, x, edge_order):
    """The derivative of ``a`` along ``dim`` given coordinates ``x`` (numpy.gradient's)."""
    n = a.shape[dim]
    dx = np.diff(x)
    ndim = a.ndim

    def coef(values):   # a host vector as a tensor broadcasting along ``dim``
        shape = [1] * ndim
        shape[dim] = len(values)
        xp = get_array_module(a._data)
        return Tensor._wrap(xp.asarray(np.asarray(values).reshape(shape), dtype=a.dtype))

    def part(start, length):
        return S.narrow(a, dim, start, length)

    hl, hr = dx[:-1], dx[1:]
    ca = -hr / (hl * (hl + hr))
    cb = (hr - hl) / (hl * hr)
    cc = hl / (hr * (hl + hr))
    inner = E.add(E.add(E.mul(part(0, n - 2), coef(ca)), E.mul(part(1, n - 2), coef(cb))),
                  E.mul(part(2, n - 2), coef(cc)))
    if edge_order == 1:
        first = E.div(E.sub(part(1, 1), part(0, 1)), float(dx[0]))
        last = E.div(E.sub(part(n - 1, 1), part(n - 2, 1)), float(dx[-1]))
    else:
        d1, d2 = float(dx[0]), float(dx[1])
        first = E.add(E.add(E.mul(part(0, 1), -(2 * d1 + d2) / (d1 * (d1 + d2))),
                            E.mul(part(1, 1), (d1 + d2) / (d1 * d2))),
                      E.mul(part(2, 1), -d1 / (d2 * (d1 + d2))))
        d1, d2 = float(dx[-2]), float(dx[-1])
        last = E.add(E.add(E.mul(part(n - 3, 1), d2 / (d1 * (d1 + d2))),
                           E.mul(part(n - 2, 1), -(d2 + d1) / (d1 * d2))),
                     E.mul(part(n - 1, 1), (2 * d2 + d1) / (d2 * (d1 + d2))))
    return S.cat([first, inner, last], dim)


def gradient(input, *, spacing=1, dim=None, edge_order=1):
    """Finite-difference derivatives of ``input`` along each of ``dim``, as ``torch.gradient``:
    central differences inside, one-sided of order ``edge_order`` at the edges.

    Args:
        input: a floating-point tensor.
        spacing: a scalar step for every dim, a list of steps, or a list of 1-D coordinate
            tensors (one per dim).
        dim: a dim or a list of dims; None for all.
        edge_order: 1 or 2.

    Returns:
        tuple of Tensor: one derivative per dim, each shaped as ``input``.

    Raises:
        RuntimeError: ``edge_order`` not 1 or 2, a dim shorter than ``edge_order + 1``, or a
            spacing list that does not match ``dim``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.gradient(tb.tensor([1.0, 4.0, 9.0, 16.0]))[0].tolist()
        [3.0, 4.0, 6.0, 7.0]
    """
    if edge_order not in (1, 2):
        raise RuntimeError(f"torch.gradient only supports edge_order=1 and edge_order=2, got "
                           f"edge_order={edge_order}")
    ndim = input.ndim
    if dim is None:
        dims = list(range(ndim))
    elif isinstance(dim, numbers.Integral):
        dims = [int(dim)]
    else:
        dims = [int(d) for d in dim]
    dims = [d + ndim if d < 0 else d for d in dims]
    shape = tuple(input.shape)
    for d in dims:
        if shape[d] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least "
                               "edge_order+1")
    if not is_float_or_complex(input.dtype):
        input = E.mul(input, 1.0)   # integers: derivatives in the default float dtype
    return tuple(_stencil(input, d, x, edge_order)
                 for d, x in zip(dims, _coords(spacing, dims, shape)))


def fill(input, value):
    """A new tensor shaped as ``input`` holding ``value`` (``torch.fill``); the gradient to
    ``input`` is zero, and to ``value`` (a 0-d tensor) the sum of the incoming gradient.

    Args:
        input: the tensor giving the shape and dtype.
        value: a number or a 0-d tensor.

    Returns:
        Tensor: ``input``'s shape, every element ``value``.

    Raises:
        RuntimeError: ``value`` is a tensor with dimensions.

    Example:
        >>> import tensorbrain as tb
        >>> tb.fill(tb.zeros(2), 3.0).tolist()
        [3.0, 3.0]
    """
    zero = E.mul(input, 0)
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"fill only supports 0-dimension value tensor but got tensor "
                               f"with {value.ndim} dimensions.")
        return E.add(zero, value)
    return E.add(zero, value)


def expand_copy(input, size):
    """``input.expand(size)`` as a new tensor with its own memory (``torch.expand_copy``).

    Args:
        input: the tensor.
        size: the new shape (-1 keeps a dimension).

    Returns:
        Tensor: a copy of the expanded view; gradients sum back to ``input``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.expand_copy(tb.tensor([[1.0], [2.0]]), (2, 2)).tolist()
        [[1.0, 1.0], [2.0, 2.0]]
    """
    return S.contiguous(S.clone(S.expand(input, *size) if isinstance(size, (list, tuple))
                                else S.expand(input, size)))


def is_nonzero(input) -> bool:
    """Whether the one value of ``input`` is not zero (``torch.is_nonzero``).

    Args:
        input: a tensor of one element.

    Returns:
        bool: the value is not zero.

    Raises:
        RuntimeError: ``input`` has no value or more than one.

    Example:
        >>> import tensorbrain as tb
        >>> tb.is_nonzero(tb.tensor([0.5]))
        True
    """
    n = input.numel()
    if n == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if n > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    return bool(to_numpy(input._data).reshape(()) != 0)


__all__ = ["expand_copy", "fill", "gradient", "is_nonzero"]
