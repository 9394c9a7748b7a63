"""``tb.onnx.utils``: torch's module of export utilities: :func:`export` and the registry live
in :mod:`tensorbrain.onnx`; this module keeps their old path and the model-mode helper.
"""
from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

from ._export import (is_in_onnx_export, register_custom_op_symbolic,  # noqa: F401
                      unregister_custom_op_symbolic)


def export(*args: Any, **kwargs: Any) -> Any:
    """:func:`tensorbrain.onnx.export` under its old path (torch's ``onnx.utils.export``)."""
    from . import export as _export
    return _export(*args, **kwargs)


@contextlib.contextmanager
def select_model_mode_for_export(model: Any, mode: Any) -> Iterator[None]:
    """Put ``model`` in eval (``TrainingMode.EVAL``) or train (``TRAINING``) mode for the
    block, then back (``PRESERVE`` leaves it); torch's context manager of that name.

    Args:
        model: the module.
        mode: a ``tb.onnx.TrainingMode``.
    """
    was = model.training
    name = getattr(mode, "name", str(mode))
    if name != "PRESERVE":
        model.train(name == "TRAINING")
    try:
        yield
    finally:
        model.train(was)


def _dynamic_shapes_to_axes(model: Any, dynamic_shapes: Any, input_names: Any) -> dict:
    """torch's ``dynamic_shapes`` (``{arg: {axis: Dim or name}}`` or a tuple per argument) as
    ``dynamic_axes``."""
    fn = getattr(model, "forward", model)
    params = [p for p in inspect.signature(fn).parameters]
    names = list(input_names or []) + params[len(input_names or []):]
    if isinstance(dynamic_shapes, dict):
        items = [(names[params.index(k)] if k in params else k, v)
                 for k, v in dynamic_shapes.items()]
    else:
        items = list(zip(names, dynamic_shapes))
    out = {}
    for name, axes in items:
        if axes:
            out[name] = {int(a): getattr(d, "__name__", None) or str(d) if not isinstance(d, str)
                         else d for a, d in dict(axes).items()}
    return out
