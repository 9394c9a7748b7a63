"""Reverse-mode autograd: ``backward``, ``grad``, grad modes, hooks and end-of-backward callbacks."""
from __future__ import annotations

from .._tensor_base import Tensor
from .._xp import get_array_module
from .engine import queue_callback, run_backward
from .function import Function, FunctionCtx
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
from .graph import Node, reachable_leaves
from .gradcheck import GradcheckError, gradcheck  # noqa: E402  (the function shadows the module, as torch's)
from .anomaly import (detect_anomaly, is_anomaly_check_nan_enabled,  # noqa: E402,F401
                      is_anomaly_enabled, set_detect_anomaly)
from . import variable  # noqa: E402,F401  (torch.autograd.variable)
from .variable import Variable  # noqa: E402,F401

__all__ = ["Function", "FunctionCtx", "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode", "is_inference_mode_enabled",
           "queue_callback", "Node", "reachable_leaves", "gradcheck", "GradcheckError",
           "Variable", "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled"]


def _seq(x):
    if isinstance(x, Tensor):
        return [x]
    return list(x) if x is not None else None


def _default_grads(outputs, grad_outputs):
    grads = []
    for i, out in enumerate(outputs):
        g = grad_outputs[i] if grad_outputs is not None else None
        if g is None:
            if out._data.size != 1:
                raise RuntimeError(f"grad can be implicitly created only for scalar outputs "
                                   f"(output {i} has shape {tuple(out.shape)})")
            g = get_array_module(out._data).ones(out._data.shape, dtype=out._data.dtype)
        else:
            g = g._data if hasattr(g, "data") and not hasattr(g, "__array_interface__") else g
        grads.append(g)
    return grads


def backward(tensors, grad_tensors=None, retain_graph=None, inputs=None):
    """Accumulate gradients of ``tensors`` into the leaves (``torch.autograd.backward``); with
    ``inputs``, into those tensors' ``.grad`` only (leaves or not).

    Args:
        tensors: a tensor or a sequence of tensors to differentiate.
        grad_tensors: the gradient of each (None: ones, allowed for scalars only).
        retain_graph: keep the graph for another backward (default: False).
        inputs: accumulate only into these tensors (default: every leaf reached).
    """
    tensors = _seq(tensors)
    grads = _default_grads(tensors, _seq(grad_tensors))
    if inputs is None:
        run_backward(tensors, grads, bool(retain_graph))
        return
    _accumulate_into(_seq(inputs), run_backward(tensors, grads, bool(retain_graph),
                                                inputs=_seq(inputs)))


def _accumulate_into(inputs, results):
    for t in inputs:
        g = results.get(id(t))
        if g is None:
            continue
        if t.grad is None:
            t.grad = Tensor._wrap(g.copy())
        else:
            t.grad._data += g
        for hook in t._post_acc_hooks or ():
            hook(t)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """Gradients of ``outputs`` w.r.t. ``inputs``, returned instead of stored in ``.grad``.

    >>> import tensorbrain as tb
    >>> x = tb.tensor([3.0], requires_grad=True)
    >>> tb.autograd.grad((x * x).sum(), x)[0].tolist()
    [6.0]

    Args:
        outputs: a tensor or a sequence of tensors.
        inputs: the tensors to differentiate with respect to.
        grad_outputs: the gradient of each output (None: ones for scalars).
        retain_graph: keep the graph (default: ``create_graph``).
        create_graph: record the backward pass so the result can be differentiated again.
        allow_unused: return None for inputs the outputs do not depend on instead of raising.
    """
    if create_graph:
        raise NotImplementedError("create_graph=True (higher-order gradients) is not supported")
    outputs, inputs = _seq(outputs), _seq(inputs)
    for t in inputs:
        if not t.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    results = run_backward(outputs, _default_grads(outputs, _seq(grad_outputs)),
                           bool(retain_graph), inputs=inputs)
    out = []
    for t in inputs:
        g = results.get(id(t))
        if g is None and not allow_unused:
            raise RuntimeError(f"One of the differentiated Tensors (shape {tuple(t.shape)}) appears "
                               "to not have been used in the graph. Set allow_unused=True if this "
                               "is the desired behavior.")
        out.append(None if g is None else Tensor._wrap(g))
    return tuple(out)


class set_multithreading_enabled:
    """``torch.autograd.set_multithreading_enabled(mode)`` (a context manager or a call):
    TensorBrain's backward pass always runs on the calling thread, so either mode gives the
    same result; the switch is accepted and reported by :func:`is_multithreading_enabled`.

    Args:
        mode: whether torch may run backward on worker threads.
    """

    _enabled = True

    def __init__(self, mode: bool) -> None:
        self.prev = set_multithreading_enabled._enabled
        set_multithreading_enabled._enabled = bool(mode)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        set_multithreading_enabled._enabled = self.prev


def is_multithreading_enabled() -> bool:
    """The mode last set with :class:`set_multithreading_enabled` (True by default)."""
    return set_multithreading_enabled._enabled


def __getattr__(name):
    # torch.autograd.functional (jacobian, vjp), loaded on use: it builds on grad above
    if name == "functional":
        import importlib
        return importlib.import_module(".functional", __name__)
    raise AttributeError(f"module 'tensorbrain.autograd' has no attribute {name!r}")


__all__ += ["functional", "is_multithreading_enabled", "set_multithreading_enabled"]
