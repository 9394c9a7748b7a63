"""``tb.distributed.tensor.parallel``: Megatron-style tensor parallelism with torch's names
(``parallelize_module``, ``ColwiseParallel``, ``RowwiseParallel``, ``SequenceParallel``,
``PrepareModuleInput``/``PrepareModuleOutput``). See ``docs/tensor_parallel.md``.

>>> from tensorbrain.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
...                                                      parallelize_module)
"""
from .api import parallelize_module
from .style import (ColwiseParallel, ParallelStyle, PrepareModuleInput, PrepareModuleInputOutput,
                    PrepareModuleOutput, RowwiseParallel, SequenceParallel)

_NOT_SUPPORTED = ("loss_parallel",)


def __getattr__(name):
    if name in _NOT_SUPPORTED:
        raise NotImplementedError(
            f"tensorbrain.distributed.tensor.parallel.{name} is not supported by TensorBrain; "
            f"make the last layer ColwiseParallel(output_layouts=Replicate()) and use an "
            f"ordinary loss")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ColwiseParallel", "ParallelStyle", "PrepareModuleInput", "PrepareModuleInputOutput",
           "PrepareModuleOutput", "RowwiseParallel", "SequenceParallel", "parallelize_module"]
