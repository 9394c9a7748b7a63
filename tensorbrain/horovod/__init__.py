"""``tensorbrain.horovod``: Horovod's PyTorch front door (``horovod.torch``'s names).

``import tensorbrain.horovod as hvd`` (also ``tensorbrain.horovod.torch``; or unchanged
``import horovod.torch as hvd`` under ``python -m tensorbrain.as_torch`` / ``tbrun --as-torch``).
See ``docs/horovod.md``.
"""
from . import elastic
from .compression import Compression
from .mpi_ops import (Adasum, Average, Max, Min, Product, Sum, allgather, allgather_async,
                      allreduce, allreduce_, allreduce_async, allreduce_async_, alltoall,
                      alltoall_async, barrier, broadcast, broadcast_, broadcast_async,
                      broadcast_async_, cross_rank, cross_size, gloo_built, gloo_enabled,
                      grouped_allreduce, init, is_initialized, join, local_rank, local_size,
                      mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, poll, rank,
                      reducescatter, reducescatter_async, shutdown, size, synchronize)
from .optimizer import (DistributedOptimizer, allgather_object, broadcast_object,
                        broadcast_optimizer_state, broadcast_parameters)

__all__ = ["Adasum", "Average", "Compression", "DistributedOptimizer", "elastic", "Max", "Min", "Product",
           "Sum", "allgather", "allgather_async", "allgather_object", "allreduce", "allreduce_",
           "allreduce_async", "allreduce_async_", "alltoall", "alltoall_async", "barrier",
           "broadcast", "broadcast_", "broadcast_async", "broadcast_async_", "broadcast_object",
           "broadcast_optimizer_state", "broadcast_parameters", "cross_rank", "cross_size",
           "gloo_built", "gloo_enabled", "grouped_allreduce", "init", "is_initialized", "join",
           "local_rank", "local_size", "mpi_built", "mpi_enabled", "mpi_threads_supported",
           "nccl_built", "poll", "rank", "reducescatter", "reducescatter_async", "shutdown",
           "size", "synchronize"]
