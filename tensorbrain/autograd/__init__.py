"""Reverse-mode autograd: ``backward``, ``grad``, grad modes, hooks and end-of-backward callbacks."""
from __future__ import annotations

from ._backward import backward, grad
from .engine import queue_callback, run_backward  # noqa: F401  (run_backward: tb.autograd's)
from .function import Function, FunctionCtx
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
from .graph import Node, reachable_leaves
from .gradcheck import GradcheckError, gradcheck  # noqa: E402  (the function shadows the module, as torch's)

__all__ = ["Function", "FunctionCtx", "backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode", "is_inference_mode_enabled",
           "queue_callback", "Node", "reachable_leaves", "gradcheck", "GradcheckError"]
