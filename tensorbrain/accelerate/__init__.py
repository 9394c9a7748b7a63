"""``tensorbrain.accelerate``: Hugging Face Accelerate's front door on TensorBrain.

A program written for Accelerate runs with ``from accelerate import Accelerator`` changed to
``from tensorbrain.accelerate import Accelerator`` (or unchanged under
``python -m tensorbrain.as_torch`` / ``tbrun --as-torch``). See ``docs/accelerate.md``.
"""
from . import utils
from .accelerator import Accelerator, GradientState
from .data_loader import BatchSamplerShard, DataLoaderShard, SeedableRandomSampler
from .utils import DistributedType, FullyShardedDataParallelPlugin

__all__ = ["Accelerator", "BatchSamplerShard", "DataLoaderShard", "DistributedType",
           "FullyShardedDataParallelPlugin", "GradientState", "SeedableRandomSampler", "utils"]
