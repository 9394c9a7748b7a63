"""Reverse-mode autograd: ``backward``, ``grad``, grad modes, hooks and end-of-backward callbacks."""
from __future__ import annotations

from ._backward import backward, grad
from .engine import queue_callback, run_backward  # noqa: F401  (run_backward: tb.autograd's)
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
    # torch.autograd.functional (jacobian, vjp) and .profiler (on tb.profiler), loaded on use
    if name in ("functional", "profiler", "profiler_legacy"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tensorbrain.autograd' has no attribute {name!r}")


__all__ += ["functional", "is_multithreading_enabled", "profiler", "set_multithreading_enabled"]
