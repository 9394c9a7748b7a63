"""``tb.linalg`` (``torch.linalg``): decompositions, solves, inverses and norms with gradients.

The factorisations (``inv``, ``det``, ``slogdet``, ``solve``, ``cholesky``, ``qr``, ``eigh``,
``svd``) run NumPy's (CuPy's on a GPU) LAPACK and have their backward formulas beside them in
``tensorbrain/_ops/linalg_ops.py``; the rest are written from those and the other ops, so their
gradients come with them: norms, ``pinv``, ``matrix_power``, ``matrix_exp`` (scaling and
squaring with a Taylor polynomial), ``lstsq``, ``multi_dot``, ``cond``, ``matrix_rank``.
``eig`` and ``eigvals`` (general, complex results) have no gradient. A singular input raises
:class:`LinAlgError`, as torch's.

>>> import tensorbrain as tb
>>> a = tb.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
>>> tb.linalg.det(a).backward()
>>> a.grad.tolist()
[[3.0, -1.0], [-1.0, 2.0]]
"""
from __future__ import annotations

import math
import numbers
from typing import Any, NamedTuple

import numpy as np

from ._ops import elementwise as E
from ._ops import reduce as R
from ._ops import shape as S
from ._ops.blas import cross as _cross
from ._ops.combine import diagonal as _diagonal
from ._ops.linalg_ops import (SVD, Eigh, LinAlgError, QR, SlogDet, cholesky, det, eigh,  # noqa: F401
                              eigvalsh, inv, qr, slogdet, solve, solve_triangular, svd)
from ._tensor_base import TensorBase as Tensor
from ._xp import get_array_module


class Lstsq(NamedTuple):
    """``(solution, residuals, rank, singular_values)``."""
    solution: Any
    residuals: Any
    rank: Any
    singular_values: Any


class Eig(NamedTuple):
    """``(eigenvalues, eigenvectors)`` (complex)."""
    eigenvalues: Any
    eigenvectors: Any


def _zeros_info(a):
    return Tensor._wrap(get_array_module(a._data).zeros(a.shape[:-2], dtype=np.int32))


def inv_ex(a, *, check_errors=False):
    """``(inverse, info)`` with ``info`` 0 (a singular input raises), as
    ``torch.linalg.inv_ex``.

    Args:
        a: ``(..., n, n)``.
        check_errors: accepted (errors always raise).

    Returns:
        tuple[Tensor, Tensor]: the inverse and int32 zeros.
    """
    return inv(a), _zeros_info(a)


def cholesky_ex(a, *, upper=False, check_errors=False):
    """``(L, info)`` with ``info`` 0, as ``torch.linalg.cholesky_ex``.

    Args:
        a: ``(..., n, n)``.
        upper: return the upper factor.
        check_errors: accepted (errors always raise).

    Returns:
        tuple[Tensor, Tensor]: the factor and int32 zeros.
    """
    return cholesky(a, upper=upper), _zeros_info(a)


def solve_ex(a, b, *, left=True, check_errors=False):
    """``(X, info)`` with ``info`` 0, as ``torch.linalg.solve_ex``.

    Args:
        a: ``(..., n, n)``.
        b: the right-hand side.
        left: as :func:`solve`.
        check_errors: accepted.

    Returns:
        tuple[Tensor, Tensor]: the solution and int32 zeros.
    """
    return solve(a, b, left=left), _zeros_info(a)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The vector ``ord``-norm over ``dim`` (all elements when None), as
    ``torch.linalg.vector_norm``.

    Args:
        x: the input tensor.
        ord: any real number, ``inf`` or ``-inf`` (0 counts nonzeros).
        dim: a dimension or tuple of them; None for all.
        keepdim: keep the reduced dimensions.
        dtype: compute in this dtype.

    Returns:
        Tensor: the norms; the gradient at a zero vector is 0, as torch's.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.vector_norm(tb.tensor([3.0, -4.0])).item()
        5.0
    """
    if dtype is not None:
        x = x.to(dtype)
    a = E.abs(x) if x._data.dtype.kind != "c" else _cabs(x)
    if ord == float("inf"):
        return R.amax(a, dim, keepdim)
    if ord == float("-inf"):
        from ._ops.extra import amin
        return amin(a, dim, keepdim)
    if ord == 0:
        return R.sum(E.ne_(a, 0), dim, keepdim).to(a.dtype)
    if ord == 1:
        return R.sum(a, dim, keepdim)
    if ord == 2:
        sq = R.sum(E.mul(a, a), dim, keepdim)
        safe = E.where(E.gt_(sq, 0), sq, 1.0)
        return E.where(E.gt_(sq, 0), E.sqrt(safe), 0.0)
    s = R.sum(E.pow(a, ord), dim, keepdim)
    safe = E.where(E.gt_(s, 0), s, 1.0)
    return E.where(E.gt_(s, 0), E.pow(safe, 1.0 / ord), 0.0)


def _cabs(z):
    from ._ops.complex import imag, real
    re, im = real(z), imag(z)
    sq = E.add(E.mul(re, re), E.mul(im, im))
    safe = E.where(E.gt_(sq, 0), sq, 1.0)
    return E.where(E.gt_(sq, 0), E.sqrt(safe), 0.0)


def matrix_norm(a, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """A matrix norm over the two dimensions ``dim``, as ``torch.linalg.matrix_norm``.

    Args:
        a: ``(..., m, n)``.
        ord: ``"fro"``, ``"nuc"``, ``inf``, ``-inf``, 1, -1, 2 or -2.
        dim: the two dimensions.
        keepdim: keep them with size 1.
        dtype: compute in this dtype.

    Returns:
        Tensor: the norms.

    Raises:
        RuntimeError: an unknown ``ord``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.matrix_norm(tb.tensor([[1.0, -2.0], [3.0, 4.0]]), 1).item()
        6.0
    """
    if dtype is not None:
        a = a.to(dtype)
    d0, d1 = (d % a.ndim for d in dim)
    if ord == "fro":
        return vector_norm(a, 2, (d0, d1), keepdim)
    if ord in ("nuc", 2, -2):
        moved = _to_last(a, d0, d1)
        sv = svd(moved, full_matrices=False).S
        out = R.sum(sv, -1) if ord == "nuc" else (R.amax(sv, -1) if ord == 2 else
                                                  _amin(sv, -1))
        return _keep(out, a, d0, d1) if keepdim else out
    if ord in (1, -1, float("inf"), float("-inf")):
        sums = R.sum(E.abs(a), d1 if ord in (float("inf"), float("-inf")) else d0, True)
        red = (d0, d1)
        out = R.amax(sums, red, True) if ord in (1, float("inf")) else _amin(sums, red, True)
        return out if keepdim else S.squeeze(S.squeeze(out, max(d0, d1)), min(d0, d1))
    raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")


def _amin(x, dim, keepdim=False):
    from ._ops.extra import amin
    return amin(x, dim, keepdim)


def _to_last(a, d0, d1):
    order = [i for i in range(a.ndim) if i not in (d0, d1)] + [d0, d1]
    return S.permute(a, *order)


def _keep(out, a, d0, d1):
    for d in sorted((d0, d1)):
        out = S.unsqueeze(out, d)
    return out


def norm(a, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The vector or matrix norm, as ``torch.linalg.norm``: with ``ord`` None, the 2-norm of
    the flattened input (or of ``dim``); a 2-tuple ``dim`` or a 2-D input with ``ord`` given
    means a matrix norm.

    Args:
        a: the input tensor.
        ord: the order (see :func:`vector_norm` and :func:`matrix_norm`).
        dim: a dimension, or two for a matrix norm.
        keepdim: keep the reduced dimensions.
        dtype: compute in this dtype.

    Returns:
        Tensor: the norms.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.norm(tb.tensor([[3.0, 0.0], [0.0, 4.0]])).item()
        5.0
    """
    if dim is not None and not isinstance(dim, numbers.Integral) and len(dim) == 2:
        return matrix_norm(a, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is None and ord is not None and a.ndim == 2:
        return matrix_norm(a, ord, (-2, -1), keepdim, dtype=dtype)
    return vector_norm(a, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def svdvals(a, *, driver=None):
    """The singular values, descending, as ``torch.linalg.svdvals``.

    Args:
        a: ``(..., m, n)``.
        driver: accepted.

    Returns:
        Tensor: ``(..., min(m, n))``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.svdvals(tb.tensor([[0.0, 2.0], [1.0, 0.0]])).tolist()
        [2.0, 1.0]
    """
    return svd(a, full_matrices=False).S


def pinv(a, *, atol=None, rtol=None, hermitian=False):
    """The Moore-Penrose pseudo-inverse, through the SVD, as ``torch.linalg.pinv``: singular
    values below ``max(atol, rtol * largest)`` are treated as zero.

    Args:
        a: ``(..., m, n)``.
        atol: the absolute threshold.
        rtol: the relative threshold (default ``eps * max(m, n)`` when ``atol`` is not given).
        hermitian: accepted (the SVD is used either way).

    Returns:
        Tensor: ``(..., n, m)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.pinv(tb.tensor([[2.0, 0.0], [0.0, 0.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.0]]
    """
    u, s, vh = svd(a, full_matrices=False)
    x = a._data
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else \
            float(np.finfo(x.real.dtype).eps) * max(x.shape[-2:])
    limit = np.maximum(float(atol or 0.0), rtol * _xp_max(s._data))
    xp = get_array_module(x)
    keep = Tensor._wrap(s._data > xp.asarray(limit)[..., None] if np.ndim(limit) else
                        s._data > limit)
    sinv = E.where(keep, E.reciprocal(E.where(keep, s, 1.0)), 0.0)
    from ._ops.complex import adjoint
    return S.matmul(E.mul(adjoint(vh), S.unsqueeze(sinv, -2)), adjoint(u))


def _xp_max(s):
    return get_array_module(s).max(s, axis=-1) if s.size else 0.0


def matrix_power(a, n):
    """``a`` multiplied by itself ``n`` times (the inverse's power for negative ``n``, the
    identity for 0), as ``torch.linalg.matrix_power``.

    Args:
        a: ``(..., m, m)``.
        n: an integer.

    Returns:
        Tensor: ``a``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.matrix_power(tb.tensor([[1.0, 1.0], [0.0, 1.0]]), 3).tolist()
        [[1.0, 3.0], [0.0, 1.0]]
    """
    if n == 0:
        xp = get_array_module(a._data)
        return Tensor._wrap(xp.broadcast_to(xp.eye(a.shape[-1], dtype=a._data.dtype),
                                            a.shape).copy())
    base = inv(a) if n < 0 else a
    result, power = None, base
    for bit in bin(abs(int(n)))[2:][::-1]:   # square and multiply
        if bit == "1":
            result = power if result is None else S.matmul(result, power)
        power = S.matmul(power, power)
    return result


def matrix_exp(a):
    """The matrix exponential, by scaling and squaring a degree-18 Taylor polynomial (written
    from matmuls, so it is differentiable), as ``torch.linalg.matrix_exp``.

    Args:
        a: ``(..., n, n)``.

    Returns:
        Tensor: ``exp(a)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.matrix_exp(tb.zeros(2, 2)).tolist()
        [[1.0, 0.0], [0.0, 1.0]]
    """
    x = a._data
    xp = get_array_module(x)
    scale = float(xp.max(xp.abs(x).sum(axis=-1))) if x.size else 0.0
    squarings = max(0, int(math.ceil(math.log2(scale))) + 1) if scale > 0.5 else 0
    m = E.mul(a, 1.0 / (2 ** squarings))
    eye = Tensor._wrap(xp.broadcast_to(xp.eye(x.shape[-1], dtype=x.dtype), x.shape).copy())
    term, total = eye, eye
    for k in range(1, 19):
        term = E.div(S.matmul(term, m), k)
        total = E.add(total, term)
    for _ in range(squarings):
        total = S.matmul(total, total)
    return total


def multi_dot(tensors):
    """The product of the matrices (1-D first and last ones as row and column vectors), as
    ``torch.linalg.multi_dot``.

    Args:
        tensors: a sequence of tensors.

    Returns:
        Tensor: the product.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.multi_dot([tb.ones(2), tb.eye(2), tb.ones(2)]).item()
        2.0
    """
    out = tensors[0]
    for t in tensors[1:]:
        out = S.matmul(out, t)
    return out


def vecdot(x, y, *, dim=-1):
    """``sum(conj(x) * y)`` over ``dim``, as ``torch.linalg.vecdot``.

    Args:
        x: a tensor.
        y: broadcast with ``x``.
        dim: the dimension.

    Returns:
        Tensor: the dot products.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.vecdot(tb.tensor([1.0, 2.0]), tb.tensor([3.0, 4.0])).item()
        11.0
    """
    from ._ops.complex import conj
    return R.sum(E.mul(conj(x), y), dim)


def cross(a, b, *, dim=-1):
    """The cross product of 3-vectors along ``dim`` (default -1), as ``torch.linalg.cross``.

    Args:
        a: the first vectors.
        b: the second, broadcast with ``a``.
        dim: the dimension of size 3.

    Returns:
        Tensor: the broadcast shape.
    """
    return _cross(a, b, dim)


def diagonal(a, *, offset=0, dim1=-2, dim2=-1):
    """The diagonals of the last two dimensions, as ``torch.linalg.diagonal``.

    Args:
        a: the input tensor.
        offset: which diagonal.
        dim1: the first dimension.
        dim2: the second.

    Returns:
        Tensor: a view.
    """
    return _diagonal(a, offset, dim1, dim2)


def matmul(a, b):
    """``a @ b``, as ``torch.linalg.matmul``.

    Args:
        a: a tensor.
        b: a tensor.

    Returns:
        Tensor: the product.
    """
    return S.matmul(a, b)


def cond(a, p=None):
    """The condition number ``norm(a) * norm(inv(a))`` (the ratio of extreme singular values
    for ``p`` None or 2), as ``torch.linalg.cond``.

    Args:
        a: ``(..., n, n)`` (any shape for ``p`` None, 2, -2).
        p: the norm's order.

    Returns:
        Tensor: the condition numbers.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.cond(tb.tensor([[4.0, 0.0], [0.0, 2.0]])).item()
        2.0
    """
    if p in (None, 2, -2):
        sv = svdvals(a)
        big, small = R.amax(sv, -1), _amin(sv, -1)
        return E.div(big, small) if p != -2 else E.div(small, big)
    return E.mul(matrix_norm(a, p), matrix_norm(inv(a), p))


def matrix_rank(a, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values above the threshold of :func:`pinv`, as
    ``torch.linalg.matrix_rank``.

    Args:
        a: ``(..., m, n)``.
        atol: the absolute threshold.
        rtol: the relative threshold.
        hermitian: accepted.

    Returns:
        Tensor: int64 ranks.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.matrix_rank(tb.tensor([[1.0, 2.0], [2.0, 4.0]])).item()
        1
    """
    s = svdvals(a.detach())._data
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else \
            float(np.finfo(s.dtype).eps) * max(a.shape[-2:])
    xp = get_array_module(s)
    limit = xp.maximum(float(atol or 0.0), rtol * s.max(axis=-1, keepdims=True))
    return Tensor._wrap((s > limit).sum(axis=-1).astype(np.int64))


def lstsq(a, b, rcond=None, *, driver=None):
    """The least-squares solution of ``a X = b`` (through the pseudo-inverse, so it is
    differentiable), as ``torch.linalg.lstsq``.

    Args:
        a: ``(..., m, n)``.
        b: ``(..., m, k)``.
        rcond: the relative threshold for small singular values.
        driver: accepted.

    Returns:
        (solution, residuals, rank, singular_values): a named tuple; the last three are empty,
        as torch's default CPU driver leaves them for full-rank inputs.

    Example:
        >>> import tensorbrain as tb
        >>> a = tb.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
        >>> tb.linalg.lstsq(a, tb.tensor([[1.0], [2.0], [3.0]])).solution.tolist()
        [[1.0], [2.0]]
    """
    x = pinv(a, rtol=rcond) if rcond is not None else pinv(a)
    sol = S.matmul(x, b)
    xp = get_array_module(a._data)
    empty = Tensor._wrap(xp.zeros((0,), dtype=a._data.dtype))
    return Lstsq(sol, empty, Tensor._wrap(xp.zeros((0,), dtype=np.int64)), empty)


def eig(a):
    """The eigenvalues and eigenvectors of a general square matrix (complex), as
    ``torch.linalg.eig``; no gradient (use :func:`eigh` for Hermitian matrices).

    Args:
        a: ``(..., n, n)``.

    Returns:
        (eigenvalues, eigenvectors): complex tensors.

    Raises:
        NotImplementedError: ``a`` requires grad.

    Example:
        >>> import tensorbrain as tb
        >>> sorted(v.real for v in tb.linalg.eig(tb.tensor([[2.0, 0.0], [0.0, 3.0]])).eigenvalues.tolist())
        [2.0, 3.0]
    """
    if a.requires_grad:
        raise NotImplementedError("linalg.eig: gradients are not supported by TensorBrain; use "
                                  "linalg.eigh for Hermitian (symmetric) matrices")
    x = a._data
    w, v = np.linalg.eig(x) if get_array_module(x) is np else _no_gpu_eig()
    ctype = np.result_type(x.dtype, np.complex64)
    return Eig(Tensor._wrap(w.astype(ctype)), Tensor._wrap(v.astype(ctype)))


def _no_gpu_eig():
    raise NotImplementedError("linalg.eig on a CUDA tensor: CuPy has no general eigensolver; "
                              "move the tensor to the CPU, or use eigh for Hermitian matrices")


def eigvals(a):
    """The eigenvalues of a general square matrix (complex), as ``torch.linalg.eigvals``.

    Args:
        a: ``(..., n, n)``.

    Returns:
        Tensor: complex eigenvalues.
    """
    return eig(a).eigenvalues


__all__ = ["Eig", "Eigh", "LinAlgError", "Lstsq", "QR", "SVD", "SlogDet", "cholesky",
           "cholesky_ex", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals",
           "eigvalsh", "inv", "inv_ex", "lstsq", "matmul", "matrix_exp", "matrix_norm",
           "matrix_power", "matrix_rank", "multi_dot", "norm", "pinv", "qr", "slogdet", "solve",
           "solve_ex", "solve_triangular", "svd", "svdvals", "vecdot", "vector_norm"]
