"""``tensorbrain.ezpz``: ezpz's front door (``ezpz.setup`` and friends) on TensorBrain.

``import tensorbrain.ezpz as ezpz`` (or unchanged ``import ezpz`` under ``python -m
tensorbrain.as_torch`` / ``tbrun --as-torch``). See ``docs/ezpz.md``.
"""
from __future__ import annotations

import functools
import logging
import os
import random
import time

import numpy as np

logger = logging.getLogger("ezpz")
_BACKENDS = ("ddp", "deepspeed", "ds", "horovod", "hvd")


def _dist():
    from .. import distributed
    return distributed


def get_torch_device_type() -> str:
    """"cuda" when a usable GPU is present, else "cpu" (TensorBrain has no xpu/mps)."""
    import tensorbrain as tb
    return "cuda" if tb.cuda.is_available() else "cpu"


def get_torch_device(*, device_type: str | None = None, as_torch_device: bool = False):
    """The device type string ("cuda" or "cpu"), or a ``tb.device`` with ``as_torch_device``.

    Args:
        device_type: force this type.
        as_torch_device: return a ``tb.device``.
    """
    import tensorbrain as tb
    kind = device_type or get_torch_device_type()
    return tb.device(kind) if as_torch_device else kind


def get_torch_backend() -> str:
    """The process-group backend for this device: "nccl" on GPUs, "gloo" on the CPU."""
    return "nccl" if get_torch_device_type() == "cuda" else "gloo"


def get_rank() -> int:
    """This process's global rank (from the group, else RANK and the MPI/Slurm variables)."""
    dist = _dist()
    if dist.is_initialized():
        return dist.get_rank()
    for key in ("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        if key in os.environ:
            return int(os.environ[key])
    return 0


def get_world_size(total: bool = True, in_use: bool = True) -> int:
    """The number of processes.

    Args:
        total: accepted (ezpz's).
        in_use: accepted (ezpz's).
    """
    dist = _dist()
    if dist.is_initialized():
        return dist.get_world_size()
    for key in ("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"):
        if key in os.environ:
            return int(os.environ[key])
    return 1


def get_local_rank() -> int:
    """This process's rank on its machine."""
    for key in ("LOCAL_RANK", "PMI_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                "SLURM_LOCALID"):
        if key in os.environ:
            return int(os.environ[key])
    return get_rank()


def get_local_size() -> int:
    """Processes on this machine."""
    for key in ("LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS"):
        if key in os.environ:
            return int(os.environ[key])
    return get_world_size()


def get_node_index() -> int:
    """This machine's index (rank // processes per machine)."""
    return get_rank() // max(1, get_local_size())


def get_num_nodes() -> int:
    """The number of machines."""
    return max(1, get_world_size() // max(1, get_local_size()))


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy and TensorBrain.

    Args:
        seed: the seed.
    """
    import tensorbrain as tb
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    tb.manual_seed(seed)


def setup_torch(backend: str = "DDP", port=None, seed=None, timeout=None, **kwargs) -> int:
    """Join the process group with ``backend`` ("DDP", "deepspeed" or "horovod") and return
    the global rank. Without a launcher (no RANK/WORLD_SIZE) it forms a group of one.

    Args:
        backend: "DDP" (TensorBrain's process group, nccl on GPUs, gloo/tcp on the CPU),
            "deepspeed" (``tensorbrain.deepspeed.init_distributed``) or "horovod"
            (``tensorbrain.horovod.init``).
        port: MASTER_PORT when the launcher did not set one.
        seed: seed every generator with it.

    Returns:
        The global rank.

    Raises:
        ValueError: an unknown backend.
    """
    name = str(backend).lower()
    if name not in _BACKENDS:
        raise ValueError(f"ezpz backend {backend!r} is not one of 'DDP', 'deepspeed', "
                         f"'horovod'")
    if port is not None:
        os.environ.setdefault("MASTER_PORT", str(port))
    dist = _dist()
    if not dist.is_initialized():
        launched = any(k in os.environ for k in ("WORLD_SIZE", "PMI_SIZE",
                                                 "OMPI_COMM_WORLD_SIZE"))
        if name in ("horovod", "hvd"):
            from .. import horovod
            horovod.init()
        elif not launched:
            from ..distributed.store import HashStore
            dist.init_process_group(get_torch_backend(), store=HashStore(), rank=0,
                                    world_size=1)
        elif name in ("deepspeed", "ds"):
            from .. import deepspeed
            deepspeed.init_distributed(dist_backend=get_torch_backend())
        else:
            dist.init_process_group(get_torch_backend(), timeout=timeout)
    if get_torch_device_type() == "cuda":
        import tensorbrain as tb
        tb.cuda.set_device(get_local_rank() % tb.cuda.device_count())
    if seed is not None:
        seed_everything(int(seed))
    rank = get_rank()
    if rank == 0:
        logger.info("Using device='%s' with backend='%s' + '%s' for distributed training.",
                    get_torch_device_type(), name, get_torch_backend())
    return rank


def setup(framework: str = "pytorch", backend: str = "DDP", port=None, seed=None,
          precision=None, ngpus=None, **kwargs) -> int:
    """ezpz's entry point: ``framework="pytorch"`` only (TensorFlow is not supported); see
    :func:`setup_torch`.

    Args:
        framework: "pytorch".
        backend: "DDP", "deepspeed" or "horovod".
        port: MASTER_PORT when the launcher did not set one.
        seed: seed every generator with it.
        precision: accepted.
        ngpus: accepted.
        **kwargs: passed to :func:`setup_torch`.

    Returns:
        The global rank.

    Raises:
        ValueError: another framework or backend.
    """
    if str(framework).lower() not in ("pytorch", "torch", "pt"):
        raise ValueError(f"ezpz framework {framework!r} is not supported by tensorbrain.ezpz "
                         f"(only 'pytorch')")
    return setup_torch(backend=backend, port=port, seed=seed, **kwargs)


def cleanup() -> None:
    """Leave the process group."""
    if _dist().is_initialized():
        _dist().destroy_process_group()


def timeitlogit(rank: int | None = None, verbose: bool = True):
    """Decorator: time each call and log ``fn(args) took: dt=...s`` on rank 0 (``rank``:
    the caller's rank; default: :func:`get_rank` at call time).

    Args:
        rank: the caller's rank (None: asked at each call).
        verbose: log at all.

    Example:
        >>> @timeitlogit(rank=0)
        ... def train_step(x):
        ...     return x * 2
        >>> train_step(3)
        6
    """
    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            result = fn(*args, **kwargs)
            dt = time.perf_counter() - t0
            who = get_rank() if rank is None else rank
            if verbose and who == 0:
                shown = ", ".join([repr(a) for a in args if not hasattr(a, "shape")] +
                                  [f"{k}={v!r}" for k, v in kwargs.items()])
                logger.info("`%s`(%s) took: dt=%.6fs", fn.__name__, shown, dt)
            return result
        return wrapper
    return decorate


__all__ = ["cleanup", "get_local_rank", "get_local_size", "get_node_index", "get_num_nodes",
           "get_rank", "get_torch_backend", "get_torch_device", "get_torch_device_type",
           "get_world_size", "seed_everything", "setup", "setup_torch", "timeitlogit"]
