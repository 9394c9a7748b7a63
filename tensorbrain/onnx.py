"""``tb.onnx``: ONNX export is not supported by TensorBrain.

The module exists so that ``import torch.onnx`` in a program run through the import alias
succeeds; calling :func:`export` raises a clear error instead of writing a wrong file.
"""
from __future__ import annotations

import enum

from ._unsupported import unsupported


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
