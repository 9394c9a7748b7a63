"""Linear algebra with gradients: ``inv``, ``det``, ``slogdet``, ``solve``,
``solve_triangular``, ``cholesky``, ``qr``, ``eigh``, ``svd`` (NumPy's / CuPy's LAPACK for the
forward pass, each op's backward written beside it, the formulas torch's
``FunctionsManual.cpp`` uses); and composites of them (``pinv``, ``matrix_power``,
``matrix_exp``, norms) in ``tensorbrain/linalg.py``. Batched inputs (``(..., n, n)``) work
throughout, as torch's.

A singular matrix raises :class:`LinAlgError` (a RuntimeError) naming the operation, as
torch's ``torch.linalg.LinAlgError``.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from .core import make


class LinAlgError(RuntimeError):
    """A linear-algebra routine failed (a singular or non-positive-definite input), as
    ``torch.linalg.LinAlgError``."""


class SlogDet(NamedTuple):
    """``(sign, logabsdet)``."""
    sign: Any
    logabsdet: Any


class QR(NamedTuple):
    """``(Q, R)``."""
    Q: Any
    R: Any


class Eigh(NamedTuple):
    """``(eigenvalues, eigenvectors)``."""
    eigenvalues: Any
    eigenvectors: Any


class SVD(NamedTuple):
    """``(U, S, Vh)``."""
    U: Any
    S: Any
    Vh: Any


def _h(x):
    """The conjugate transpose of the last two dimensions."""
    xp = get_array_module(x)
    t = xp.swapaxes(x, -1, -2)
    return t.conj() if t.dtype.kind == "c" else t


def _lapack(name, fn, *args):
    xp = get_array_module(args[0])
    try:
        return fn(*args)
    except xp.linalg.LinAlgError as exc:
        raise LinAlgError(f"linalg.{name}: {exc} (the input is singular or not positive-"
                          f"definite)") from None


def _float(a):
    x = a._data
    if x.dtype.kind in "biu":
        raise RuntimeError(f"linalg: expected a floating point or complex tensor as input, got "
                           f"{x.dtype}")
    return x


def inv(a):
    """The inverse of a square matrix (or a batch), as ``torch.linalg.inv``.

    Args:
        a: ``(..., n, n)``.

    Returns:
        Tensor: the inverse.

    Raises:
        LinAlgError: ``a`` is singular.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.inv(tb.tensor([[2.0, 0.0], [0.0, 4.0]])).tolist()
        [[0.5, 0.0], [0.0, 0.25]]
    """
    x = _float(a)
    xp = get_array_module(x)
    out = _lapack("inv", xp.linalg.inv, x)
    return make(out, (a,), lambda g: (-(_h(out) @ g @ _h(out)),), "LinalgInvBackward")


def det(a):
    """The determinant, as ``torch.linalg.det``.

    Args:
        a: ``(..., n, n)``.

    Returns:
        Tensor: ``a.shape[:-2]``; the gradient is ``g * det * inv(a)^H`` (it needs ``a``
        invertible, as torch's first-order formula).

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.det(tb.tensor([[2.0, 1.0], [1.0, 3.0]])).item()
        5.0
    """
    x = _float(a)
    xp = get_array_module(x)
    out = xp.linalg.det(x)

    def backward(g):
        return ((g * out.conj())[..., None, None] * _h(_lapack("det", xp.linalg.inv, x)),)
    return make(out.astype(x.dtype, copy=False), (a,), backward, "LinalgDetBackward", (a,))


def slogdet(a):
    """``(sign, log|det|)``, as ``torch.linalg.slogdet``.

    Args:
        a: ``(..., n, n)``.

    Returns:
        (sign, logabsdet): a named tuple; the gradient reaches ``a`` through ``logabsdet``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.slogdet(tb.tensor([[-2.0, 0.0], [0.0, 1.0]])).sign.item()
        -1.0
    """
    x = _float(a)
    xp = get_array_module(x)
    sign, logabs = xp.linalg.slogdet(x)

    def backward(g):
        return (g[..., None, None] * _h(_lapack("slogdet", xp.linalg.inv, x)),)
    return SlogDet(Tensor._wrap(sign.astype(x.dtype, copy=False)),
                   make(logabs.astype(x.real.dtype, copy=False), (a,), backward,
                        "LinalgSlogdetBackward", (a,)))


def solve(a, b, *, left=True):
    """``X`` with ``a @ X = b`` (or ``X @ a = b`` with ``left=False``), as
    ``torch.linalg.solve``.

    Args:
        a: ``(..., n, n)``.
        b: ``(..., n, k)`` or ``(..., n)``.
        left: solve ``a X = b`` (True) or ``X a = b``.

    Returns:
        Tensor: ``b``'s shape.

    Raises:
        LinAlgError: ``a`` is singular.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.solve(tb.tensor([[2.0, 0.0], [0.0, 4.0]]), tb.tensor([2.0, 2.0])).tolist()
        [1.0, 0.5]
    """
    if not left:
        from .shape import transpose
        return transpose(solve(transpose(a, -2, -1), transpose(b, -2, -1)), -2, -1)
    x, y = _float(a), b._data
    xp = get_array_module(x)
    vec = y.ndim == x.ndim - 1
    yy = y[..., None] if vec else y
    out = _lapack("solve", xp.linalg.solve, x, yy)

    def backward(g):
        gg = g[..., None] if vec else g
        gb = _lapack("solve", xp.linalg.solve, _h(x), gg)
        ga = -gb @ _h(out)
        from .core import unbroadcast
        return unbroadcast(ga, x.shape), (gb[..., 0] if vec else gb)
    return make(out[..., 0] if vec else out, (a, b), backward, "LinalgSolveBackward", (a, b))


def solve_triangular(a, b, *, upper, left=True, unitriangular=False):
    """``X`` with ``a @ X = b`` for a triangular ``a``, as ``torch.linalg.solve_triangular``.

    Args:
        a: ``(..., n, n)``, triangular.
        b: ``(..., n, k)``.
        upper: ``a`` is upper (True) or lower triangular; the other triangle is ignored.
        left: solve ``a X = b`` (True) or ``X a = b``.
        unitriangular: ``a``'s diagonal is taken as ones.

    Returns:
        Tensor: ``b``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> a = tb.tensor([[2.0, 1.0], [0.0, 1.0]])
        >>> tb.linalg.solve_triangular(a, tb.tensor([[3.0], [1.0]]), upper=True).tolist()
        [[1.0], [1.0]]
    """
    from . import elementwise as E
    from . import shape as S
    xp = get_array_module(a._data)
    n = a.shape[-1]
    mask = xp.triu(xp.ones((n, n), dtype=bool)) if upper else xp.tril(xp.ones((n, n), dtype=bool))
    tri = E.where(Tensor._wrap(mask), a, 0.0)
    if unitriangular:
        eye = Tensor._wrap(xp.eye(n, dtype=bool))
        tri = E.where(eye, 1.0, tri)
    return solve(tri, b, left=left) if left else \
        S.transpose(solve(S.transpose(tri, -2, -1), S.transpose(b, -2, -1)), -2, -1)


def cholesky(a, *, upper=False):
    """The Cholesky factor of a Hermitian positive-definite matrix, as
    ``torch.linalg.cholesky``.

    Args:
        a: ``(..., n, n)``.
        upper: return ``U`` with ``a = U^H U`` instead of ``L`` with ``a = L L^H``.

    Returns:
        Tensor: the factor.

    Raises:
        LinAlgError: ``a`` is not positive-definite.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.cholesky(tb.tensor([[4.0, 2.0], [2.0, 2.0]])).tolist()
        [[2.0, 0.0], [1.0, 1.0]]
    """
    x = _float(a)
    xp = get_array_module(x)
    L = _lapack("cholesky", xp.linalg.cholesky, x)

    def backward(g):
        gL = _h(g) if upper else g
        phi = xp.tril(_h(L) @ gL)
        d = xp.diagonal(phi, 0, -2, -1).copy()
        idx = xp.arange(phi.shape[-1])
        phi[..., idx, idx] = d * 0.5
        Linv = _lapack("cholesky", xp.linalg.inv, L)
        s = _h(Linv) @ phi @ Linv
        return ((s + _h(s)) / 2,)
    return make(_h(L) if upper else L, (a,), backward, "LinalgCholeskyBackward")


def qr(a, mode="reduced"):
    """The QR decomposition, as ``torch.linalg.qr``.

    Args:
        a: ``(..., m, n)``.
        mode: ``"reduced"`` (``Q`` is ``(m, k)``, ``k = min(m, n)``), ``"complete"`` or ``"r"``
            (``Q`` empty).

    Returns:
        (Q, R): a named tuple; gradients for ``"reduced"`` (and square ``"complete"``) with
        ``m >= n``, as torch supports them.

    Raises:
        ValueError: an unknown mode.

    Example:
        >>> import tensorbrain as tb
        >>> q, r = tb.linalg.qr(tb.tensor([[3.0, 0.0], [4.0, 5.0]]))
        >>> [round(v, 4) for v in r.diagonal().abs().tolist()]
        [5.0, 3.0]
    """
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"qr received unrecognized mode '{mode}' but expected one of "
                         f"'reduced' (default), 'r', or 'complete'")
    x = _float(a)
    xp = get_array_module(x)
    q, r = xp.linalg.qr(x, mode="complete" if mode == "complete" else "reduced")
    if mode == "r":
        return QR(Tensor._wrap(xp.zeros((0,), dtype=x.dtype)),
                  make(r, (a,), None, "LinalgQrBackward"))
    m, n = x.shape[-2], x.shape[-1]

    def backward_qr(gq, gr):
        if m < n:
            raise NotImplementedError("linalg.qr: the gradient for inputs with more columns "
                                      "than rows is not supported (as in torch's mode="
                                      "'reduced' for m < n)")
        M = r @ _h(gr) - _h(gq) @ q
        M = xp.tril(M, -1) + _h(xp.tril(M, -1)) + xp.tril(xp.triu(M))   # copyltu
        b = gq + q @ M
        return _solve_upper_right(xp, b, r)
    qt, rt = _pair(a, q, r, backward_qr, "LinalgQrBackward")
    return QR(qt, rt)


def _solve_upper_right(xp, b, r):
    """``b @ inv(r)^H`` for an upper-triangular ``r`` (a solve, not an inverse)."""
    return _h(xp.linalg.solve(r, _h(b)))


def _pair(a, first, second, backward, name):
    """Two outputs with one backward formula, linear in the two gradients: each output's node
    gives its own part (the other gradient zero), and autograd adds the parts."""
    xp = get_array_module(first)
    return (make(first, (a,), lambda g: (backward(g, xp.zeros_like(second)),), name, (a,)),
            make(second, (a,), lambda g: (backward(xp.zeros_like(first), g),), name, (a,)))


def eigh(a, UPLO="L"):  # noqa: N803  (torch's name)
    """The eigenvalues (ascending) and eigenvectors of a Hermitian matrix, as
    ``torch.linalg.eigh``.

    Args:
        a: ``(..., n, n)``, Hermitian.
        UPLO: which triangle to read (``"L"`` or ``"U"``).

    Returns:
        (eigenvalues, eigenvectors): a named tuple; gradients need distinct eigenvalues, as
        torch's.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.eigh(tb.tensor([[2.0, 0.0], [0.0, 1.0]])).eigenvalues.tolist()
        [1.0, 2.0]
    """
    x = _float(a)
    xp = get_array_module(x)
    w, v = xp.linalg.eigh(x, UPLO=UPLO)

    def backward(gw, gv):
        diff = w[..., None, :] - w[..., :, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            f = xp.where(diff == 0, 0, 1 / diff)
        inner = _h(v) @ gv
        inner = f * (inner - _h(inner)) / 2 if x.dtype.kind != "c" else f * inner
        eye = xp.eye(x.shape[-1], dtype=x.dtype)
        core = inner + gw[..., None, :] * eye
        out = v @ core @ _h(v)
        return (out + _h(out)) / 2 if x.dtype.kind != "c" else out
    wt, vt = _pair(a, w.astype(x.real.dtype, copy=False), v, backward, "LinalgEighBackward")
    return Eigh(wt, vt)


def eigvalsh(a, UPLO="L"):  # noqa: N803
    """The eigenvalues of a Hermitian matrix, ascending, as ``torch.linalg.eigvalsh``.

    Args:
        a: ``(..., n, n)``.
        UPLO: which triangle to read.

    Returns:
        Tensor: ``(..., n)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.eigvalsh(tb.tensor([[2.0, 0.0], [0.0, 1.0]])).tolist()
        [1.0, 2.0]
    """
    return eigh(a, UPLO).eigenvalues


def svd(a, full_matrices=True, *, driver=None):
    """The singular value decomposition ``a = U diag(S) Vh``, as ``torch.linalg.svd``.

    Args:
        a: ``(..., m, n)``.
        full_matrices: ``U`` and ``Vh`` square (True) or reduced to ``k = min(m, n)``.
        driver: accepted (CUDA's choice of solver).

    Returns:
        (U, S, Vh): a named tuple; gradients need distinct singular values and, through ``U``
        or ``Vh``, ``full_matrices=False``, as torch's.

    Example:
        >>> import tensorbrain as tb
        >>> tb.linalg.svd(tb.tensor([[3.0, 0.0], [0.0, -2.0]])).S.tolist()
        [3.0, 2.0]
    """
    x = _float(a)
    xp = get_array_module(x)
    u, s, vh = _lapack("svd", xp.linalg.svd, x, full_matrices)
    s = s.astype(x.real.dtype, copy=False)
    k = s.shape[-1]
    m, n = x.shape[-2], x.shape[-1]

    def backward(gu, gs, gvh):
        """torch's svd_backward (real and complex), linear in (gu, gs, gvh)."""
        U, Vh = u[..., :, :k], vh[..., :k, :]
        V = _h(Vh)
        out = (U * gs[..., None, :]) @ Vh if gs is not None else xp.zeros(x.shape, x.dtype)
        if gu is None and gvh is None:
            return out
        if full_matrices and m != n:
            raise RuntimeError("linalg.svd: the gradient through U or Vh of a non-square matrix "
                               "needs full_matrices=False (as in torch)")
        gU = xp.zeros_like(U) if gu is None else gu[..., :, :k]
        gV = xp.zeros_like(V) if gvh is None else _h(gvh[..., :k, :])
        s2 = s * s
        diff = s2[..., None, :] - s2[..., :, None]
        with np.errstate(divide="ignore", invalid="ignore"):
            F = xp.where(diff == 0, 0, 1 / diff)
            sinv = xp.where(s == 0, 0, 1 / s)
        J = F * (_h(U) @ gU)
        K = F * (_h(V) @ gV)
        mid = ((J + _h(J)) * s[..., None, :]) + (s[..., :, None] * (K + _h(K)))
        if x.dtype.kind == "c":   # the imaginary part of diag(U^H gU) (a phase term)
            d = xp.diagonal(_h(U) @ gU, 0, -2, -1)
            mid = mid + xp.eye(k, dtype=x.dtype) * (1j * d.imag * sinv / 2)[..., None, :]
        out = out + U @ mid @ Vh
        if m > k:   # the part of gU outside U's column space
            out = out + ((gU - U @ (_h(U) @ gU)) * sinv[..., None, :]) @ Vh
        if n > k:
            out = out + U @ (sinv[..., :, None] * _h(gV - V @ (_h(V) @ gV)))
        return out

    def node(value, which):
        def bw(g):
            grads = [None, None, None]
            grads[which] = g
            return (backward(*grads),)
        return make(value, (a,), bw, "LinalgSvdBackward", (a,))
    return SVD(node(u, 0), node(s, 1), node(vh, 2))
