"""``distribute_module``: turn a module's parameters into DTensors and hook its inputs and
outputs (``torch.distributed.tensor.distribute_module``), the building block under tensor
parallel styles."""
from __future__ import annotations

import inspect

__all__ = ["distribute_module"]


def _n_params(fn) -> int:
    try:
        return len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return 3


def distribute_module(module, device_mesh=None, partition_fn=None, input_fn=None,
                      output_fn=None):
    """Make every parameter of ``module`` a DTensor on ``device_mesh``, and hook its forward.

    ``partition_fn(name, submodule, mesh)`` runs on every submodule (``named_modules``) and may
    replace parameters by DTensors of its own placements (``distribute_tensor``); every parameter
    still a plain tensor afterwards is replicated on the mesh. ``input_fn(module, inputs, mesh)``
    runs before each forward (its result, when not None, replaces the inputs);
    ``output_fn(module, outputs, mesh)`` after (its result, when not None, replaces the output).

    Args:
        module (nn.Module): the module, changed in place.
        device_mesh (DeviceMesh | None): the mesh; None: a 1-D mesh over the default group.
        partition_fn (Callable | None): ``(name, submodule, mesh) -> None``.
        input_fn (Callable | None): ``(module, inputs, mesh) -> inputs | None``.
        output_fn (Callable | None): ``(module, outputs, mesh) -> outputs | None``.

    Returns:
        nn.Module: ``module``.

    Raises:
        RuntimeError: ``distribute_module`` was already applied to ``module``.
        TypeError: ``input_fn``/``output_fn`` do not take three arguments.
    """
    from ..device_mesh import init_device_mesh
    from ..distributed_c10d import get_world_size
    from ._api import DTensor
    from ._factories import distribute_tensor
    from .placement_types import Replicate
    if getattr(module, "_distribute_module_applied", False):
        raise RuntimeError("distribute_module should only be called once on a module, but it "
                           "has already been called on this module!")
    for name, fn in (("input_fn", input_fn), ("output_fn", output_fn)):
        if fn is not None and _n_params(fn) != 3:
            raise TypeError(f"distribute_module({name}=...) must take (module, "
                            f"{'inputs' if name == 'input_fn' else 'outputs'}, device_mesh), got "
                            f"{_n_params(fn)} parameters")
    mesh = device_mesh if device_mesh is not None else \
        init_device_mesh("cpu", (get_world_size(),))
    if partition_fn is not None:
        for name, sub in list(module.named_modules()):
            partition_fn(name, sub, mesh)
    replicate = [Replicate()] * mesh.ndim
    for sub in module.modules():
        for key, p in list(sub._parameters.items()):
            if p is not None and not isinstance(p, DTensor):
                dt = distribute_tensor(p.detach(), mesh, replicate)
                setattr(sub, key, DTensor._as_parameter(dt, requires_grad=p.requires_grad))
        for key, b in list(sub._buffers.items()):
            if b is not None and not isinstance(b, DTensor):
                sub._buffers[key] = distribute_tensor(b, mesh, replicate)
    if input_fn is not None:
        module.register_forward_pre_hook(lambda mod, inputs: input_fn(mod, inputs, mesh))
    if output_fn is not None:
        module.register_forward_hook(lambda mod, inputs, outputs: output_fn(mod, outputs, mesh))
    module._distribute_module_applied = True
    return module
