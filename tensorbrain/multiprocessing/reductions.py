"""How tensors cross a process boundary: by a shared-memory handle, never by their data.

``multiprocessing`` pickles a child's arguments and every ``Queue.put`` with its own
``ForkingPickler``. This module registers a reducer for ``Tensor`` (and its subclasses) with that
pickler only: the tensor's storage is moved into shared memory (``share_memory_()``, as torch does)
and the pickle carries the segment's name, offset, shape, strides and dtype. Plain ``pickle`` is
not affected.
"""
from __future__ import annotations

from multiprocessing.reduction import ForkingPickler

from .. import _shared_memory
from ..tensor import Tensor


def rebuild_tensor(kind: str, handle, requires_grad: bool):
    """Unpickling side: map the segment and wrap it in a tensor of the original kind."""
    array = _shared_memory.attach(*handle)
    if kind == "parameter":
        from ..nn import Parameter
        return Parameter(Tensor._wrap(array), requires_grad=requires_grad)
    if kind == "buffer":
        from ..nn.parameter import Buffer
        return Buffer(Tensor._wrap(array))
    t = Tensor._wrap(array)
    if requires_grad:
        t.requires_grad_(True)
    return t


def reduce_tensor(t: Tensor):
    """Pickling side: share the storage (in place), then send only its handle."""
    if t.is_cuda:
        raise RuntimeError("passing CUDA tensors to other processes is not supported by "
                           "TensorBrain yet; move them to the CPU (t.cpu()) or create them in "
                           "the child")
    if t.requires_grad and t.grad_fn is not None:
        raise RuntimeError("Cowardly refusing to serialize non-leaf tensor which requires_grad, "
                           "since autograd does not support crossing process boundaries. Pass "
                           "t.detach() instead (as torch)")
    t.share_memory_()
    kind = {"Parameter": "parameter", "Buffer": "buffer"}.get(type(t).__name__, "tensor")
    return rebuild_tensor, (kind, _shared_memory.handle(t._data), t.requires_grad)


def init_reductions() -> None:
    """Register :func:`reduce_tensor` for Tensor, Parameter and Buffer with ForkingPickler."""
    from ..nn.parameter import Buffer, Parameter
    for cls in (Tensor, Parameter, Buffer):
        ForkingPickler.register(cls, reduce_tensor)
