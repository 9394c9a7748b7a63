"""``post_localSGD_hook`` and ``PostLocalSGDState`` (torch's
``ddp_comm_hooks.post_localSGD_hook``): DDP's global all_reduce for the first
``start_localSGD_iter`` iterations, then only within ``subgroup`` (by default each node's
ranks: ``LOCAL_WORLD_SIZE`` consecutive ranks, as torch's ``new_subgroups``), or nothing with
``post_local_gradient_allreduce=False``. Pair it with ``PostLocalSGDOptimizer``."""
from __future__ import annotations

import os

from .._future import Future
from .default_hooks import _allreduce_fut, _dist


class PostLocalSGDState:
    """The hook's state.

    Args:
        process_group: the global group (None: the default group).
        subgroup: the group of the local phase (None: this node's ranks).
        start_localSGD_iter: iterations of global all_reduce first.
        post_local_gradient_allreduce: all_reduce within ``subgroup`` after the start (False:
            no communication at all in the local phase).
    """

    __slots__ = ["process_group", "subgroup", "start_localSGD_iter",
                 "post_local_gradient_allreduce", "iter"]

    def __init__(self, process_group, subgroup, start_localSGD_iter: int,
                 post_local_gradient_allreduce: bool = True):
        self.process_group = process_group
        self.subgroup = subgroup if subgroup is not None else _node_group()
        self.start_localSGD_iter = int(start_localSGD_iter)
        self.post_local_gradient_allreduce = bool(post_local_gradient_allreduce)
        self.iter = 0

    def maybe_increase_iter(self, bucket) -> None:
        """Count an iteration when the last bucket of a backward is reduced.

        Args:
            bucket: the hook's bucket.
        """
        if bucket.is_last():
            self.iter += 1


def _node_group():
    """This node's ranks as a group (every rank creates every node's group, in order)."""
    dist = _dist()
    world = dist.get_world_size()
    local = int(os.environ.get("LOCAL_WORLD_SIZE", world) or world)
    mine = None
    for start in range(0, world, local):
        g = dist.new_group(list(range(start, min(start + local, world))))
        if start <= dist.get_rank() < start + local:
            mine = g
    return mine


def post_localSGD_hook(state: PostLocalSGDState, bucket) -> Future:
    """Global all_reduce before ``state.start_localSGD_iter``, then within ``state.subgroup``.

    Args:
        state: a :class:`PostLocalSGDState`.
        bucket: DDP's gradient bucket.

    Returns:
        Future: the averaged bucket.
    """
    if state.iter < state.start_localSGD_iter:
        state.maybe_increase_iter(bucket)
        return _allreduce_fut(state.process_group, bucket.buffer())
    if not state.post_local_gradient_allreduce:
        return Future.completed(bucket.buffer())
    return _allreduce_fut(state.subgroup, bucket.buffer())
