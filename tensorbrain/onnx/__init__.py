"""``tb.onnx``: ONNX export of TensorBrain models (torch's ``torch.onnx``).

:func:`export` traces the model with :mod:`tensorbrain.fx`, translates each op through the
custom symbolic registry (:func:`register_custom_op_symbolic`) or the built-in op table, and
writes the graph with the ``onnx`` package (an optional dependency: ``pip install onnx``;
``import tensorbrain`` never needs it). See docs/onnx.md.
"""
from __future__ import annotations

from . import errors, operators, symbolic_helper, symbolic_opset9, utils  # noqa: F401
from ._export import (OnnxExporterError, is_in_onnx_export, register_custom_op_symbolic,
                      unregister_custom_op_symbolic)
from ._program import ONNXProgram, OperatorExportTypes, TrainingMode, export
from .symbolic_helper import TensorProtoDataType
from .utils import select_model_mode_for_export

__all__ = ["export", "ONNXProgram", "OnnxExporterError", "is_in_onnx_export",
           "register_custom_op_symbolic", "unregister_custom_op_symbolic", "OperatorExportTypes",
           "TrainingMode", "TensorProtoDataType", "select_model_mode_for_export"]

producer_name = "tensorbrain"
