"""``tb.onnx.errors``: the exporter's error types (torch's ``torch.onnx.errors``)."""
from __future__ import annotations

from ._export import OnnxExporterError, UnsupportedOperatorError

__all__ = ["OnnxExporterError", "UnsupportedOperatorError"]
