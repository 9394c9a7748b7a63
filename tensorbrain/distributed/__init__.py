"""``tb.distributed``: process groups, collectives, stores and rendezvous, as ``torch.distributed``.

Run the same script as 1 process, as N processes on one machine (``tbrun --nproc_per_node N``)
or on several machines; see ``docs/distributed.md``.

>>> import tensorbrain as tb
>>> import tensorbrain.distributed as dist
>>> dist.is_available(), dist.is_initialized()
(True, False)
"""
import os as _os

from ._env import get_local_rank, get_local_world_size, get_node_rank
from ._work import Work
from .distributed_c10d import (Backend, GroupMember, P2POp, ProcessGroup, ReduceOp,
                               all_gather, all_gather_into_tensor, all_gather_object, all_reduce,
                               all_reduce_coalesced, all_to_all, all_to_all_single, barrier,
                               batch_isend_irecv, broadcast, broadcast_object_list,
                               default_pg_timeout, destroy_process_group, gather, gather_object,
                               get_backend, get_global_rank, get_group_rank,
                               get_process_group_ranks, get_rank, get_world_size, group,
                               init_process_group, irecv, is_available, is_backend_available,
                               is_gloo_available, is_initialized, is_mpi_available,
                               is_nccl_available, is_tcp_available, isend, monitored_barrier,
                               new_group, recv, reduce, reduce_scatter, reduce_scatter_tensor,
                               scatter, scatter_object_list, send)
from .errors import (DistBackendError, DistError, DistNetworkError, DistStoreError,
                     DistTimeoutError)
from .store import FileStore, HashStore, PrefixStore, Store, TCPStore
from ._legacy_paths import install as _install_legacy_paths

_install_legacy_paths()  # torch's older module paths (torch.distributed._tensor.device_mesh, ...)


reduce_op = ReduceOp  # torch's old name, still used by tutorials (dist.reduce_op.SUM)
from .distributed_c10d import new_subgroups_by_enumeration  # noqa: E402


def is_torchelastic_launched() -> bool:
    """Whether this process was started by tbrun/torchrun (``TORCHELASTIC_RUN_ID`` is set)."""
    return _os.environ.get("TORCHELASTIC_RUN_ID") is not None


def get_default_backend_for_device(device) -> str:
    """``'nccl'`` for a CUDA device, ``'gloo'`` (TensorBrain's tcp backend) for the CPU, as torch.

    Args:
        device: a ``tb.device`` or a string such as ``'cpu'`` or ``'cuda:0'``.
    """
    from .._device import as_device
    kind = as_device(device).type if not isinstance(device, str) or ":" in device or \
        device in ("cpu", "cuda") else device
    if kind == "cuda":
        return "nccl"
    if kind == "cpu":
        return "gloo"
    raise ValueError(f"no default distributed backend for device type {kind!r}: TensorBrain "
                     f"knows 'cpu' (gloo/tcp) and 'cuda' (nccl)")


def __getattr__(name):
    # rendezvous lives in its own module (added with the launcher); import it on first use
    if name == "rendezvous":
        from .rendezvous import rendezvous
        return rendezvous
    if name in ("DeviceMesh", "init_device_mesh"):  # torch.distributed.DeviceMesh
        from . import device_mesh
        return getattr(device_mesh, name)
    if name in ("nn", "config", "utils", "launcher"):   # torch.distributed.nn (differentiable collectives...), config
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'tensorbrain.distributed' has no attribute {name!r}")


if _os.environ.get("TORCHELASTIC_ERROR_FILE"):  # launched by tbrun/torchrun: record crashes
    from .elastic.multiprocessing.errors import install_excepthook as _record_errors
    _record_errors()

__all__ = [
    "Backend", "DistBackendError", "DistError", "DistNetworkError", "DistStoreError",
    "DeviceMesh", "DistTimeoutError", "FileStore", "GroupMember", "HashStore", "P2POp", "PrefixStore",
    "ProcessGroup", "ReduceOp", "Store", "TCPStore", "Work", "all_gather",
    "all_gather_into_tensor", "all_gather_object", "all_reduce", "all_reduce_coalesced",
    "all_to_all", "all_to_all_single", "barrier", "batch_isend_irecv", "broadcast",
    "broadcast_object_list", "default_pg_timeout", "destroy_process_group", "gather",
    "gather_object", "get_backend", "get_global_rank", "get_group_rank", "get_local_rank",
    "get_local_world_size", "get_node_rank", "get_process_group_ranks", "get_rank",
    "get_world_size", "group", "init_device_mesh", "reduce_op", "get_default_backend_for_device", "init_process_group", "irecv", "is_available",
    "is_backend_available", "is_gloo_available", "is_initialized", "is_mpi_available",
    "is_nccl_available", "is_tcp_available", "is_torchelastic_launched",
    "new_subgroups_by_enumeration", "isend", "monitored_barrier", "new_group", "recv",
    "reduce", "reduce_scatter", "reduce_scatter_tensor", "rendezvous", "scatter",
    "scatter_object_list", "send",
]
