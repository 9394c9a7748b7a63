"""``tb.onnx``: ONNX export is not supported by TensorBrain.

The module exists so that ``import torch.onnx`` in a program run through the import alias
succeeds; calling :func:`export` raises a clear error instead of writing a wrong file.
"""
from __future__ import annotations

from ._unsupported import unsupported


export = unsupported(
    "torch.onnx.export", "TensorBrain has no ONNX exporter",
    "tb.save (safetensors) for the state dict, then load it into the same model in PyTorch and "
    "export from there")


def is_in_onnx_export() -> bool:
    """False: no export ever runs."""
    return False
