"""Gradient clipping, as ``torch.nn.utils.clip_grad_norm_`` / ``clip_grad_value_``.

Both work on the ``.grad`` arrays in place (no new graph, no per-parameter tensors).

>>> import tensorbrain as tb
>>> p = tb.nn.Parameter(tb.zeros(2))
>>> p.grad = tb.tensor([3.0, 4.0])
>>> round(tb.nn.utils.clip_grad_norm_([p], max_norm=1.0).item(), 4), p.grad.tolist()
(5.0, [0.5999999046325684, 0.7999998331069946])
"""
from __future__ import annotations

import math
from collections.abc import Callable

from ... import _xp
from ...tensor import Tensor

# The global norm of sharded gradients (DTensors, FSDP's shards) needs collectives, which sit
# above nn; the DTensor layer (tensorbrain.distributed.tensor._factories) registers its function here
# when it is imported, so nn never imports distributed. Sharded gradients exist only once it is.
_sharded_total_norm: Callable[[list, float], float] | None = None


def _register_sharded_total_norm(fn: Callable[[list, float], float]) -> None:
    """Set the function that computes the global norm of sharded gradients.

    Args:
        fn: called as ``fn(items, norm_type)`` with the gradients (Tensors, DTensors, or pairs
            ``(tensor, parts)`` of FSDP shards); collective over their groups; returns the
            norm as a Python float.
    """
    global _sharded_total_norm
    _sharded_total_norm = fn


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p.grad._data for p in parameters if p.grad is not None]


def _norm(xp, g, norm_type):
    if norm_type == math.inf:
        return xp.abs(g).max() if g.size else xp.zeros((), g.dtype)
    if norm_type == 2.0:
        flat = g.ravel()
        return xp.sqrt(xp.dot(flat, flat))
    return (xp.abs(g) ** norm_type).sum() ** (1.0 / norm_type)


def _has_dtensor(tensors) -> bool:
    return any(getattr(t, "_spec", None) is not None or isinstance(t, tuple) for t in tensors)


def _norm_items(parameters, grad_tensors):
    """The gradients, each paired with its parameter's shard layout when FSDP gave it one
    (``_grad_norm_parts``: which slices are shards over which process groups)."""
    out = []
    for p, g in zip(parameters, grad_tensors, strict=True):
        parts = getattr(p, "_grad_norm_parts", None)
        out.append((g, parts) if parts is not None else g)
    return out


def _dtensor_norm(tensors, norm_type, error_if_nonfinite):
    """The global norm when some tensors are DTensors (FSDP2's gradients): every shard counts
    once, as torch's DTensor arithmetic makes it. Collective over the tensors' meshes."""
    import numpy as np
    if _sharded_total_norm is None:
        raise RuntimeError("clip_grad_norm_/get_total_norm got sharded gradients (DTensor or "
                           "FSDP shards) but tensorbrain.distributed.tensor is not loaded; "
                           "import tensorbrain.distributed.tensor first")
    total = _sharded_total_norm(list(tensors), norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {float(norm_type)} for gradients from "
                           f"`parameters` is non-finite, so it cannot be clipped. To disable this "
                           f"error and scale the gradients by the non-finite norm anyway, set "
                           f"`error_if_nonfinite=False`")
    return Tensor._wrap(np.asarray(total, dtype=np.float32))


def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False):
    """The ``norm_type`` norm of all ``tensors`` together (the norm of their norms); with
    DTensors among them, the norm of the global tensors (a collective over their meshes)."""
    tensors = list(tensors)
    if _has_dtensor(tensors):
        return _dtensor_norm(tensors, norm_type, error_if_nonfinite)
    arrays = [t._data if isinstance(t, Tensor) else t for t in tensors]
    norm_type = float(norm_type)
    if not arrays:
        return _zero()
    xp = _xp.get_array_module(arrays[0])
    norms = xp.stack([_norm(xp, a, norm_type).astype(arrays[0].dtype) for a in arrays])
    total = _norm(xp, norms, norm_type)
    if error_if_nonfinite and not bool(xp.isfinite(total)):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           f"`parameters` is non-finite, so it cannot be clipped. To disable this "
                           f"error and scale the gradients by the non-finite norm anyway, set "
                           f"`error_if_nonfinite=False`")
    return Tensor._wrap(xp.asarray(total))


def _zero():
    import numpy as np
    return Tensor._wrap(np.zeros((), dtype=np.float32))


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None) -> Tensor:
    """Scale all gradients together so their total norm is at most ``max_norm``.

    Returns the total norm before clipping. The scale is ``max_norm / (total + 1e-6)`` clamped
    to 1, as in PyTorch. Sharded gradients count once globally, as torch's DTensor norm does:
    DTensor gradients (tensor parallel, ``fully_shard``, both on a 2-D mesh) are summed over
    the mesh dimensions they are sharded on, and ``FullyShardedDataParallel``'s shards (flat or
    original parameters) over their shard group; then every rank must call it (collective).
    """
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    parameters = list(parameters)
    with_grad = [p for p in parameters if p.grad is not None]
    grad_tensors = [p.grad for p in with_grad]
    grads = [g._data for g in grad_tensors]
    if not grads:
        return _zero()
    items = _norm_items(with_grad, grad_tensors)
    total = get_total_norm(items if _has_dtensor(items) else grads, norm_type,
                           error_if_nonfinite)
    coef = float(max_norm) / (float(total._data) + 1e-6)
    if coef < 1.0:
        for g in grads:
            g *= g.dtype.type(coef)
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """Clamp every gradient element into ``[-clip_value, clip_value]`` in place."""
    clip_value = float(clip_value)
    for g in _grads(parameters):
        xp = _xp.get_array_module(g)
        xp.clip(g, -clip_value, clip_value, out=g)
