"""Activation checkpointing: trade compute for memory (torch's ``torch.utils.checkpoint``).

``checkpoint(fn, *args)`` runs ``fn`` and keeps only its inputs and output; the activations inside
``fn`` are freed at once and recomputed during backward. The random generator's state is saved
before the forward and restored for the recomputation (``preserve_rng_state=True``), so dropout
draws the same mask twice and the gradients equal the non-checkpointed ones exactly.

How it works here: the forward runs with grad recording on detached inputs, only to find the
leaves (parameters) that ``fn`` reaches; that graph is dropped right away, so the peak memory is
one segment's activations, as in torch. The output gets one graph node whose inputs are ``fn``'s
tensor arguments and those parameters; its backward recomputes ``fn`` and differentiates it with
``autograd.grad``-style collection, so parameter gradients reach ``.grad`` through the outer
backward (hooks such as DDP's gradient-ready hooks fire once per parameter, as with
``use_reentrant=False`` in torch). ``use_reentrant=True`` is accepted and takes the same path.

>>> import tensorbrain as tb
>>> from tensorbrain.utils.checkpoint import checkpoint
>>> lin = tb.nn.Linear(3, 2)
>>> x = tb.randn(4, 3, requires_grad=True)
>>> checkpoint(lin, x, use_reentrant=False).sum().backward()
>>> x.grad.shape, lin.weight.grad.shape
(tb.Size([4, 3]), tb.Size([2, 3]))
"""
from __future__ import annotations

import enum

from .._random import default_generator
from .._unsupported import unsupported

__all__ = ["CheckpointPolicy", "SAC_IGNORED_OPS", "checkpoint", "checkpoint_sequential",
           "create_selective_checkpoint_contexts"]


def _get_rng_state():
    return default_generator.get_state()


def _set_rng_state(state) -> None:
    default_generator.set_state(state)


def _detached(args):
    """Each Tensor argument detached (a fresh leaf, requiring grad where the original did)."""
    from ..tensor import Tensor
    out = []
    for a in args:
        if isinstance(a, Tensor):
            d = a.detach()
            d.requires_grad = bool(a.requires_grad)
            out.append(d)
        else:
            out.append(a)
    return out


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    """Run ``function(*args, **kwargs)`` without keeping its activations; recompute them in backward.

    Args:
        function: any callable (a module, a function) returning one Tensor.
        *args: its positional arguments; Tensors among them get gradients.
        use_reentrant: torch asks callers to choose; both values take the same path here (see the
            module docstring), None means False.
        context_fn: not supported (raises when given).
        determinism_check: ``"default"`` or ``"none"``: with ``"default"`` the recomputed output's
            shape and dtype are checked against the first run's.
        debug: ignored (torch prints the recomputed ops).
        preserve_rng_state: save the random generator before the forward and restore it for the
            recomputation, so random ops (dropout) repeat exactly.
        **kwargs: keyword arguments for ``function`` (not differentiated).

    Returns:
        Tensor: ``function``'s output, attached to the graph through one checkpoint node.

    Raises:
        NotImplementedError: ``context_fn`` given, or ``function`` returns several tensors.
        TypeError: ``function`` does not return a Tensor.
        RuntimeError: the recomputation produced a different shape or dtype.

    Example:
        >>> import tensorbrain as tb
        >>> block = tb.nn.Sequential(tb.nn.Linear(4, 4), tb.nn.ReLU())
        >>> y = checkpoint(block, tb.randn(2, 4), use_reentrant=False)
        >>> y.sum().backward(); block[0].weight.grad.shape
        tb.Size([4, 4])
    """
    from ..autograd import grad_mode
    from ..autograd.engine import run_backward
    from ..autograd.graph import reachable_leaves
    from .._ops.core import make
    from ..tensor import Tensor
    del use_reentrant, debug
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not supported by TensorBrain")
    if determinism_check not in ("default", "none"):
        raise ValueError(f"checkpoint: determinism_check must be 'default' or 'none', got "
                         f"{determinism_check!r}")
    if not grad_mode.is_grad_enabled():
        return function(*args, **kwargs)   # nothing to save: torch does the same
    rng = _get_rng_state() if preserve_rng_state else None
    first = _detached(args)
    with grad_mode.enable_grad():
        out = function(*first, **kwargs)
    if isinstance(out, (tuple, list)):
        raise NotImplementedError(
            f"checkpoint: {getattr(function, '__name__', type(function).__name__)} returned "
            f"{len(out)} values; TensorBrain's checkpoint supports functions returning one Tensor")
    if not isinstance(out, Tensor):
        raise TypeError(f"checkpoint: the function must return a Tensor, got {type(out).__name__}")
    arg_ids = {id(a) for a in first if isinstance(a, Tensor)}
    params = [p for p in reachable_leaves([out]) if id(p) not in arg_ids]
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    shape, dtype, data = out._data.shape, out._data.dtype, out._data
    del out, first   # drop the segment's graph: its activations are freed here

    def backward(g):
        now = _get_rng_state() if rng is not None else None
        if rng is not None:
            _set_rng_state(rng)
        try:
            again = _detached(args)
            with grad_mode.enable_grad():
                o = function(*again, **kwargs)
        finally:
            if now is not None:
                _set_rng_state(now)
        if determinism_check == "default" and (o._data.shape != shape or o._data.dtype != dtype):
            raise RuntimeError(
                f"checkpoint: the recomputed output has shape {tuple(o._data.shape)} and dtype "
                f"{o._data.dtype} but the first run gave {tuple(shape)} and {dtype}; the function "
                f"must be deterministic given its inputs and the random generator's state")
        wrt = [again[i] for i in positions] + params
        if not o.requires_grad:
            return tuple(None for _ in wrt)
        got = run_backward([o], [g], inputs=wrt)
        return tuple(got.get(id(t)) for t in wrt)

    inputs = tuple(args[i] for i in positions) + tuple(params)
    return make(data, inputs, backward, "CheckpointFunctionBackward",
                tuple(args[i] for i in positions))


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Run a sequence of modules in ``segments`` checkpointed chunks (the last one is not
    checkpointed: its activations are needed at once by backward, as in torch).

    Args:
        functions: an ``nn.Sequential`` or a list of callables applied in order.
        segments: how many chunks to split them into (1 to ``len(functions)``).
        input: the first function's input.
        use_reentrant: passed to :func:`checkpoint`.
        **kwargs: ``preserve_rng_state`` and the other :func:`checkpoint` options.

    Returns:
        Tensor: the output of the last function.

    Raises:
        ValueError: ``segments`` outside 1..len(functions).

    Example:
        >>> import tensorbrain as tb
        >>> net = tb.nn.Sequential(*[tb.nn.Linear(4, 4) for _ in range(4)])
        >>> checkpoint_sequential(net, 2, tb.randn(3, 4), use_reentrant=False).shape
        tb.Size([3, 4])
    """
    fns = list(functions.children()) if hasattr(functions, "children") else list(functions)
    if not 1 <= int(segments) <= max(1, len(fns)):
        raise ValueError(f"checkpoint_sequential: segments={segments} must be between 1 and the "
                         f"number of functions ({len(fns)})")
    bounds = _split_even(len(fns), int(segments))

    def run(chunk):
        def forward(x):
            for f in chunk:
                x = f(x)
            return x
        return forward

    x = input
    for k, (lo, hi) in enumerate(bounds):
        if k == len(bounds) - 1:
            x = run(fns[lo:hi])(x)
        else:
            x = checkpoint(run(fns[lo:hi]), x, use_reentrant=use_reentrant, **kwargs)
    return x


def _split_even(n: int, parts: int) -> list:
    """``parts`` contiguous (start, stop) ranges covering ``range(n)``, sizes differing by <= 1."""
    base, extra = divmod(n, parts)
    out, lo = [], 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out


def detach_variable(inputs):
    """Each tensor of ``inputs`` detached, keeping its ``requires_grad``, as torch's helper
    for hand-written checkpointing.

    Args:
        inputs: a tuple of tensors (other values pass as they are).

    Returns:
        tuple: the detached tensors.

    Raises:
        RuntimeError: ``inputs`` is not a tuple.
    """
    from ..tensor import Tensor
    if not isinstance(inputs, tuple):
        raise RuntimeError(f"Only tuple of tensors is supported. Got Unsupported input type: "
                           f"{type(inputs).__name__}")
    out = []
    for x in inputs:
        if isinstance(x, Tensor):
            d = x.detach()
            d.requires_grad = x.requires_grad
            out.append(d)
        else:
            out.append(x)
    return tuple(out)


def check_backward_validity(inputs) -> None:
    """Warn when no input requires grad (the checkpointed segment would get no gradient), as
    torch's.

    Args:
        inputs: the segment's inputs.
    """
    from ..tensor import Tensor
    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        import warnings
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None",
                      stacklevel=2)


class CheckpointPolicy(enum.Enum):
    """What selective activation checkpointing does with an op's output
    (``torch.utils.checkpoint.CheckpointPolicy``); the policies exist for programs that name
    them, selective checkpointing itself is refused (see
    :func:`create_selective_checkpoint_contexts`)."""
    MUST_SAVE = 0
    PREFER_SAVE = 1
    MUST_RECOMPUTE = 2
    PREFER_RECOMPUTE = 3
    MUST_CPU_OFFLOAD = 4
    PREFER_CPU_OFFLOAD = 5


#: the ops selective checkpointing never asks the policy about (torch's are aten ops; there
#: are no such ops here).
SAC_IGNORED_OPS: set = set()

create_selective_checkpoint_contexts = unsupported(
    "torch.utils.checkpoint.create_selective_checkpoint_contexts",
    "choosing per op what to save needs torch's dispatcher, which TensorBrain does not have",
    "checkpoint(fn, *args) of a smaller part of the model (everything inside is recomputed)")
