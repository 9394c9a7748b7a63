"""``tb.distributed.checkpoint.default_planner``: the planners ``save`` and ``load`` run.

>>> import tempfile, tensorbrain as tb
>>> import tensorbrain.distributed.checkpoint as dcp
>>> folder = tempfile.mkdtemp()
>>> _ = dcp.save({"w": tb.ones(2)}, checkpoint_id=folder, planner=dcp.DefaultSavePlanner())
>>> sd = {"w": tb.zeros(2), "new": tb.zeros(1)}
>>> dcp.load(sd, checkpoint_id=folder, planner=dcp.DefaultLoadPlanner(allow_partial_load=True))
>>> sd["w"].tolist(), sd["new"].tolist()
([1.0, 1.0], [0.0])
"""
from __future__ import annotations

from .planner import LoadPlanner, SavePlanner

__all__ = ["DefaultLoadPlanner", "DefaultSavePlanner"]


class DefaultSavePlanner(SavePlanner):
    """The default save plan: each rank writes its pieces, a replicated item once.

    Args:
        flatten_state_dict (bool): nested dicts are flattened to dotted keys (always so).
        flatten_sharded_tensors (bool): accepted for torch's signature.
        dedup_replicated_tensors (bool | None): deprecated in torch; replicated items are always
            written once.
        dedup_save_to_lowest_rank (bool): write each replicated item from the lowest rank holding
            it (default: the least loaded one).
        enable_plan_caching (bool): accepted for torch's signature (plans are not cached).

    Raises:
        NotImplementedError: ``flatten_state_dict=False``.
    """

    def __init__(self, flatten_state_dict: bool = True, flatten_sharded_tensors: bool = True,
                 dedup_replicated_tensors: bool | None = None,
                 dedup_save_to_lowest_rank: bool = False, enable_plan_caching: bool = False):
        if not flatten_state_dict:
            raise NotImplementedError("DefaultSavePlanner(flatten_state_dict=False) is not "
                                      "supported: TensorBrain's checkpoints hold flattened keys")
        self.flatten_state_dict = True
        self.flatten_sharded_tensors = bool(flatten_sharded_tensors)
        self.dedup_save_to_lowest_rank = bool(dedup_save_to_lowest_rank)
        self.enable_plan_caching = bool(enable_plan_caching)


class DefaultLoadPlanner(LoadPlanner):
    """The default load plan: every key of the state dict is read, resharded to its layout.

    Args:
        flatten_state_dict (bool): nested dicts are matched by dotted keys (always so).
        flatten_sharded_tensors (bool): accepted for torch's signature.
        allow_partial_load (bool): keys of the state dict that the checkpoint lacks keep their
            values instead of raising.

    Raises:
        NotImplementedError: ``flatten_state_dict=False``.
    """

    def __init__(self, flatten_state_dict: bool = True, flatten_sharded_tensors: bool = True,
                 allow_partial_load: bool = False):
        if not flatten_state_dict:
            raise NotImplementedError("DefaultLoadPlanner(flatten_state_dict=False) is not "
                                      "supported: TensorBrain's checkpoints hold flattened keys")
        self.flatten_state_dict = True
        self.flatten_sharded_tensors = bool(flatten_sharded_tensors)
        self.allow_partial_load = bool(allow_partial_load)
