"""``tb.autograd.functional`` (``torch.autograd.functional``): the Jacobian and the
vector-Jacobian product of a function of tensors, by reverse-mode passes on TensorBrain's
tape (the Jacobian: one backward pass per output element).

The Jacobian-vector product :func:`jvp` (forward mode in torch) is exact here too: each output
element's row of the Jacobian comes from one backward pass and is contracted with ``v``, so it
costs one backward pass per output element (fine for the small outputs it is used on; slow for
large ones). The transforms that need higher-order gradients (``hessian``, ``hvp``, ``vhp``, and
``create_graph=True``) are refused by name: TensorBrain's autograd records no backward pass of a
backward pass.

>>> import tensorbrain as tb
>>> from tensorbrain.autograd.functional import jacobian
>>> jacobian(lambda x: x ** 2, tb.tensor([1.0, 2.0])).tolist()
[[2.0, 0.0], [0.0, 4.0]]
"""
from __future__ import annotations

from .._tensor_base import TensorBase as Tensor
from .._unsupported import unsupported
from . import grad as _grad
from .grad_mode import enable_grad

_HIGHER = "it needs higher-order (or forward-mode) gradients, which TensorBrain's autograd " \
          "does not record"


def _as_tuple(x, what: str):
    is_tuple = isinstance(x, (tuple, list))
    items = tuple(x) if is_tuple else (x,)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"The {what} given to {_CALLER[0]} must be either a Tensor or a tuple "
                            f"of Tensors but the value at index {i} has type {type(t).__name__}.")
    return is_tuple, items


_CALLER = ["jacobian"]


def _refuse_create_graph(name: str, create_graph: bool) -> None:
    if create_graph:
        raise NotImplementedError(f"torch.autograd.functional.{name}(create_graph=True) is not "
                                  f"supported by TensorBrain: {_HIGHER}")


def _prepare(inputs):
    return tuple(t.detach().requires_grad_(True) for t in inputs)


def vjp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``func(inputs)`` and the product ``v^T J`` of ``v`` with its Jacobian, as
    ``torch.autograd.functional.vjp``.

    Args:
        func: a function of tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors.
        v: the vector(s), shaped as the outputs (may be None for a one-element output).
        create_graph: only False.
        strict: raise when an output does not depend on an input (else zeros).

    Returns:
        ``(outputs, vjp)``, both detached, each a tensor or tuple following ``func``'s and
        ``inputs``' form.

    Raises:
        RuntimeError: ``v`` is None and the output has more than one element, or (``strict``)
            an input does not reach the outputs.
    """
    _refuse_create_graph("vjp", create_graph)
    _CALLER[0] = "vjp"
    in_tuple, xs = _as_tuple(inputs, "inputs")
    xs = _prepare(xs)
    with enable_grad():
        out = func(*xs)
    out_tuple, outs = _as_tuple(out, "outputs of the user-provided function")
    if v is None:
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the user-provided function "
                               "returns a single Tensor with a single element.")
        vs = (None,)
    else:
        vs = _as_tuple(v, "v")[1]
        for o, w in zip(outs, vs):
            if tuple(o.shape) != tuple(w.shape):
                raise RuntimeError(f"Mismatch in shape: v has shape {tuple(w.shape)} and the "
                                   f"output has shape {tuple(o.shape)}")
    pairs = [(o, w) for o, w in zip(outs, vs) if o.requires_grad]
    if pairs:
        grads = _grad([o for o, _ in pairs], xs, [w for _, w in pairs], allow_unused=True)
    else:
        grads = (None,) * len(xs)
    res = []
    for i, (x, g) in enumerate(zip(xs, grads)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode.")
            g = x.detach() * 0
        res.append(g.detach())
    outs_d = tuple(o.detach() for o in outs)
    return (outs_d if out_tuple else outs_d[0]), (tuple(res) if in_tuple else res[0])


def jacobian(func, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``, as ``torch.autograd.functional.jacobian``: entry
    ``[i][j]`` has shape ``outputs[i].shape + inputs[j].shape``.

    Args:
        func: a function of tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors.
        create_graph: only False.
        strict: raise when an output does not depend on an input (else zeros).
        vectorize: accepted (the rows are computed one backward pass each either way).
        strategy: ``"reverse-mode"`` or ``"forward-mode"`` (same values here).

    Returns:
        A tensor when ``func`` returns one tensor and ``inputs`` is one tensor; a tuple when one
        of them is a tuple; a tuple of tuples when both are.

    Raises:
        ValueError: an unknown ``strategy``, or ``"forward-mode"`` without ``vectorize``
            (torch's rule).
    """
    _refuse_create_graph("jacobian", create_graph)
    if strategy not in ("forward-mode", "reverse-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: '
                         'If your function has more outputs than inputs, "forward-mode" tends '
                         'to be more performant. Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise ValueError("torch.autograd.functional.jacobian: `strategy=\"forward-mode\"` is "
                         "only implemented together with `vectorize=True`.")
    _CALLER[0] = "jacobian"
    in_tuple, xs = _as_tuple(inputs, "inputs")
    xs = _prepare(xs)
    with enable_grad():
        out = func(*xs)
    out_tuple, outs = _as_tuple(out, "outputs of the user-provided function")
    from .._ops import shape as S
    table = []
    for i, o in enumerate(outs):
        flat = S.reshape(o, -1)
        rows: list = [[] for _ in xs]
        for k in range(flat.shape[0]):
            gs = (_grad(flat[k], xs, retain_graph=True, allow_unused=True) if o.requires_grad
                  else (None,) * len(xs))
            for j, (x, g) in enumerate(zip(xs, gs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is "
                                           f"independent of input {j}. This is not allowed in "
                                           f"strict mode.")
                    g = x.detach() * 0
                rows[j].append(g.detach())
        entry = []
        for j, x in enumerate(xs):
            if rows[j]:
                block = S.reshape(S.stack(rows[j]), *o.shape, *x.shape)
            else:   # an empty output
                block = x.detach().new_zeros(tuple(o.shape) + tuple(x.shape))
            entry.append(block)
        table.append(tuple(entry))
    if out_tuple and in_tuple:
        return tuple(table)
    if out_tuple:
        return tuple(e[0] for e in table)
    if in_tuple:
        return table[0]
    return table[0][0]


hessian = unsupported("torch.autograd.functional.hessian", _HIGHER,
                      "jacobian of a function you differentiate by hand, or finite differences "
                      "of jacobian")
hvp = unsupported("torch.autograd.functional.hvp", _HIGHER,
                  "finite differences of vjp: (vjp(f', x + eps*v) - vjp(f', x)) / eps")
vhp = unsupported("torch.autograd.functional.vhp", _HIGHER,
                  "finite differences of vjp: (vjp(f', x + eps*v) - vjp(f', x)) / eps")


def jvp_rows(outs, xs, vs, strict: bool = False) -> tuple:
    """``J v`` for each of ``outs`` (tensors on the tape) with respect to ``xs`` (tensors that
    require grad), the tangents ``vs`` shaped as ``xs``: exact, one backward pass per output
    element (the row ``d out[k] / d xs``, contracted with ``vs``). The graph is retained, so
    the outputs can still be differentiated afterwards.

    Args:
        outs: the output tensors.
        xs: the inputs.
        vs: the tangents, one per input, of the same shapes.
        strict: raise when an output does not depend on any input (else zeros).

    Returns:
        One detached tensor per output, shaped as it.
    """
    from .._ops import shape as S
    res = []
    for i, o in enumerate(outs):
        flat = S.reshape(o, -1)
        vals = []
        for k in range(flat.shape[0]):
            gs = (_grad(flat[k], xs, retain_graph=True, allow_unused=True) if o.requires_grad
                  else (None,) * len(xs))
            if strict and all(g is None for g in gs):
                raise RuntimeError(f"The output {i} of the user-provided function is independent "
                                   f"of the inputs. This is not allowed in strict mode.")
            acc = None
            for g, w in zip(gs, vs):
                if g is not None:
                    term = (g.detach() * w.detach()).sum()
                    acc = term if acc is None else acc + term
            vals.append(acc if acc is not None else o.detach().new_zeros(()))
        res.append(S.reshape(S.stack(vals), *o.shape).to(o.dtype) if vals
                   else o.detach().new_zeros(tuple(o.shape)))
    return tuple(res)


def _check_tangents(xs, vs, caller: str) -> None:
    if len(vs) != len(xs):
        raise RuntimeError(f"{caller}: Expected primals and tangents to have the same length "
                           f"(got {len(xs)} primals and {len(vs)} tangents)")
    for x, w in zip(xs, vs):
        if tuple(x.shape) != tuple(w.shape):
            raise RuntimeError(f"Trying to set a forward gradient that has a different size than "
                               f"that of the original Tensor, this is not supported. Tensor is of "
                               f"size {list(x.shape)} while the given forward gradient is of size "
                               f"{list(w.shape)}.")


def jvp(func, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """``func(inputs)`` and the product ``J v`` of its Jacobian with ``v``, as
    ``torch.autograd.functional.jvp`` (exact: one backward pass per output element).

    Args:
        func: a function of tensors returning a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors.
        v: the tangent(s), shaped as ``inputs`` (may be None for a one-element input).
        create_graph: only False.
        strict: raise when an output does not depend on the inputs (else zeros).

    Returns:
        ``(outputs, jvp)``, both detached, each a tensor or a tuple following ``func``'s form.

    Raises:
        RuntimeError: ``v`` is None and the input has more than one element, or a tangent's
            shape differs from its input's.

    Example:
        >>> import tensorbrain as tb
        >>> from tensorbrain.autograd.functional import jvp
        >>> jvp(lambda x: x ** 2, tb.tensor([1.0, 2.0]), tb.tensor([1.0, 1.0]))[1].tolist()
        [2.0, 4.0]
    """
    _refuse_create_graph("jvp", create_graph)
    _CALLER[0] = "jvp"
    _, xs = _as_tuple(inputs, "inputs")
    xs = _prepare(xs)
    if v is None:
        if len(xs) != 1 or xs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided "
                               "function is a single Tensor with a single element.")
        vs: tuple = (xs[0].detach() * 0 + 1,)
    else:
        vs = _as_tuple(v, "v")[1]
    _check_tangents(xs, vs, "jvp")
    with enable_grad():
        out = func(*xs)
    out_tuple, outs = _as_tuple(out, "outputs of the user-provided function")
    rows = jvp_rows(outs, xs, vs, strict)
    outs_d = tuple(o.detach() for o in outs)
    return (outs_d, rows) if out_tuple else (outs_d[0], rows[0])

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]
