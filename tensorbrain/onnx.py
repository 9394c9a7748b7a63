"""``tb.onnx``: ONNX export is not supported by TensorBrain.

The module exists so that ``import torch.onnx`` in a program run through the import alias
succeeds; calling :func:`export` raises a clear error instead of writing a wrong file.
"""
from __future__ import annotations

import enum

from ._unsupported import unsupported, unsupported_class


export = unsupported(
    "torch.onnx.export", "TensorBrain has no ONNX exporter",
    "tb.save (safetensors) for the state dict, then load it into the same model in PyTorch and "
    "export from there")


def is_in_onnx_export() -> bool:
    """False: no export ever runs."""
    return False


class OperatorExportTypes(enum.IntEnum):
    """torch's ONNX operator export types (named in export calls, which are refused)."""

    ONNX = 0
    ONNX_ATEN = 1
    ONNX_ATEN_FALLBACK = 2
    ONNX_FALLTHROUGH = 3


class TrainingMode(enum.IntEnum):
    """torch's ONNX training modes (named in export calls, which are refused)."""

    EVAL = 0
    PRESERVE = 1
    TRAINING = 2


_SYMBOLIC = "TensorBrain has no ONNX exporter to register symbolic functions with"
register_custom_op_symbolic = unsupported("torch.onnx.register_custom_op_symbolic", _SYMBOLIC)
unregister_custom_op_symbolic = unsupported("torch.onnx.unregister_custom_op_symbolic", _SYMBOLIC)
ONNXProgram = unsupported_class("torch.onnx.ONNXProgram", "TensorBrain has no ONNX exporter",
                                "tb.save (safetensors), then export from PyTorch")
