"""``tb.library`` (``torch.library``): refused by name. Registering custom operators with
torch's dispatcher (``custom_op``, ``Library``, ``register_fake``...) has no counterpart:
TensorBrain has no dispatcher; write the operation as a Python function, or as an
``autograd.Function`` for a custom gradient (docs/autograd.md).
"""
from __future__ import annotations

from ._unsupported import unsupported, unsupported_class

_WHY = "TensorBrain has no operator dispatcher to register custom operators with"
_USE = "a Python function, or tb.autograd.Function for a custom gradient"
Library = unsupported_class("torch.library.Library", _WHY, _USE)
custom_op = unsupported("torch.library.custom_op", _WHY, _USE)
triton_op = unsupported("torch.library.triton_op", _WHY, _USE)
impl = unsupported("torch.library.impl", _WHY, _USE)
define = unsupported("torch.library.define", _WHY, _USE)
impl_abstract = unsupported("torch.library.impl_abstract", _WHY, _USE)
register_fake = unsupported("torch.library.register_fake", _WHY, _USE)
register_autograd = unsupported("torch.library.register_autograd", _WHY, _USE)
register_autocast = unsupported("torch.library.register_autocast", _WHY, _USE)
register_torch_dispatch = unsupported("torch.library.register_torch_dispatch", _WHY, _USE)
register_vmap = unsupported("torch.library.register_vmap", _WHY, _USE)
wrap_triton = unsupported("torch.library.wrap_triton", _WHY, _USE)
get_ctx = unsupported("torch.library.get_ctx", _WHY, _USE)
get_kernel = unsupported("torch.library.get_kernel", _WHY, _USE)
infer_schema = unsupported("torch.library.infer_schema", _WHY, _USE)
fallthrough_kernel = unsupported("torch.library.fallthrough_kernel", _WHY, _USE)
