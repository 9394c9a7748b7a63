"""``tb.distributed._composable.fsdp``: torch 2.4-2.5's import path of FSDP2; the same objects
as :mod:`tensorbrain.distributed.fsdp` (see docs/fsdp.md).

>>> from tensorbrain.distributed._composable.fsdp import fully_shard
>>> import tensorbrain.distributed.fsdp as fsdp
>>> fully_shard is fsdp.fully_shard
True
"""
from ...fsdp import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy,
                     UnshardHandle, fully_shard, register_fsdp_forward_method)

__all__ = ["CPUOffloadPolicy", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy",
           "UnshardHandle", "fully_shard", "register_fsdp_forward_method"]
