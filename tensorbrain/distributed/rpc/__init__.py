"""``tb.distributed.rpc``: only what the old single-process ``Pipe`` tutorial calls.

torch's pipeline tutorial (``torch.distributed.pipeline.sync.Pipe``, removed in torch 2.4)
starts with ``rpc.init_rpc("worker", rank=0, world_size=1, rpc_backend_options=
rpc.TensorPipeRpcBackendOptions(init_method=...))`` because torch's ``Pipe`` returned an RRef.
TensorBrain's :class:`~tensorbrain.distributed.pipeline.sync.Pipe` needs no RPC, so this
module accepts that one-process start and ``shutdown()`` and nothing more: RPC between
processes (``rpc_sync``, ``rpc_async``, ``remote``, ``RRef``, a ``world_size`` above 1) raises
``NotImplementedError``. :func:`is_available` is False, as a torch build without RPC says.

Example:
    >>> import tensorbrain.distributed.rpc as rpc
    >>> rpc.init_rpc("worker", rank=0, world_size=1)
    >>> rpc.get_worker_info().name
    'worker'
    >>> rpc.shutdown()
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["BackendType", "TensorPipeRpcBackendOptions", "WorkerInfo", "get_worker_info",
           "init_rpc", "is_available", "shutdown"]

_NOT_SUPPORTED = ("rpc_sync", "rpc_async", "remote", "RRef", "functions", "backend_registry",
                  "ProcessGroupRpcBackendOptions", "get_worker_infos")


class BackendType(enum.Enum):
    """torch's RPC backend names (accepted, no effect)."""

    TENSORPIPE = "TENSORPIPE"


class TensorPipeRpcBackendOptions:
    """torch's backend options: stored, no effect (there is no RPC agent).

    Args:
        **kwargs: ``init_method``, ``num_worker_threads``, ``rpc_timeout``, ... as torch's.
    """

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


@dataclass(frozen=True)
class WorkerInfo:
    """The one worker's name and id."""

    name: str
    id: int


_worker: WorkerInfo | None = None


def is_available() -> bool:
    """False: RPC between processes is not there (only the one-process start is accepted)."""
    return False


def init_rpc(name, backend=None, rank=-1, world_size=None, rpc_backend_options=None) -> None:
    """Accept the one-process RPC start of torch's ``Pipe`` tutorial.

    Args:
        name: this worker's name.
        backend: ignored (``BackendType.TENSORPIPE``).
        rank: 0 (or -1, as torch's default).
        world_size: 1 (None counts as 1).
        rpc_backend_options: ignored.

    Raises:
        NotImplementedError: ``world_size`` above 1 or a rank other than 0: RPC between
            processes is not supported by TensorBrain.
        RuntimeError: RPC is already started.
    """
    global _worker
    if (world_size not in (None, 1)) or rank not in (-1, 0):
        raise NotImplementedError(
            f"tensorbrain.distributed.rpc.init_rpc(rank={rank}, world_size={world_size}): RPC "
            f"between processes is not supported by TensorBrain; only the one-process start "
            f"(world_size=1) of the Pipe tutorial is accepted. Use torch.distributed "
            f"collectives or p2p (send/recv) under tbrun")
    if _worker is not None:
        raise RuntimeError("RPC is already initialized")
    _worker = WorkerInfo(str(name), 0)


def get_worker_info(worker_name=None) -> WorkerInfo:
    """This worker's :class:`WorkerInfo` (``worker_name`` must be its name or None).

    Raises:
        RuntimeError: RPC is not started, or another name is asked for.
    """
    if _worker is None:
        raise RuntimeError("RPC has not been initialized. Call torch.distributed.rpc.init_rpc first.")
    if worker_name not in (None, _worker.name):
        raise RuntimeError(f"unknown worker {worker_name!r}: the only worker is {_worker.name!r}")
    return _worker


def shutdown(graceful=True, timeout=0) -> None:
    """Stop the one-process RPC (no agent to wait for)."""
    global _worker
    _worker = None


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise NotImplementedError(
            f"tensorbrain.distributed.rpc.{name} is not supported by TensorBrain: only "
            f"init_rpc(world_size=1)/shutdown() for the Pipe tutorial are there")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
