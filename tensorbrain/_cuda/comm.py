"""``tb.cuda.comm`` (``torch.cuda.comm``): copies of tensors between the GPUs of one process
(the old ``DataParallel`` plumbing), refused: TensorBrain moves tensors with ``.to(device)`` and
runs several GPUs as several processes."""
from __future__ import annotations

from .._unsupported import unsupported

_WHY = "TensorBrain has no single-process multi-GPU scatter/gather primitives"
_USE = "tensor.to('cuda:N') per device, or tb.distributed collectives across processes"
broadcast = unsupported("torch.cuda.comm.broadcast", _WHY, _USE)
broadcast_coalesced = unsupported("torch.cuda.comm.broadcast_coalesced", _WHY, _USE)
reduce_add = unsupported("torch.cuda.comm.reduce_add", _WHY, _USE)
reduce_add_coalesced = unsupported("torch.cuda.comm.reduce_add_coalesced", _WHY, _USE)
scatter = unsupported("torch.cuda.comm.scatter", _WHY, _USE)
gather = unsupported("torch.cuda.comm.gather", _WHY, _USE)

__all__ = ["broadcast", "broadcast_coalesced", "gather", "reduce_add", "reduce_add_coalesced",
           "scatter"]
