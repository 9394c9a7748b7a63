"""``tb.distributed.tensor.parallel``: Megatron-style tensor parallelism with torch's names
(``parallelize_module``, ``ColwiseParallel``, ``RowwiseParallel``, ``SequenceParallel``,
``PrepareModuleInput``/``PrepareModuleOutput``, ``loss_parallel``). See
``docs/tensor_parallel.md``.

>>> from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
...                                                      parallelize_module)
"""
from .._loss_parallel import loss_parallel
from .api import parallelize_module
from .style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleInputOutput,
                    PrepareModuleOutput, RowwiseParallel, SequenceParallel)

__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleInputOutput",
           "PrepareModuleOutput", "RowwiseParallel", "SequenceParallel", "loss_parallel",
           "parallelize_module"]
