"""``tb.onnx.utils``: torch's module of export utilities: :func:`export` and the registry live
in :mod:`tensorbrain.onnx`; this module keeps their old path and the model-mode helper.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ._export import (is_in_onnx_export, register_custom_op_symbolic,  # noqa: F401
                      unregister_custom_op_symbolic)
from ._program import export  # noqa: F401  (torch's old path of it)


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
