"""``hvd.elastic`` (``horovod.torch.elastic``'s names) on TensorBrain's live recovery: a job
started with ``tbrun --fault_tolerant`` (or against a store that outlives its processes) keeps
training when processes die and admits new ones at ``state.commit()``; see
``tensorbrain.distributed.elastic`` and docs/fault_tolerance.md."""
from ..distributed.elastic._state import (ElasticSampler, HorovodInternalError,
                                          HostsUpdatedInterrupt, ObjectState, State, TorchState,
                                          run)

__all__ = ["ElasticSampler", "HorovodInternalError", "HostsUpdatedInterrupt", "ObjectState",
           "State", "TorchState", "run"]
