"""``parallelize_module``: apply tensor-parallel styles to a module's sub-modules (torch's
``torch.distributed.tensor.parallel.parallelize_module``)."""
from __future__ import annotations

import fnmatch

from .style import ParallelStyle

__all__ = ["parallelize_module"]


def parallelize_module(module, device_mesh=None, parallelize_plan=None, *, src_data_rank=0):
    """Shard ``module``'s sub-modules over a 1-D mesh by a plan.

    Args:
        module: the model (modified in place and returned).
        device_mesh: a 1-D ``DeviceMesh`` (for a 2-D mesh pass ``mesh["tp"]``).
        parallelize_plan: a :class:`ParallelStyle` for ``module`` itself, or a dict from
            sub-module names (dotted; ``*`` matches one name segment, as torch) to styles.
        src_data_rank: the mesh rank whose parameter values every rank starts from (they are
            broadcast before sharding, as torch); None keeps each rank's own values.

    Returns:
        The same module, its matched sub-modules sharded.

    Raises:
        ValueError: no mesh, a mesh that is not 1-D, or a plan key that matches nothing.
        TypeError: a plan value that is not a ParallelStyle.
        NotImplementedError: a style on a module type other than Linear/Embedding.

    Example:
        >>> tp_mesh = init_device_mesh("cpu", (2,))                                # doctest: +SKIP
        >>> parallelize_module(mlp, tp_mesh, {"w1": ColwiseParallel(),
        ...                                   "w2": RowwiseParallel()})             # doctest: +SKIP
    """
    if device_mesh is None:
        raise ValueError("parallelize_module: pass device_mesh (a 1-D DeviceMesh, see "
                         "init_device_mesh)")
    if device_mesh.ndim != 1:
        raise ValueError(f"parallelize_module: the mesh has {device_mesh.ndim} dimensions; "
                         f"tensor parallel needs a 1-D mesh (pass mesh['tp'] of a 2-D mesh)")
    if parallelize_plan is None:
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan.src_data_rank = src_data_rank
        return parallelize_plan._apply(module, device_mesh)
    if not isinstance(parallelize_plan, dict):
        raise TypeError(f"parallelize_module: parallelize_plan must be a ParallelStyle or a dict, "
                        f"got {type(parallelize_plan).__name__}")
    named = [(n, m) for n, m in module.named_modules() if n]
    for key, style in parallelize_plan.items():
        if not isinstance(style, ParallelStyle):
            raise TypeError(f"parallelize_module: plan[{key!r}] must be a ParallelStyle "
                            f"(ColwiseParallel, RowwiseParallel), got {type(style).__name__}")
        parts = key.split(".")
        hits = [m for n, m in named if len(n.split(".")) == len(parts)
                and all(fnmatch.fnmatchcase(a, b) for a, b in zip(n.split("."), parts,
                                                                   strict=True))]
        if not hits:
            raise ValueError(f"parallelize_module: plan key {key!r} matches no sub-module; "
                             f"the module has {[n for n, _ in named][:20]}")
        style.src_data_rank = src_data_rank
        for m in hits:
            style._apply(m, device_mesh)
    return module
