"""``DistributedDataParallel`` and ``OptimizerWrapper`` on a :class:`Manager` (torchft's names):
DDP's bucketed, overlapped gradient averaging, sent through the manager so that a replica
dying mid-backward fails the step instead of the process."""
from __future__ import annotations

from ...nn.parallel import DistributedDataParallel as _DDP
from ...nn.parallel._reducer import _spare_core_per_rank


def _hook(manager, bucket):
    # as DDP's own reducer: the last bucket, and every bucket when there is no spare core per
    # replica to overlap on, in this thread (a hand-off to the backend's thread and back costs
    # milliseconds on a busy core); the live world decides, not the solo group's size of 1
    sync = bucket.is_last() or not _spare_core_per_rank(manager.world_size())
    return manager.allreduce(bucket.buffer(), sync=sync)


class DistributedDataParallel(_DDP):
    """DDP whose gradients are averaged over the manager's live replicas.

    Construction does no collective (the manager's first round already gave every replica the
    same weights), so a replacement builds it like the first replicas did. Buckets keep the
    order they are built in (parameters in reverse), never rebuilt from the first backward's
    arrival order: replicas started at different times must cut the same buckets.
    ``broadcast_buffers`` is off: buffers travel with the state when a replica recovers.

    Args:
        manager: the :class:`Manager`.
        module: the model.
        **kwargs: DDP's other arguments (``bucket_cap_mb``, ``find_unused_parameters``, ...).
    """

    def __init__(self, manager, module, **kwargs):
        kwargs.setdefault("broadcast_buffers", False)
        super().__init__(module, process_group=_solo_group(), **kwargs)
        self.manager = manager
        self.reducer._rebuilt = True  # the same buckets on every replica, whenever it started
        self.register_comm_hook(manager, _hook)


class OptimizerWrapper:
    """An optimizer whose ``zero_grad`` starts the manager's step and whose ``step`` applies it
    only when every replica finished it (``Manager.should_commit``).

    Args:
        manager: the :class:`Manager`.
        optimizer: the optimizer.
    """

    def __init__(self, manager, optimizer):
        self.manager, self.optim = manager, optimizer

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Start the step (a round of the quorum first if needed), then clear the gradients.

        Args:
            set_to_none: as the optimizer's.
        """
        self.manager.start_step()
        self.optim.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None) -> bool:
        """Apply the step if every replica finished it.

        Args:
            closure: not supported (must be None).

        Returns:
            bool: whether the step was applied.
        """
        if closure is not None:
            raise ValueError("OptimizerWrapper.step(closure) is not supported")
        if self.manager.should_commit():
            self.optim.step()
            return True
        return False

    @property
    def param_groups(self):
        """The optimizer's parameter groups."""
        return self.optim.param_groups

    def state_dict(self) -> dict:
        """The optimizer's state dict."""
        return self.optim.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        """Load the optimizer's state dict.

        Args:
            state_dict: as ``state_dict()`` returned it.
        """
        self.optim.load_state_dict(state_dict)


def _solo_group():
    """A process group of this process alone: DDP's construction and bucket bookkeeping run
    locally; the averaging goes through the manager's hook."""
    from .. import backends
    from .._groups import ProcessGroup, _world
    from ..store import HashStore
    rank = _world().global_rank
    be = backends.create_backend("tcp", HashStore(), 0, 1, 60.0, "ft-local", global_ranks=[rank])
    return ProcessGroup("ft-local", [rank], 0, be, "tcp", 60.0)
