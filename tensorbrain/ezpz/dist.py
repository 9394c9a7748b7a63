"""``ezpz.dist``: where ezpz keeps its distributed helpers (``ezpz.dist.wrap_model_for_ddp``,
and the same ``setup_torch``, ``get_rank``, ... as the package)."""
from __future__ import annotations

from . import (cleanup, get_dist_info, get_local_rank, get_local_size, get_node_index,
               get_num_nodes, get_rank, get_torch_backend, get_torch_device,
               get_torch_device_type, get_world_size, print_dist_setup, seed_everything, setup,
               setup_torch, timeitlogit)


def wrap_model_for_ddp(model):
    """``DistributedDataParallel(model)`` (on a GPU with ``device_ids=[local rank]``), as ezpz's.

    Args:
        model: the module, already on :func:`get_torch_device`.

    Returns:
        The DDP-wrapped module.
    """
    from ..nn.parallel import DistributedDataParallel
    if get_torch_device_type() == "cuda":
        return DistributedDataParallel(model, device_ids=[get_local_rank()])
    return DistributedDataParallel(model)


wrap_with_ddp = wrap_model_for_ddp


__all__ = ["cleanup", "get_dist_info", "get_local_rank", "get_local_size", "get_node_index",
           "get_num_nodes", "get_rank", "get_torch_backend", "get_torch_device",
           "get_torch_device_type", "get_world_size", "print_dist_setup", "seed_everything",
           "setup", "setup_torch", "timeitlogit", "wrap_model_for_ddp",
           "wrap_with_ddp"]
