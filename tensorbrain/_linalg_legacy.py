"""torch's older linear-algebra names in the torch namespace, written from ``tb.linalg``:
``torch.logdet``, ``torch.pinverse``, ``torch.qr``/``torch.svd``/``torch.cholesky`` (their
older signatures: ``some``, ``compute_uv``, ``upper``), ``torch.cholesky_solve`` and
``torch.cholesky_inverse``. The op table makes them ``tb.*`` functions and Tensor methods.
"""
from __future__ import annotations

from typing import Any, NamedTuple


from ._ops import elementwise as E
from ._ops import shape as S
from ._ops.linalg_ops import (cholesky, inv, qr, slogdet, solve, svd)
from .linalg import pinv


# ***** torch's older names in the torch namespace (torch.qr, torch.svd, torch.pinverse...) *****
def logdet(a):
    """``log(det(a))`` (NaN for a negative determinant), as ``torch.logdet``.

    Args:
        a: ``(..., n, n)``.

    Returns:
        Tensor: the log-determinants.

    Example:
        >>> import tensorbrain as tb
        >>> tb.logdet(tb.eye(2)).item()
        0.0
    """
    sign, logabs = slogdet(a)
    return E.where(E.lt_(sign, 0), float("nan"), E.where(E.eq_(sign, 0), float("-inf"), logabs))


def pinverse(a, rcond=1e-15):
    """The pseudo-inverse with torch's older threshold argument, as ``torch.pinverse``.

    Args:
        a: ``(..., m, n)``.
        rcond: singular values below ``rcond * largest`` count as zero.

    Returns:
        Tensor: ``(..., n, m)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.pinverse(tb.tensor([[2.0]])).tolist()
        [[0.5]]
    """
    return pinv(a, rtol=rcond)


def legacy_qr(a, some=True):
    """``(Q, R)``, as ``torch.qr`` (``some=False`` is ``mode="complete"``).

    Args:
        a: ``(..., m, n)``.
        some: the reduced decomposition.

    Returns:
        (Q, R): a named tuple.

    Example:
        >>> import tensorbrain as tb
        >>> tb.qr(tb.eye(2)).Q.shape
        tb.Size([2, 2])
    """
    return qr(a, "reduced" if some else "complete")


def legacy_svd(a, some=True, compute_uv=True):
    """``(U, S, V)`` with ``a = U diag(S) V^H`` (``V``, not ``Vh``), as ``torch.svd``.

    Args:
        a: ``(..., m, n)``.
        some: the reduced decomposition.
        compute_uv: with False, ``U`` and ``V`` are zeros.

    Returns:
        (U, S, V): a named tuple (torch names its last field ``V``).

    Example:
        >>> import tensorbrain as tb
        >>> tb.svd(tb.tensor([[3.0, 0.0], [0.0, 1.0]])).S.tolist()
        [3.0, 1.0]
    """
    from ._ops.complex import adjoint
    u, s, vh = svd(a, full_matrices=not some)
    if not compute_uv:
        u, vh = u.detach() * 0, vh.detach() * 0
    return LegacySVD(u, s, adjoint(vh))


class LegacySVD(NamedTuple):
    """``(U, S, V)`` returned by ``torch.svd``."""
    U: Any
    S: Any
    V: Any


def legacy_cholesky(a, upper=False):
    """The Cholesky factor, as ``torch.cholesky`` (``upper`` positional).

    Args:
        a: ``(..., n, n)``.
        upper: return the upper factor.

    Returns:
        Tensor: the factor.

    Example:
        >>> import tensorbrain as tb
        >>> tb.cholesky(tb.tensor([[4.0]])).tolist()
        [[2.0]]
    """
    return cholesky(a, upper=upper)


def cholesky_solve(b, L, upper=False):
    """``X`` with ``(L L^H) X = b``, given the Cholesky factor ``L``, as
    ``torch.cholesky_solve``.

    Args:
        b: ``(..., n, k)``.
        L: the factor ``(..., n, n)``.
        upper: ``L`` is upper (``U^H U``).

    Returns:
        Tensor: ``b``'s shape.

    Example:
        >>> import tensorbrain as tb
        >>> tb.cholesky_solve(tb.tensor([[4.0]]), tb.tensor([[2.0]])).tolist()
        [[1.0]]
    """
    from ._ops.complex import adjoint
    a = S.matmul(adjoint(L), L) if upper else S.matmul(L, adjoint(L))
    return solve(a, b)


def cholesky_inverse(L, upper=False):
    """The inverse of ``L L^H`` from its Cholesky factor, as ``torch.cholesky_inverse``.

    Args:
        L: ``(..., n, n)``.
        upper: ``L`` is upper.

    Returns:
        Tensor: the inverse.

    Example:
        >>> import tensorbrain as tb
        >>> tb.cholesky_inverse(tb.tensor([[2.0]])).tolist()
        [[0.25]]
    """
    from ._ops.complex import adjoint
    return inv(S.matmul(adjoint(L), L) if upper else S.matmul(L, adjoint(L)))
