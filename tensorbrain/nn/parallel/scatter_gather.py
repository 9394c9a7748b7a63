"""``scatter`` a batch across devices and ``gather`` the outputs back (differentiably).

Tensors are split along ``dim`` into one chunk per device (fewer when the batch is smaller than
the device list) and moved there; lists, tuples and dicts are scattered element-wise; anything
else is given to every replica as is. ``gather`` concatenates the replicas' outputs on the
target device, recursing into tuples, lists and dicts. Both are recorded by autograd, so
gradients flow from the gathered output back to each chunk and on to the original input.
"""
from __future__ import annotations

from ...tensor import Tensor

__all__ = ["scatter", "scatter_kwargs", "gather"]


def scatter(inputs, target_devices, dim=0):
    """Split ``inputs`` over ``target_devices`` (``torch.nn.parallel.scatter``)."""
    from ... import chunk, device as _device
    devices = [_device(d) for d in target_devices]

    def rec(obj):
        if isinstance(obj, Tensor):
            return [c.to(dev) for c, dev in zip(chunk(obj, len(devices), dim), devices)]
        if isinstance(obj, tuple) and obj:
            return [type(obj)(*x) if hasattr(obj, "_fields") else tuple(x)
                    for x in zip(*map(rec, obj))]
        if isinstance(obj, list) and obj:
            return [list(x) for x in zip(*map(rec, obj))]
        if isinstance(obj, dict) and obj:
            return [type(obj)(zip(obj.keys(), vals)) for vals in zip(*map(rec, obj.values()))]
        return [obj for _ in devices]
    try:
        return rec(inputs)
    finally:
        rec = None  # break the closure's self-reference cycle


def scatter_kwargs(inputs, kwargs, target_devices, dim=0):
    """Scatter positional and keyword arguments; pad the shorter list so both match."""
    inputs = scatter(inputs, target_devices, dim) if inputs else []
    kwargs = scatter(kwargs, target_devices, dim) if kwargs else []
    if len(inputs) < len(kwargs):
        inputs.extend(() for _ in range(len(kwargs) - len(inputs)))
    elif len(kwargs) < len(inputs):
        kwargs.extend({} for _ in range(len(inputs) - len(kwargs)))
    return tuple(inputs), tuple(kwargs)


def gather(outputs, target_device, dim=0):
    """Concatenate the replicas' ``outputs`` on ``target_device`` (``torch.nn.parallel.gather``).

    0-dim tensors (a loss per replica) are stacked into a vector, as PyTorch does.
    """
    from ... import cat, device as _device
    target = _device(target_device)

    def rec(outs):
        out = outs[0]
        if isinstance(out, Tensor):
            parts = [o.to(target) for o in outs]
            if out.ndim == 0:
                parts = [p.reshape(1) for p in parts]
                return cat(parts, 0)
            return cat(parts, dim)
        if out is None:
            return None
        if isinstance(out, dict):
            if not all(len(out) == len(d) for d in outs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, rec([d[k] for d in outs])) for k in out)
        if isinstance(out, (list, tuple)):
            vals = [rec(x) for x in zip(*outs)]
            return type(out)(*vals) if hasattr(out, "_fields") else type(out)(vals)
        return outs  # not a tensor: one per replica, as PyTorch
    try:
        return rec(outputs)
    finally:
        rec = None
