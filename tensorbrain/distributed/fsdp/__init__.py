"""``tb.distributed.fsdp``: fully sharded data parallel (torch's ``torch.distributed.fsdp``).

``FullyShardedDataParallel`` (FSDP1: one flat parameter per wrapped unit) and ``fully_shard``
(FSDP2: per-parameter DTensor shards) on the same machinery; see ``docs/fsdp.md``.
"""
from .api import (BackwardPrefetch, CPUOffload, DataParallelMeshDims, FullOptimStateDictConfig, FullStateDictConfig,
                  LocalOptimStateDictConfig, LocalStateDictConfig, MixedPrecision,
                  OptimStateDictConfig, OptimStateKeyType, ShardedOptimStateDictConfig, ShardedStateDictConfig,
                  ShardingStrategy, StateDictConfig, StateDictSettings, StateDictType)
from ._fully_shard import (CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy,
                           UnshardHandle, fully_shard, register_fsdp_forward_method)
from .fully_sharded_data_parallel import FullyShardedDataParallel

__all__ = ["BackwardPrefetch", "CPUOffload", "CPUOffloadPolicy", "DataParallelMeshDims",
           "FSDPModule", "OptimStateKeyType",
           "FullOptimStateDictConfig", "FullStateDictConfig", "FullyShardedDataParallel",
           "LocalOptimStateDictConfig", "LocalStateDictConfig", "MixedPrecision",
           "MixedPrecisionPolicy", "OffloadPolicy", "OptimStateDictConfig",
           "ShardedOptimStateDictConfig", "ShardedStateDictConfig", "ShardingStrategy",
           "StateDictConfig", "StateDictSettings", "StateDictType", "UnshardHandle",
           "fully_shard", "register_fsdp_forward_method"]
