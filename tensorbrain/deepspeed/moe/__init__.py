"""``deepspeed.moe``: the mixture-of-experts layer with expert parallelism (docs/deepspeed.md).

DeepSpeed programs import it even with MoE off; :mod:`.layer` has ``MoE``, :mod:`.sharded_moe`
the gate and the all_to_all dispatch, :mod:`.experts` the expert copies, :mod:`.utils` the
optimizer helpers.
"""
from . import experts, layer, sharded_moe, utils
from .layer import MoE

__all__ = ["MoE", "experts", "layer", "sharded_moe", "utils"]
