"""``tb.nested`` (``torch.nested``): refused by name. TensorBrain has no nested (ragged)
tensors; pad the sequences (``nn.utils.rnn.pad_sequence``) and pass a mask instead.
"""
from __future__ import annotations

from ._unsupported import unsupported

_WHY = "TensorBrain has no nested (ragged) tensors"
_USE = "padded tensors (tb.nn.utils.rnn.pad_sequence) and a mask"
nested_tensor = unsupported("torch.nested.nested_tensor", _WHY, _USE)
as_nested_tensor = unsupported("torch.nested.as_nested_tensor", _WHY, _USE)
nested_tensor_from_jagged = unsupported("torch.nested.nested_tensor_from_jagged", _WHY, _USE)
to_padded_tensor = unsupported("torch.nested.to_padded_tensor", _WHY, _USE)
narrow = unsupported("torch.nested.narrow", _WHY, _USE)
masked_select = unsupported("torch.nested.masked_select", _WHY, _USE)
