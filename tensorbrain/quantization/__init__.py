"""``tb.quantization`` (``torch.quantization`` / ``torch.ao.quantization``).

The observers (:mod:`.observer`: range statistics and torch's scale/zero-point formulas, in
float) and the qconfigs (:mod:`.qconfig`) are real: programs that emulate quantization in float
use them. The passes that make quantized models (``quantize``, ``prepare``, ``convert``,
``quantize_dynamic``...) are refused by name: TensorBrain has no quantized tensors or int8
kernels. Quantize in PyTorch from the safetensors state dict.
"""
from __future__ import annotations

from .._unsupported import unsupported, unsupported_class

_WHY = "TensorBrain has no quantized tensors or quantized kernels"
_USE = "PyTorch's quantization on the model loaded from tb.save's safetensors state dict"
quantize = unsupported("torch.quantization.quantize", _WHY, _USE)
quantize_dynamic = unsupported("torch.quantization.quantize_dynamic", _WHY, _USE)
quantize_qat = unsupported("torch.quantization.quantize_qat", _WHY, _USE)
prepare = unsupported("torch.quantization.prepare", _WHY, _USE)
prepare_qat = unsupported("torch.quantization.prepare_qat", _WHY, _USE)
convert = unsupported("torch.quantization.convert", _WHY, _USE)
fuse_modules = unsupported("torch.quantization.fuse_modules", _WHY, _USE)
QuantStub = unsupported_class("torch.quantization.QuantStub", _WHY, _USE)
DeQuantStub = unsupported_class("torch.quantization.DeQuantStub", _WHY, _USE)
QuantWrapper = unsupported_class("torch.quantization.QuantWrapper", _WHY, _USE)

from . import observer, qconfig  # noqa: E402
from .observer import (HistogramObserver, MinMaxObserver, ObserverBase,  # noqa: E402,F401
                       PerChannelMinMaxObserver, PlaceholderObserver)
from .qconfig import (QConfig, default_dynamic_qconfig, default_qconfig,  # noqa: E402,F401
                      per_channel_dynamic_qconfig)
