"""FSDP's option types, with torch's names (``torch.distributed.fsdp.api``)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["BackwardPrefetch", "CPUOffload", "DataParallelMeshDims", "OptimStateKeyType", "FullOptimStateDictConfig", "FullStateDictConfig",
           "LocalOptimStateDictConfig", "LocalStateDictConfig", "MixedPrecision",
           "OptimStateDictConfig", "ShardedOptimStateDictConfig", "ShardedStateDictConfig",
           "ShardingStrategy", "StateDictConfig", "StateDictSettings", "StateDictType"]


class ShardingStrategy(enum.Enum):
    """What each rank keeps between uses.

    ``FULL_SHARD``: parameters, gradients and optimizer state sharded; parameters all-gathered
    for forward and again for backward. ``SHARD_GRAD_OP``: parameters stay unsharded from forward
    to the end of backward (one all-gather per step). ``NO_SHARD``: DDP (all-reduce gradients).
    ``HYBRID_SHARD``: FULL_SHARD inside a group (mesh dimension 1), replicas across groups (mesh
    dimension 0, gradients all-reduced). ``_HYBRID_SHARD_ZERO2``: the same with SHARD_GRAD_OP.
    """
    FULL_SHARD = enum.auto()
    SHARD_GRAD_OP = enum.auto()
    NO_SHARD = enum.auto()
    HYBRID_SHARD = enum.auto()
    _HYBRID_SHARD_ZERO2 = enum.auto()


class BackwardPrefetch(enum.Enum):
    """When to start the next unit's all-gather in backward: ``BACKWARD_PRE`` as the current
    unit's backward starts (more overlap, more memory), ``BACKWARD_POST`` after its gradients
    are reduced."""
    BACKWARD_PRE = enum.auto()
    BACKWARD_POST = enum.auto()


class StateDictType(enum.Enum):
    """``FULL_STATE_DICT``: unsharded tensors under the original names. ``SHARDED_STATE_DICT``:
    each parameter as a DTensor ``Shard(0)``. ``LOCAL_STATE_DICT`` is not supported."""
    FULL_STATE_DICT = enum.auto()
    LOCAL_STATE_DICT = enum.auto()
    SHARDED_STATE_DICT = enum.auto()


@dataclass
class CPUOffload:
    """``offload_params=True`` keeps the parameter shards and their gradients in host memory
    (the optimizer steps there); they are copied to the compute device for each all-gather."""
    offload_params: bool = False


@dataclass
class MixedPrecision:
    """Dtypes for the unsharded parameters (``param_dtype``, forward and backward compute),
    gradient reduction (``reduce_dtype``, default param_dtype) and buffers (``buffer_dtype``).
    The sharded parameters, their gradients and the optimizer stay in the original dtype."""
    param_dtype: object = None
    reduce_dtype: object = None
    buffer_dtype: object = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True


@dataclass
class StateDictConfig:
    """Base of the model state dict configs: ``offload_to_cpu`` puts values in host memory."""
    offload_to_cpu: bool = False


@dataclass
class FullStateDictConfig(StateDictConfig):
    """``offload_to_cpu``: values in host memory; ``rank0_only``: other ranks get ``{}``."""
    rank0_only: bool = False


@dataclass
class LocalStateDictConfig(StateDictConfig):
    """Config of ``LOCAL_STATE_DICT``, which is not supported (``state_dict_type`` raises);
    defined so that programs importing it load."""


@dataclass
class ShardedStateDictConfig(StateDictConfig):
    """Config of ``SHARDED_STATE_DICT`` (values are always DTensors here)."""
    _use_dtensor: bool = True


@dataclass
class OptimStateDictConfig:
    """Base of the optimizer state dict configs."""
    offload_to_cpu: bool = True


@dataclass
class FullOptimStateDictConfig(OptimStateDictConfig):
    """``rank0_only``: ``optim_state_dict`` returns ``{}`` on the other ranks."""
    rank0_only: bool = False


@dataclass
class LocalOptimStateDictConfig(OptimStateDictConfig):
    """Config of ``LOCAL_STATE_DICT`` optimizer state, which is not supported."""
    offload_to_cpu: bool = False


@dataclass
class ShardedOptimStateDictConfig(OptimStateDictConfig):
    """Config of sharded optimizer state dicts (DTensor values)."""
    _use_dtensor: bool = True


@dataclass
class StateDictSettings:
    """The state dict type and configs in force (torch's ``StateDictSettings``)."""
    state_dict_type: StateDictType
    state_dict_config: StateDictConfig
    optim_state_dict_config: OptimStateDictConfig


class OptimStateKeyType(enum.Enum):
    """How an optimizer state dict keys its parameters: by name or by position (torch's, for
    :meth:`FullyShardedDataParallel.rekey_optim_state_dict`)."""
    PARAM_NAME = enum.auto()
    PARAM_ID = enum.auto()


@dataclass
class DataParallelMeshDims:
    """Which named dimensions of a whole SPMD mesh are data parallel, as torch's
    ``DataParallelMeshDims``: ``shard`` (FSDP) and/or ``replicate`` (HSDP/DDP), each a name or
    a tuple of names.

    Args:
        shard: the dimension name(s) parameters shard over.
        replicate: the dimension name(s) parameters are replicated over.

    Raises:
        ValueError: neither is set.
    """
    shard: str | tuple[str, ...] | None = None
    replicate: str | tuple[str, ...] | None = None

    def __post_init__(self):
        if self.shard is None and self.replicate is None:
            raise ValueError("At least one of shard or replicate must be set in "
                             "DataParallelMeshDims")

    @staticmethod
    def _names(value) -> tuple[str, ...]:
        return () if value is None else (value,) if isinstance(value, str) else tuple(value)

    @property
    def shard_names(self) -> tuple[str, ...]:
        """``shard`` as a tuple of names (empty when None)."""
        return self._names(self.shard)

    @property
    def replicate_names(self) -> tuple[str, ...]:
        """``replicate`` as a tuple of names (empty when None)."""
        return self._names(self.replicate)
