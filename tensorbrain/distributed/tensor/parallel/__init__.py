"""``tb.distributed.tensor.parallel``: Megatron-style tensor parallelism with torch's names
(``parallelize_module``, ``ColwiseParallel``, ``RowwiseParallel``). See
``docs/tensor_parallel.md``.

>>> from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
...                                                      parallelize_module)
"""
from .api import parallelize_module
from .style import ColwiseParallel, ParallelStyle, RowwiseParallel, SequenceParallel

_NOT_SUPPORTED = ("PrepareModuleInput", "PrepareModuleOutput", "PrepareModuleInputOutput",
                  "loss_parallel")


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise NotImplementedError(
            f"tensorbrain.distributed.tensor.parallel.{name} is not supported by TensorBrain; "
            f"ColwiseParallel and RowwiseParallel (replicated inputs/outputs) are")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ColwiseParallel", "ParallelStyle", "RowwiseParallel", "SequenceParallel",
           "parallelize_module"]
