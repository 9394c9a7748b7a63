"""The public TensorBrain functions a trace records, and their torch names (what the printed
graph and the generated code call them: ``torch.nn.functional.relu``)."""
from __future__ import annotations

import types
from typing import Any
from collections.abc import Callable

#: The namespaces whose public functions a trace records, with their torch paths.
_NAMESPACES = (("tensorbrain", "torch"), ("tensorbrain.nn.functional", "torch.nn.functional"),
               ("tensorbrain.linalg", "torch.linalg"), ("tensorbrain.fft", "torch.fft"),
               ("tensorbrain.special", "torch.special"))
_public: dict[int, tuple[str, Callable]] = {}


def _public_table() -> dict[int, tuple[str, Callable]]:
    """id(function) -> (torch path, function) for the namespaces a trace records."""
    if not _public:
        import importlib
        for module, torch_path in _NAMESPACES:
            for name, value in vars(importlib.import_module(module)).items():
                if not name.startswith("_") and isinstance(value, (types.FunctionType,
                                                                   types.BuiltinFunctionType)):
                    _public.setdefault(id(value), (f"{torch_path}.{name}", value))
    return _public


def public_name(target: Any) -> str | None:
    """``"torch.nn.functional.relu"`` for a public TensorBrain function, else None.

    Args:
        target: a node's target.
    """
    hit = _public_table().get(id(target))
    return hit[0] if hit is not None and hit[1] is target else None



__all__ = ["public_name"]
