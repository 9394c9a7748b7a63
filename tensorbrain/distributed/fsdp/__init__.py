"""``tb.distributed.fsdp``: fully sharded data parallel (torch's ``torch.distributed.fsdp``).

``FullyShardedDataParallel`` (FSDP1: one flat parameter per wrapped unit) and ``fully_shard``
(FSDP2: per-parameter DTensor shards) on the same machinery; see ``docs/fsdp.md``.
"""
from .api import (BackwardPrefetch, CPUOffload, FullOptimStateDictConfig, FullStateDictConfig,
                  MixedPrecision, ShardedOptimStateDictConfig, ShardedStateDictConfig,
                  ShardingStrategy, StateDictSettings, StateDictType)
from ._fully_shard import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy,
                           UnshardHandle, fully_shard)
from .fully_sharded_data_parallel import FullyShardedDataParallel

__all__ = ["BackwardPrefetch", "CPUOffload", "CPUOffloadPolicy", "FSDPModule",
           "FullOptimStateDictConfig", "FullStateDictConfig", "FullyShardedDataParallel",
           "MixedPrecision", "MixedPrecisionPolicy", "OffloadPolicy", "UnshardHandle", "fully_shard", "ShardedOptimStateDictConfig",
           "ShardedStateDictConfig", "ShardingStrategy", "StateDictSettings", "StateDictType"]
