"""``tb.distributed._composable.fsdp``: torch 2.4-2.5's import path of FSDP2; the same objects
as :mod:`tensorbrain.distributed.fsdp` (see docs/fsdp.md).

>>> from tensorbrain.distributed._composable.fsdp import fully_shard
>>> import tensorbrain.distributed.fsdp as fsdp
>>> fully_shard is fsdp.fully_shard
True
"""
import sys as _sys

from ... import fsdp as _fsdp
from ...fsdp import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy,
                     UnshardHandle, fully_shard, register_fsdp_forward_method)

__all__ = ["CPUOffloadPolicy", "FSDPModule", "MixedPrecisionPolicy", "OffloadPolicy",
           "UnshardHandle", "fully_shard", "register_fsdp_forward_method"]

# torch's module ``_composable.fsdp.fully_shard`` shares its name with the function: entered here,
# importing the module path never replaces the function attribute (docs/fsdp.md).
_sys.modules.setdefault(__name__ + ".fully_shard", _fsdp)
