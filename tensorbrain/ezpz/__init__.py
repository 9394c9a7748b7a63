"""``tensorbrain.ezpz``: ezpz's front door (``ezpz.setup`` and friends) on TensorBrain.

``import tensorbrain.ezpz as ezpz`` (or unchanged ``import ezpz`` under ``python -m
tensorbrain.as_torch`` / ``tbrun --as-torch``). See ``docs/ezpz.md``.
"""
from __future__ import annotations

import functools
import logging
import os
import random
import sys
import time
import warnings

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


def _warn_if_real_torch() -> None:
    """Warn when the program imported the real PyTorch (not TensorBrain under the alias)."""
    real = sys.modules.get("torch")
    if real is not None and getattr(real, "__name__", None) == "torch":
        from .._real_torch import HINT
        warnings.warn(f"tensorbrain.ezpz: the real PyTorch is imported "
                      f"({getattr(real, '__file__', '?')}); ezpz.setup joined TensorBrain's "
                      f"process group, which torch.distributed and torch's "
                      f"DistributedDataParallel do not see: {HINT}", stacklevel=3)


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

    Warns:
        UserWarning: the real PyTorch is imported: its ``torch.distributed`` and DDP do not see
            the group joined here (the message says what to change).
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
    _configure_logging()
    _warn_if_real_torch()
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


_LOG_FORMAT = "[%(asctime)s][%(levelname)s][%(name)s]: %(message)s"


def _configure_logging() -> None:
    """What importing ezpz does: INFO-level logging on stderr unless the program set up its
    own, and ezpz's own logger quiet on ranks other than 0 (here: on first use, so importing
    the module changes nothing)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=_log_level(), format=_LOG_FORMAT)
    logger.setLevel(_log_level() if get_rank() == 0 or _from_all_ranks() else "CRITICAL")


def _log_level() -> str:
    return os.environ.get("EZPZ_LOG_LEVEL", os.environ.get("LOG_LEVEL", "INFO")).upper()


def _from_all_ranks() -> bool:
    value = os.environ.get("LOG_FROM_ALL_RANKS", os.environ.get("EZPZ_LOG_FROM_ALL_RANKS", ""))
    return value.lower() in ("1", "true", "yes", "on")


def get_logger(name: str | None = None, level: str | None = None, rank_zero_only: bool = True,
               rank: int | None = None, colored_logs: bool = True) -> logging.Logger:
    """A logger that prints at ``level`` on rank 0 and stays quiet (CRITICAL) on the others,
    as ezpz's (plain text instead of ezpz's rich formatting).

    Args:
        name: the logger's name (``__name__``).
        level: default ``EZPZ_LOG_LEVEL`` / ``LOG_LEVEL`` / "INFO".
        rank_zero_only: quiet on ranks other than 0 (``LOG_FROM_ALL_RANKS=1`` overrides).
        rank: this process's rank (default :func:`get_rank`).
        colored_logs: accepted (no colours here).

    Returns:
        The ``logging.Logger``.

    Example:
        >>> log = get_logger("train", rank=0)
        >>> log.getEffectiveLevel() == logging.INFO
        True
    """
    _configure_logging()
    log = logging.getLogger(name if name is not None else "ezpz")
    rank = get_rank() if rank is None else int(rank)
    want = (level or _log_level()).upper()
    quiet = rank_zero_only and rank != 0 and not _from_all_ranks()
    log.setLevel("CRITICAL" if quiet else want)
    return log


def get_dist_info() -> dict:
    """Where this process runs: rank, local rank, world size, machines, device and backend."""
    import socket
    return {"RANK": get_rank(), "LOCAL_RANK": get_local_rank(), "WORLD_SIZE": get_world_size(),
            "LOCAL_SIZE": get_local_size(), "NUM_NODES": get_num_nodes(),
            "NODE_ID": get_node_index(), "HOSTNAME": socket.gethostname(),
            "DEVICE": get_torch_device(), "BACKEND": get_torch_backend()}


def print_dist_setup() -> str:
    """Log (rank 0) and return one line describing :func:`get_dist_info`."""
    info = get_dist_info()
    line = (f"[{info['DEVICE']}] [rank {info['RANK']}/{info['WORLD_SIZE'] - 1}] "
            f"[local_rank {info['LOCAL_RANK']}/{info['LOCAL_SIZE'] - 1}] "
            f"[node {info['NODE_ID']}/{info['NUM_NODES'] - 1}] [{info['HOSTNAME']}]")
    _configure_logging()
    logger.info(line)
    return line


def summarize_dict(d: dict) -> str:
    """``"k=v k=v ..."`` (ints as they are, floats with 6 decimals), as ezpz's.

    Args:
        d: the metrics.

    Example:
        >>> summarize_dict({"step": 3, "loss": 0.5})
        'step=3 loss=0.500000'
    """
    def one(k, v):
        if isinstance(v, (bool, int, np.integer)):
            return f"{k}={v}"
        return f"{k}={float(v):<.6f}"
    return " ".join(one(k, v) for k, v in d.items())


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
                _configure_logging()
                shown = ", ".join([repr(a) for a in args if not hasattr(a, "shape")] +
                                  [f"{k}={v!r}" for k, v in kwargs.items()])
                logger.info("`%s`(%s) took: dt=%.6fs", fn.__name__, shown, dt)
            return result
        return wrapper
    return decorate




def __getattr__(name):
    if name == "dist":   # ezpz.dist (wrap_model_for_ddp and the names above), on first use
        import importlib
        return importlib.import_module(".dist", __name__)
    raise AttributeError(f"module 'tensorbrain.ezpz' has no attribute {name!r}")


__all__ = ["cleanup", "dist", "get_dist_info", "get_logger", "print_dist_setup",
           "summarize_dict", "get_local_rank", "get_local_size", "get_node_index", "get_num_nodes",
           "get_rank", "get_torch_backend", "get_torch_device", "get_torch_device_type",
           "get_world_size", "seed_everything", "setup", "setup_torch", "timeitlogit"]
