"""``tb.einsum``: Einstein summation with torch's equation rules and a backward.

The equation is first made explicit: ``...`` becomes letters (shorter operands are padded with
size-1 dimensions on the left), an implicit output (no ``->``) becomes torch's (the ellipsis
dimensions, then the letters used once, in alphabetical order), and a size-1 dimension that
meets a larger one of the same letter is expanded, as torch broadcasts them. Padding and
expanding are ordinary ops, so their gradients are summed back by autograd. What remains has one
size per letter, and the gradient of operand ``i`` is itself an einsum: the output gradient and
the other operands contracted to operand ``i``'s letters, broadcast over the letters that only
operand ``i`` has (they were summed away).
"""
from __future__ import annotations

import string

from .._tensor_base import TensorBase as Tensor
from .._xp import get_array_module
from . import shape as S
from .core import make


def _parse(equation, ndims):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ndims):
        raise RuntimeError(f"einsum(): the equation {equation!r} has {len(terms)} operand(s) but "
                           f"{len(ndims)} tensor(s) were given")
    used = set(eq) - set(".,->")
    bad = [c for c in used if c not in string.ascii_letters]
    if bad:
        raise RuntimeError(f"einsum(): invalid subscript {bad[0]!r} in {equation!r}: subscripts "
                           f"must be letters [a-zA-Z]")
    free = [c for c in string.ascii_letters if c not in used]
    n_ell = max((nd - len(t.replace("...", "")) for t, nd in zip(terms, ndims) if "..." in t),
                default=0)
    ell = "".join(free[:n_ell])
    subs, starts = [], []
    for t, nd in zip(terms, ndims):
        starts.append(t.find("...") if "..." in t else None)
        if "..." in t:
            k = nd - len(t.replace("...", ""))
            if k < 0:
                raise RuntimeError(f"einsum(): the operand subscripted {t!r} has {nd} dimension(s), "
                                   f"fewer than its letters")
            t = t.replace("...", ell[n_ell - k:])
        if len(t) != nd:
            raise RuntimeError(f"einsum(): the operand subscripted {t!r} has {nd} dimension(s) "
                               f"but {len(t)} subscript(s)")
        subs.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        counts = {c: sum(s.count(c) for s in subs) for c in set("".join(subs)) - set(ell)}
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1))
    if len(set(out)) != len(out) or any(c not in "".join(subs) for c in out):
        raise RuntimeError(f"einsum(): output subscripts {out!r} must be distinct and appear in an "
                           f"operand ({equation!r})")
    return subs, out, ell, starts


def einsum(equation, *operands):
    """Sum products of the operands' elements over the indices the equation names.

    As ``torch.einsum``: ``einsum("bij,bjk->bik", a, b)``, the operands also as one list, ``...``
    for broadcast dimensions, an implicit output when there is no ``->``.

    Args:
        equation: the subscripts, e.g. ``"bhid,bhjd->bhij"``.
        *operands: the tensors (or one list of them).

    Returns:
        Tensor: the result; gradients flow to every operand.

    Raises:
        RuntimeError: a malformed equation, or sizes of one subscript that do not broadcast.

    Example:
        >>> import tensorbrain as tb
        >>> tb.einsum("ij,j->i", tb.ones(2, 3), tb.arange(3.0)).tolist()
        [3.0, 3.0]
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    subs, out, ell, starts = _parse(equation, [op.dim() for op in operands])
    ops = list(operands)
    for i, (s, op, at) in enumerate(zip(subs, ops, starts)):   # pad short ellipses with 1s
        missing = len(ell) - sum(c in ell for c in s) if at is not None else 0
        if missing:
            ops[i] = S.reshape(op, *(tuple(op.shape[:at]) + (1,) * missing + tuple(op.shape[at:])))
            subs[i] = s[:at] + ell[:missing] + s[at:]
    sizes: dict = {}
    for s, op in zip(subs, ops):
        for c, n in zip(s, op.shape):
            if n != 1 and sizes.get(c, 1) not in (1, n):
                raise RuntimeError(f"einsum(): subscript {c!r} has size {n} for one operand and "
                                   f"{sizes[c]} for another; they do not broadcast "
                                   f"({equation!r})")
            sizes[c] = max(sizes.get(c, 1), n)
    for i, (s, op) in enumerate(zip(subs, ops)):   # broadcast size-1 dimensions
        want = tuple(sizes[c] for c in s)
        if tuple(op.shape) != want:
            ops[i] = S.expand(op, *want)
    for s in subs:
        if len(set(s)) != len(s):
            return _einsum_diagonal(subs, out, ops)
    data = [op._data for op in ops]
    xp = get_array_module(data[0])
    result = xp.einsum(",".join(subs) + "->" + out, *data, optimize=len(data) > 2)

    def backward(g):
        grads = []
        for i, (s, x) in enumerate(zip(subs, data)):
            if not ops[i].requires_grad:
                grads.append(None)
                continue
            others = [t for j, t in enumerate(subs) if j != i]
            present = set(out).union(*others)
            kept = "".join(c for c in s if c in present)
            gi = xp.einsum(",".join([out] + others) + "->" + kept, g,
                           *[d for j, d in enumerate(data) if j != i])
            if kept != s:   # letters only this operand had were summed away: broadcast back
                gi = xp.broadcast_to(gi.reshape([sizes[c] if c in kept else 1 for c in s]), x.shape)
            grads.append(xp.ascontiguousarray(gi))
        return tuple(grads)
    return make(result, tuple(ops), backward, "EinsumBackward", tuple(ops))


def _einsum_diagonal(subs, out, ops):
    """Forward only, for an operand with a repeated subscript (``"ii->i"``)."""
    if any(op.requires_grad for op in ops):
        raise NotImplementedError("einsum(): the gradient of an equation with a repeated subscript "
                                  "in one operand (a diagonal, such as 'ii->i') is not supported; "
                                  "use torch.diagonal-style indexing instead")
    data = [op._data for op in ops]
    return Tensor._wrap(get_array_module(data[0]).einsum(",".join(subs) + "->" + out, *data))
