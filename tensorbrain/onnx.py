"""``tb.onnx``: ONNX export is not supported by TensorBrain.

The module exists so that ``import torch.onnx`` in a program run through the import alias
succeeds; calling :func:`export` raises a clear error instead of writing a wrong file.
"""
from __future__ import annotations


def export(model, args=None, f=None, *more, **kwargs):
    """Not supported: raises NotImplementedError.

    Raises:
        NotImplementedError: always; export the model from PyTorch (the state dict moves there
            through safetensors, see docs/checkpoints.md).
    """
    raise NotImplementedError("tb.onnx.export is not supported: TensorBrain has no ONNX exporter. "
                              "Save the state dict with tb.save (safetensors), load it into the "
                              "same model in PyTorch and export from there")


def is_in_onnx_export() -> bool:
    """False: no export ever runs."""
    return False
