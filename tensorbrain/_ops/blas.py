"""Matrix products beyond ``matmul``, written from it (so their gradients are its):
``addmm``, ``addmv``, ``addr``, ``addbmm``, ``baddbmm``, ``mv``, ``inner``, ``vdot``, ``ger``,
``cross``, ``cdist``, ``tensordot``, ``chain_matmul``; each follows the torch function of the
same name (``beta`` scales the added tensor, ``alpha`` the product; ``beta=0`` ignores it,
NaNs included, as torch).
"""
from __future__ import annotations

import numbers

import numpy as np

from .._tensor_base import TensorBase as Tensor
from . import elementwise as E
from . import reduce as R
from . import shape as S
from .complex import conj


def _scaled_sum(inp, prod, beta, alpha):
    prod = prod if alpha == 1 else E.mul(prod, alpha)
    if beta == 0:   # input is ignored (NaN and inf in it too): broadcast, a zero gradient
        ignored = E.where(Tensor._wrap(np.zeros((), dtype=bool)), inp, 0.0)
        return E.add(prod, ignored)
    return E.add(inp if beta == 1 else E.mul(inp, beta), prod)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)``, as ``torch.addmm``.

    Args:
        input: broadcast to the product's shape.
        mat1: ``(n, m)``.
        mat2: ``(m, p)``.
        beta: the factor on ``input``.
        alpha: the factor on the product.

    Returns:
        Tensor: ``(n, p)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.addmm(tb.ones(1), tb.eye(2), tb.ones(2, 1), alpha=2).tolist()
        [[3.0], [3.0]]
    """
    return _scaled_sum(input, S.matmul(mat1, mat2), beta, alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``, as ``torch.addmv``.

    Args:
        input: broadcast to ``(n,)``.
        mat: ``(n, m)``.
        vec: ``(m,)``.
        beta: the factor on ``input``.
        alpha: the factor on the product.

    Returns:
        Tensor: ``(n,)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.addmv(tb.ones(2), tb.eye(2), tb.tensor([1.0, 2.0])).tolist()
        [2.0, 3.0]
    """
    return _scaled_sum(input, S.matmul(mat, vec), beta, alpha)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``, as ``torch.addr``.

    Args:
        input: broadcast to ``(n, m)``.
        vec1: ``(n,)``.
        vec2: ``(m,)``.
        beta: the factor on ``input``.
        alpha: the factor on the outer product.

    Returns:
        Tensor: ``(n, m)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.addr(tb.zeros(2, 2), tb.tensor([1.0, 2.0]), tb.tensor([1.0, 0.0])).tolist()
        [[1.0, 0.0], [2.0, 0.0]]
    """
    return _scaled_sum(input, S.outer(vec1, vec2), beta, alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * (batch1 @ batch2)`` per batch, as ``torch.baddbmm``.

    Args:
        input: broadcast to ``(b, n, p)``.
        batch1: ``(b, n, m)``.
        batch2: ``(b, m, p)``.
        beta: the factor on ``input``.
        alpha: the factor on the products.

    Returns:
        Tensor: ``(b, n, p)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.baddbmm(tb.zeros(1, 1, 1), tb.ones(1, 1, 2), tb.ones(1, 2, 1)).tolist()
        [[[2.0]]]
    """
    return _scaled_sum(input, S.matmul(batch1, batch2), beta, alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_b(batch1[b] @ batch2[b])``, as ``torch.addbmm``.

    Args:
        input: broadcast to ``(n, p)``.
        batch1: ``(b, n, m)``.
        batch2: ``(b, m, p)``.
        beta: the factor on ``input``.
        alpha: the factor on the summed products.

    Returns:
        Tensor: ``(n, p)``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.addbmm(tb.zeros(1, 1), tb.ones(2, 1, 2), tb.ones(2, 2, 1)).tolist()
        [[4.0]]
    """
    return _scaled_sum(input, R.sum(S.matmul(batch1, batch2), 0), beta, alpha)


def mv(a, vec):
    """``a @ vec`` for a matrix and a vector, as ``torch.mv``.

    Args:
        a: ``(n, m)``.
        vec: ``(m,)``.

    Returns:
        Tensor: ``(n,)``.

    Raises:
        RuntimeError: not a matrix and a vector.

    Example:
        >>> import tensorbrain as tb
        >>> tb.mv(tb.eye(2), tb.tensor([1.0, 2.0])).tolist()
        [1.0, 2.0]
    """
    if a.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {a.ndim}, {vec.ndim}")
    return S.matmul(a, vec)


def inner(a, b):
    """The sum of products over the last dimensions, as ``torch.inner``.

    Args:
        a: a tensor (or a number).
        b: a tensor with ``a``'s last dimension.

    Returns:
        Tensor: ``a.shape[:-1] + b.shape[:-1]``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.inner(tb.tensor([1.0, 2.0]), tb.tensor([3.0, 4.0])).item()
        11.0
    """
    if isinstance(a, numbers.Number) or isinstance(b, numbers.Number) or a.ndim == 0 or \
            b.ndim == 0:
        return E.mul(a, b)
    return tensordot(a, b, ([-1], [-1]))


def vdot(a, b):
    """``sum(conj(a) * b)`` of two 1-D tensors, as ``torch.vdot``.

    Args:
        a: 1-D.
        b: 1-D, as long.

    Returns:
        Tensor: 0-d.

    Example:
        >>> import tensorbrain as tb
        >>> tb.vdot(tb.tensor([1.0, 2.0]), tb.tensor([3.0, 4.0])).item()
        11.0
    """
    return R.sum(E.mul(conj(a), b))


def ger(a, b):
    """The outer product (torch's old name of ``outer``), as ``torch.ger``.

    Args:
        a: 1-D.
        b: 1-D.

    Returns:
        Tensor: ``(len(a), len(b))``.

    Example:
        >>> import tensorbrain as tb
        >>> tb.ger(tb.tensor([1, 2]), tb.tensor([3])).tolist()
        [[3], [6]]
    """
    return S.outer(a, b)


def cross(a, b, dim=None):
    """The cross product of 3-vectors along ``dim``, as ``torch.cross`` (``dim=None``: the first
    dimension of size 3, torch's old default; ``torch.linalg.cross`` uses -1).

    Args:
        a: the first vectors.
        b: the second, broadcast with ``a``.
        dim: the dimension of size 3.

    Returns:
        Tensor: the broadcast shape.

    Raises:
        RuntimeError: the dimension does not have size 3.

    Example:
        >>> import tensorbrain as tb
        >>> tb.cross(tb.tensor([1.0, 0.0, 0.0]), tb.tensor([0.0, 1.0, 0.0])).tolist()
        [0.0, 0.0, 1.0]
    """
    if dim is None:
        dim = next((i for i, n in enumerate(a.shape) if n == 3), -1)
    if a.shape[dim] != 3 or b.shape[dim] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{a.shape[dim]} and {b.shape[dim]}")

    def part(t, i):
        return S.narrow(t, dim, i, 1)
    x = [E.sub(E.mul(part(a, (i + 1) % 3), part(b, (i + 2) % 3)),
               E.mul(part(a, (i + 2) % 3), part(b, (i + 1) % 3))) for i in range(3)]
    return S.cat(x, dim)


def tensordot(a, b, dims=2):
    """The sum of products over the given dimensions, as ``torch.tensordot``.

    Args:
        a: the first tensor.
        b: the second.
        dims: a number (the last ``dims`` of ``a`` with the first of ``b``) or two lists of
            dimensions.

    Returns:
        Tensor: ``a``'s other dimensions then ``b``'s.

    Example:
        >>> import tensorbrain as tb
        >>> tb.tensordot(tb.ones(2, 3), tb.ones(3, 4), 1).shape
        tb.Size([2, 4])
    """
    if isinstance(dims, numbers.Integral):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = ([dims[0]] if isinstance(dims[0], numbers.Integral) else list(dims[0]),
                  [dims[1]] if isinstance(dims[1], numbers.Integral) else list(dims[1]))
    da, db = [d % a.ndim for d in da], [d % b.ndim for d in db]
    ka, kb = [i for i in range(a.ndim) if i not in da], [i for i in range(b.ndim) if i not in db]
    size = 1
    for d in da:
        size *= a.shape[d]
    left = S.reshape(S.permute(a, *ka, *da), -1, size)
    right = S.reshape(S.permute(b, *db, *kb), size, -1)
    return S.reshape(S.matmul(left, right), *[a.shape[i] for i in ka],
                     *[b.shape[i] for i in kb])


def chain_matmul(*matrices):
    """The product of the matrices, left to right, as ``torch.chain_matmul``.

    Args:
        *matrices: 2-D tensors.

    Returns:
        Tensor: the product.

    Example:
        >>> import tensorbrain as tb
        >>> tb.chain_matmul(tb.eye(2), tb.ones(2, 1)).tolist()
        [[1.0], [1.0]]
    """
    out = matrices[0]
    for m in matrices[1:]:
        out = S.matmul(out, m)
    return out


def cdist(x1, x2, p=2.0, compute_mode="use_mm_for_euclid_dist_if_necessary"):
    """The ``p``-norm distance between every row of ``x1`` and every row of ``x2`` (batched),
    as ``torch.cdist``.

    Args:
        x1: ``(..., n, d)``.
        x2: ``(..., m, d)``.
        p: the norm's order (>= 0).
        compute_mode: accepted (the distances are computed directly).

    Returns:
        Tensor: ``(..., n, m)``; the gradient at a zero distance is 0, as torch's.

    Example:
        >>> import tensorbrain as tb
        >>> tb.cdist(tb.tensor([[0.0, 0.0]]), tb.tensor([[3.0, 4.0], [0.0, 1.0]])).tolist()
        [[5.0, 1.0]]
    """
    if p < 0:
        raise RuntimeError(f"cdist only supports non-negative p values, got {p}")
    diff = E.sub(S.unsqueeze(x1, -2), S.unsqueeze(x2, -3))
    if p == 2:
        sq = R.sum(E.mul(diff, diff), -1)
        safe = E.where(E.gt_(sq, 0), sq, 1.0)
        return E.where(E.gt_(sq, 0), E.sqrt(safe), 0.0)
    if p == 0:
        return R.sum(E.ne_(diff, 0), -1).to(x1.dtype)
    if p == float("inf"):
        return R.amax(E.abs(diff), -1)
    if p == 1:
        return R.sum(E.abs(diff), -1)
    s = R.sum(E.pow(E.abs(diff), p), -1)
    safe = E.where(E.gt_(s, 0), s, 1.0)
    return E.where(E.gt_(s, 0), E.pow(safe, 1.0 / p), 0.0)
