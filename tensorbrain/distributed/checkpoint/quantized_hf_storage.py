"""``torch.distributed.checkpoint.quantized_hf_storage``: refused by name.
``QuantizedHuggingFaceStorageReader`` reads Hugging Face checkpoints whose weights are stored
block-quantized (float8 with ``weight_scale_inv`` blocks) and dequantizes them on load; the
plain reader is :class:`tensorbrain.distributed.checkpoint.HuggingFaceStorageReader`."""
from ..._unsupported import unsupported_class

QuantizedHuggingFaceStorageReader = unsupported_class(
    "torch.distributed.checkpoint.quantized_hf_storage.QuantizedHuggingFaceStorageReader",
    "block-dequantizing float8 Hugging Face checkpoints on load is not implemented",
    "HuggingFaceStorageReader on a checkpoint with dequantized weights")

__all__ = ["QuantizedHuggingFaceStorageReader"]
