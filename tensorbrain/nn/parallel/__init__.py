"""Data parallelism: ``DistributedDataParallel`` (processes), ``DataParallel`` (threads), and
DataParallel's building blocks ``replicate`` / ``scatter`` / ``gather`` / ``parallel_apply``.

See ``docs/ddp.md``.
"""
from ._future import Future
from ._reducer import GradBucket
from .data_parallel import DataParallel, data_parallel
from .distributed import DistributedDataParallel
from .parallel_apply import parallel_apply
from .replicate import replicate
from .scatter_gather import gather, scatter, scatter_kwargs

__all__ = ["DistributedDataParallel", "DataParallel", "data_parallel", "replicate", "scatter",
           "scatter_kwargs", "gather", "parallel_apply", "GradBucket", "Future"]
