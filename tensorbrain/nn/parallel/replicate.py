"""``replicate``: copies of a module whose parameters are differentiable views of the original's.

Every replica's parameters come from the original parameters through a differentiable copy
(``Tensor.to(device)``), so a backward through any replica's output accumulates into the
*original* parameters' ``.grad``, summed over replicas. On the device the module already lives
on (always the case for CPU replicas) the copy is the parameter itself: nothing is copied and
the engine sums the replicas' contributions before it writes ``.grad`` once.

Buffers: replica 0 shares the module's buffers (its in-place updates, e.g. BatchNorm running
statistics, are kept, as in PyTorch); the other replicas get detached copies.
"""
from __future__ import annotations

from ...autograd import grad_mode
from ...tensor import Tensor

__all__ = ["replicate"]


def _copy_to(t, dev, detach, fresh):
    if detach or not t.requires_grad:
        with grad_mode.no_grad():
            out = t.to(dev)
        if out is t and fresh:
            out = Tensor._wrap(t._data.copy())
        return out
    return t.to(dev)


def replicate(network, devices, detach=False):
    """``len(devices)`` replicas of ``network`` (``torch.nn.parallel.replicate``).

    ``detach=True`` (no_grad forward) gives replicas whose parameters do not backpropagate.
    """
    from ... import device as _device
    devices = [_device(d) for d in devices]
    modules = list(network.modules())
    index = {id(m): k for k, m in enumerate(modules)}
    replicas = []
    for r, dev in enumerate(devices):
        copies = []
        for m in modules:
            rep = m.__class__.__new__(m.__class__)
            d = dict(m.__dict__)
            d["_parameters"] = {}
            d["_buffers"] = dict(m._buffers)
            d["_modules"] = dict(m._modules)
            rep.__dict__.update(d)
            rep.__dict__["_is_replica"] = True
            for name, p in m._parameters.items():
                rep._parameters[name] = None if p is None else _copy_to(p, dev, detach, False)
            for name, b in m._buffers.items():
                if b is not None and r > 0:  # replica 0 keeps the originals (PyTorch)
                    rep._buffers[name] = _copy_to(b, dev, True, True)
            copies.append(rep)
        for rep in copies:
            for name, child in rep._modules.items():
                if child is not None:
                    rep._modules[name] = copies[index[id(child)]]
        replicas.append(copies[0])
    return replicas
