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
                           get_global_rank, get_rank, get_world_size, init_process_group, irecv,
                           is_available, is_initialized, isend, monitored_barrier, new_group, recv, reduce,
                           reduce_scatter, reduce_scatter_tensor, scatter, send)


def init_distributed(dist_backend=None, auto_mpi_discovery: bool = True, distributed_port=29500,
                     verbose: bool = True, timeout=None, init_method=None, dist_init_required=None,
                     config=None, rank=-1, world_size=-1) -> None:
    """Join the default process group from the launcher's environment (tbrun, torchrun,
    mpiexec, Slurm), unless already joined. A process started without a launcher forms a group
    of one (as DeepSpeed's MPI discovery does), so ``deepspeed.comm`` works there too.

    Args:
        dist_backend: "gloo"/"tcp", "nccl", "mpi" or None (from the device).
        auto_mpi_discovery: accepted (the MPI variables are always read).
        distributed_port: accepted; MASTER_PORT is the launcher's.
        verbose: accepted.
        timeout: the group's timeout.
        init_method: an explicit ``init_method`` (``tcp://``, ``file://``).
        dist_init_required: accepted.
        config: accepted.
        rank: with ``world_size``, an explicit rank.
        world_size: the number of processes.
    """
    if is_initialized():
        return
    launched = any(k in os.environ for k in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                             "SLURM_NTASKS"))
    if not launched and init_method is None:
        # DeepSpeed's MPI discovery makes a plain `python train.py` a group of one, so
        # deepspeed.comm calls work there too
        from ..distributed.store import HashStore
        init_process_group(store=HashStore(), rank=0, world_size=1)
        return
    backend = {"gloo": "tcp", "ccl": "tcp"}.get(dist_backend, dist_backend)
    kwargs = {"rank": rank, "world_size": world_size} if rank >= 0 else {}
    init_process_group(backend=backend, init_method=init_method, timeout=timeout, **kwargs)


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
