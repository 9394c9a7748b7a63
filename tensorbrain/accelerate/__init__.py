"""``tensorbrain.accelerate``: Hugging Face Accelerate's front door on TensorBrain.

A program written for Accelerate runs with ``from accelerate import Accelerator`` changed to
``from tensorbrain.accelerate import Accelerator`` (or unchanged under
``python -m tensorbrain.as_torch`` / ``tbrun --as-torch``). See ``docs/accelerate.md``.
"""
from . import logging, utils
from .accelerator import Accelerator, GradientState
from .data_loader import (BatchSamplerShard, DataLoaderShard, SeedableRandomSampler,
                          SkipDataLoader, skip_first_batches)
from .utils import (DistributedDataParallelKwargs, DistributedType, FullyShardedDataParallelPlugin,
                    GradScalerKwargs, InitProcessGroupKwargs, ProjectConfiguration)

__all__ = ["Accelerator", "BatchSamplerShard", "DataLoaderShard", "DistributedDataParallelKwargs",
           "DistributedType", "FullyShardedDataParallelPlugin", "GradScalerKwargs",
           "GradientState", "InitProcessGroupKwargs", "ProjectConfiguration",
           "SeedableRandomSampler", "SkipDataLoader", "logging", "skip_first_batches", "utils"]
