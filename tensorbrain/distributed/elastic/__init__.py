"""``tb.distributed.elastic``: torch.distributed.elastic's paths that scripts import
(``multiprocessing.errors.record``), and Horovod Elastic's API on TensorBrain's live recovery:
``run``, ``State``, ``ObjectState``, ``TorchState``, ``ElasticSampler``,
``HostsUpdatedInterrupt`` (see ``_state`` and docs/fault_tolerance.md)."""

_STATE_NAMES = ("run", "init", "State", "ObjectState", "TorchState", "ElasticSampler",
                "HostsUpdatedInterrupt", "HorovodInternalError")


def __getattr__(name):
    if name in _STATE_NAMES:
        from . import _state
        return getattr(_state, name)
    raise AttributeError(f"module 'tensorbrain.distributed.elastic' has no attribute {name!r}")


__all__ = list(_STATE_NAMES)
