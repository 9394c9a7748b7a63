"""``tb.func`` (``torch.func``): function transforms, on TensorBrain's tape autograd.

- :func:`functional_call` runs a module with other parameter and buffer values (swapped in for
  the call, restored after), as torch's;
- :func:`grad` and :func:`grad_and_value` differentiate a function that returns a scalar with
  respect to its ``argnums`` arguments (one backward pass each call);
- :func:`vmap` maps a function over a batch dimension by calling it once per slice and
  stacking the results: the same values as torch's vectorised map, at a loop's speed;
- :func:`jacrev` computes a Jacobian one backward pass per output element;
- :func:`jvp` gives the exact Jacobian-vector product (forward mode in torch) from the same
  rows, one backward pass per output element: the tangent output is detached (differentiating
  it again would need second-order gradients), the primal output keeps its graph as torch's.

Transforms of transforms (``grad(grad(f))``, ``vmap(grad(f))`` with ``create_graph``) need
higher-order gradients, which TensorBrain does not have: the inner call raises.

>>> import tensorbrain as tb
>>> tb.func.grad(lambda x: (x * x).sum())(tb.tensor([1.0, 2.0])).tolist()
[2.0, 4.0]
"""
from __future__ import annotations

import contextlib

from . import autograd
from ._ops import shape as S
from ._tensor_base import TensorBase as Tensor


@contextlib.contextmanager
def _swapped(module, values: dict):
    """Set ``module``'s parameters/buffers named in ``values`` for the block, then restore."""
    saved = []
    try:
        for name, value in values.items():
            owner, _, leaf = name.rpartition(".")
            mod = module.get_submodule(owner) if owner else module
            saved.append((mod, leaf, mod.__dict__.get("_parameters", {}).get(leaf),
                          mod.__dict__.get("_buffers", {}).get(leaf)))
            if leaf in mod._parameters:
                mod._parameters[leaf] = value
            elif leaf in mod._buffers:
                mod._buffers[leaf] = value
            else:
                raise AttributeError(f"functional_call: {type(module).__name__} has no parameter "
                                     f"or buffer {name!r}")
        yield
    finally:
        for mod, leaf, param, buf in reversed(saved):
            if param is not None:
                mod._parameters[leaf] = param
            if buf is not None:
                mod._buffers[leaf] = buf


def functional_call(module, parameter_and_buffer_dicts, args=(), kwargs=None, *, tie_weights=True,
                    strict=False):
    """``module(*args, **kwargs)`` with the given parameter and buffer values in place of its
    own, as ``torch.func.functional_call``; the module is left as it was.

    Args:
        module: an ``nn.Module``.
        parameter_and_buffer_dicts: a dict ``name -> tensor`` (or a tuple of dicts).
        args: the positional arguments (a tuple, or one argument).
        kwargs: the keyword arguments.
        tie_weights: accepted.
        strict: every parameter and buffer must be given.

    Returns:
        The module's output.

    Raises:
        AttributeError: a name the module does not have.
        RuntimeError: ``strict`` and a name missing.
    """
    dicts = parameter_and_buffer_dicts
    values = {}
    for d in (dicts if isinstance(dicts, (tuple, list)) else (dicts,)):
        values.update(d)
    if strict:
        names = {n for n, _ in module.named_parameters()} | {n for n, _ in module.named_buffers()}
        missing = sorted(names - set(values))
        if missing:
            raise RuntimeError(f"functional_call got strict=True and missing keys: {missing}")
    args = args if isinstance(args, tuple) else (args,)
    with _swapped(module, values):
        return module(*args, **(kwargs or {}))


def _differentiable(x):
    return x.detach().requires_grad_(True) if isinstance(x, Tensor) else x


def grad_and_value(func, argnums=0, has_aux=False):
    """A function giving ``(gradient, value)`` of ``func`` (which returns a one-element
    tensor), as ``torch.func.grad_and_value``.

    Args:
        func: the function.
        argnums: the argument (an int) or arguments (a tuple) to differentiate.
        has_aux: ``func`` returns ``(value, aux)``; the result is then ``(grad, (value, aux))``.

    Returns:
        The transformed function.

    Raises:
        RuntimeError: the output does not have exactly one element.
    """
    def wrapper(*args, **kwargs):
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        args = list(args)
        for i in nums:
            args[i] = _differentiable(args[i])
        with autograd.enable_grad():
            out = func(*args, **kwargs)
        value, aux = (out[0], out[1]) if has_aux else (out, None)
        if value.numel() != 1:
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar "
                               f"Tensor, got tensor with {value.dim()} dims")
        grads = autograd.grad(value, [args[i] for i in nums], allow_unused=True)
        grads = tuple(g if g is not None else S.clone(args[i]) * 0 for g, i in zip(grads, nums))
        g = grads[0] if isinstance(argnums, int) else grads
        value = value.detach()
        return (g, (value, aux)) if has_aux else (g, value)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """A function giving the gradient of ``func`` (one-element output), as
    ``torch.func.grad``.

    Args:
        func: the function.
        argnums: the argument(s) to differentiate.
        has_aux: ``func`` returns ``(value, aux)``; the result is then ``(grad, aux)``.

    Returns:
        The transformed function.

    Example:
        >>> import tensorbrain as tb
        >>> tb.func.grad(lambda x, y: (x * y).sum(), argnums=1)(tb.ones(2), tb.ones(2)).tolist()
        [1.0, 1.0]
    """
    gv = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``func`` mapped over a batch dimension, as ``torch.func.vmap``: called once per slice
    (the values of torch's vectorised map), results stacked along ``out_dims``.

    Args:
        func: the function of one example.
        in_dims: the batch dimension of each argument (an int for all, or one per argument;
            None: not batched).
        out_dims: where the batch dimension goes in each output.
        randomness: accepted.
        chunk_size: accepted.

    Returns:
        The batched function.

    Raises:
        ValueError: the batched arguments disagree on the batch size, or none is batched.

    Example:
        >>> import tensorbrain as tb
        >>> tb.func.vmap(lambda v: v.sum())(tb.ones(3, 2)).tolist()
        [2.0, 2.0, 2.0]
    """
    def wrapper(*args):
        dims = in_dims if isinstance(in_dims, (tuple, list)) else (in_dims,) * len(args)
        sizes = {a.shape[d] for a, d in zip(args, dims) if d is not None and isinstance(a, Tensor)}
        if len(sizes) != 1:
            raise ValueError(f"vmap: expected all batched inputs to have the same size along "
                             f"their in_dims, got sizes {sorted(sizes)} (or no batched input)")
        n = sizes.pop()
        results = []
        for i in range(n):
            call = [S.getitem(a, (slice(None),) * d + (i,)) if d is not None and
                    isinstance(a, Tensor) else a for a, d in zip(args, dims)]
            results.append(func(*call))
        if isinstance(results[0], tuple):
            od = out_dims if isinstance(out_dims, (tuple, list)) else (out_dims,) * len(results[0])
            return tuple(S.stack([r[k] for r in results], od[k])
                         for k in range(len(results[0])))
        return S.stack(results, out_dims)
    return wrapper


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """A function giving the Jacobian of ``func``'s output with respect to ``argnums``, one
    backward pass per output element, as ``torch.func.jacrev``.

    Args:
        func: a function of tensors returning one tensor.
        argnums: the argument to differentiate (an int).
        has_aux: accepted only as False.
        chunk_size: accepted.

    Returns:
        The transformed function; its result has shape ``output.shape + input.shape``.

    Raises:
        NotImplementedError: ``has_aux`` or several ``argnums``.
    """
    if has_aux or not isinstance(argnums, int):
        raise NotImplementedError("jacrev: TensorBrain supports one argnum and has_aux=False")

    def wrapper(*args):
        args = list(args)
        args[argnums] = _differentiable(args[argnums])
        with autograd.enable_grad():
            out = func(*args)
        flat = S.reshape(out, -1)
        rows = []
        for k in range(flat.shape[0]):
            g = autograd.grad(flat[k], [args[argnums]], retain_graph=True, allow_unused=True)[0]
            rows.append(g if g is not None else S.clone(args[argnums]) * 0)
        return S.reshape(S.stack(rows), *out.shape, *args[argnums].shape)
    return wrapper


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``func(*primals)`` and its Jacobian-vector product with ``tangents``, as
    ``torch.func.jvp``: exact, computed as one backward pass per output element (see the
    module's docstring for what differs: the tangent output carries no graph).

    Args:
        func: a function of tensors returning a tensor or a tuple of tensors (with
            ``has_aux``: a pair ``(output, aux)``).
        primals: a tuple of tensors, ``func``'s arguments.
        tangents: a tuple of tensors, one per primal, of the same shapes.
        strict: raise when an output does not depend on the primals.
        has_aux: ``func`` returns ``(output, aux)``; ``aux`` is returned as is.

    Returns:
        ``(output, jvp_out)``, or ``(output, jvp_out, aux)`` with ``has_aux``.

    Raises:
        RuntimeError: ``primals`` or ``tangents`` is not a tuple, or a tangent's shape differs
            from its primal's.

    Example:
        >>> import tensorbrain as tb
        >>> out, tangent = tb.func.jvp(lambda x: x.sin(), (tb.tensor([0.0]),), (tb.tensor([2.0]),))
        >>> tangent.tolist()
        [2.0]
    """
    from .autograd.functional import _check_tangents, jvp_rows
    for what, value in (("primals", primals), ("tangents", tangents)):
        if not isinstance(value, tuple):
            raise RuntimeError(f"jvp(f, primals, tangents): Expected {what} to be a tuple. E.g. "
                               f"it should be valid to call f(*{what}).")
    _check_tangents(primals, tangents, "jvp(f, primals, tangents)")
    xs = tuple(p if p.requires_grad else p.detach().requires_grad_(True) for p in primals)
    with autograd.enable_grad():
        result = func(*xs)
    aux = None
    if has_aux:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise RuntimeError("jvp(f, primals, tangents): output of function f should be a tuple: "
                               "(output, aux) if has_aux is True")
        result, aux = result
    is_tuple = isinstance(result, tuple)
    outs = result if is_tuple else (result,)
    rows = jvp_rows(outs, xs, tangents, strict)
    out = (result, rows if is_tuple else rows[0])
    return out + (aux,) if has_aux else out


__all__ = ["functional_call", "grad", "grad_and_value", "jacrev", "jvp", "vmap"]
