"""``deepspeed.comm``: DeepSpeed's communication module (``import deepspeed.comm as dist``).

DeepSpeed's functions have ``torch.distributed``'s names and signatures; here they are
TensorBrain's process-group functions (:mod:`tensorbrain.distributed`), plus DeepSpeed's
``init_distributed`` and ``get_local_rank``.
"""
from __future__ import annotations

import os

from ..distributed import (ReduceOp, all_gather, all_gather_into_tensor, all_gather_object,
                           all_reduce, all_to_all, all_to_all_single, barrier, broadcast,
                           broadcast_object_list, destroy_process_group, gather, get_backend,
                           get_global_rank, get_rank, get_world_size, irecv, is_available,
                           is_initialized, isend, monitored_barrier, new_group, recv, reduce,
                           reduce_scatter, reduce_scatter_tensor, scatter, send)


def init_distributed(*args, **kwargs) -> None:
    """:func:`tensorbrain.deepspeed.init_distributed` (DeepSpeed's ``deepspeed.comm`` name).

    Args:
        *args: its arguments.
        **kwargs: its keywords.
    """
    from . import init_distributed as init   # the package imports this module
    init(*args, **kwargs)


def get_local_rank() -> int:
    """This process's rank on its machine (``LOCAL_RANK``, as the launchers set it; else the
    global rank)."""
    for key in ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"):
        if key in os.environ:
            return int(os.environ[key])
    return get_rank() if is_initialized() else 0


def get_world_group():
    """The default group (DeepSpeed's name; ``None`` means the world in every function)."""
    return None


def inference_all_reduce(tensor, op=ReduceOp.SUM, group=None):
    """DeepSpeed's inference all-reduce: :func:`all_reduce` here.

    Args:
        tensor: reduced in place.
        op: the reduction.
        group: the group (None: the world).

    Returns:
        ``tensor``.
    """
    all_reduce(tensor, op=op, group=group)
    return tensor


__all__ = ["ReduceOp", "all_gather", "all_gather_into_tensor", "all_gather_object", "all_reduce",
           "all_to_all", "all_to_all_single", "barrier", "broadcast", "broadcast_object_list",
           "destroy_process_group", "gather", "get_backend", "get_global_rank", "get_local_rank",
           "get_rank", "get_world_group", "get_world_size", "inference_all_reduce", "init_distributed",
           "irecv", "is_available", "is_initialized", "isend", "monitored_barrier", "new_group",
           "recv", "reduce", "reduce_scatter", "reduce_scatter_tensor", "scatter", "send"]
