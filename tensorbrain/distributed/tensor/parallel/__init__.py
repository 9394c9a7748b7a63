"""``tb.distributed.tensor.parallel``: Megatron-style tensor parallelism with torch's names
(``parallelize_module``, ``ColwiseParallel``, ``RowwiseParallel``). See
``docs/tensor_parallel.md``.

>>> from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
...                                                      parallelize_module)
"""
from .api import parallelize_module
from .style import ColwiseParallel, ParallelStyle, RowwiseParallel, SequenceParallel

__all__ = ["ColwiseParallel", "ParallelStyle", "RowwiseParallel", "SequenceParallel",
           "parallelize_module"]
