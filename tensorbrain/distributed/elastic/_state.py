"""Horovod Elastic's API on TensorBrain's live recovery: ``run``, ``State``, ``ObjectState``,
``TorchState``, ``ElasticSampler``, ``HostsUpdatedInterrupt`` (``horovod.common.elastic`` and
``horovod.torch.elastic``'s names and semantics).

The membership is a membership-only :class:`tensorbrain.distributed.ft.Manager`: the first
call to :func:`init` (``hvd.init()`` under ``tbrun --fault_tolerant``, or ``run``) joins the
quorum and makes the default process group of the live processes. Then, as in Horovod:

* ``state.commit()`` saves a copy of the state in memory and checks for joiners: one small
  all_reduce carries rank 0's look at the join doorbell, so every rank agrees; a joiner
  raises :class:`HostsUpdatedInterrupt` on every rank at the same commit;
* a collective that fails (a process died: ``DistError``, Horovod's ``HorovodInternalError``)
  makes :func:`run` restore the last commit on the survivors;
* either way ``run`` then does a round of the quorum (the dead dropped, the joiners admitted),
  remakes the process group in the same processes, calls the reset callbacks, broadcasts the
  state from the replica with the most commits (``state.sync()``) and calls the function again.
"""
from __future__ import annotations

import copy
import functools
import math

import numpy as np

from ..errors import DistError

HorovodInternalError = DistError  # what a failed collective raises here
_MANAGER: list = [None]


class HostsUpdatedInterrupt(RuntimeError):
    """Replicas joined: every rank raises it from the same ``commit()``; ``run`` resets.

    Args:
        skip_sync: Horovod's flag; the state is synced after every reset here.
    """

    def __init__(self, skip_sync: bool = False):
        super().__init__("the set of replicas changed")
        self.skip_sync = skip_sync


def init(config=None):
    """Join the live group (once per process) and return its membership manager.

    Args:
        config: a JSON-able dict every replica must share (a joiner with another is refused).

    Returns:
        The :class:`tensorbrain.distributed.ft.Manager`.
    """
    if _MANAGER[0] is None:
        from ..ft.manager import Manager
        _MANAGER[0] = Manager(config=config)
    return _MANAGER[0]


def _manager():
    return init()


# ***** states *****
class State:
    """The state :func:`run` saves, restores and syncs (Horovod's ``State``).

    Subclasses implement ``save``, ``restore`` and ``sync``.
    """

    def __init__(self):
        self._reset_callbacks: list = []

    def register_reset_callbacks(self, callbacks) -> None:
        """Call these (no arguments) after every reset (the world changed).

        Args:
            callbacks: a list of callables.
        """
        self._reset_callbacks.extend(callbacks)

    def on_reset(self) -> None:
        """Run the reset callbacks."""
        for cb in self._reset_callbacks:
            cb()

    def on_hosts_updated(self, timestamp=None, update_res=None) -> None:
        """Horovod's hook for host updates; joiners are found at ``commit`` here.

        Args:
            timestamp: ignored.
            update_res: ignored.
        """

    def commit(self) -> None:
        """Save the state in memory, then check whether replicas joined.

        Raises:
            HostsUpdatedInterrupt: a replica waits to join (raised on every rank alike).
            DistError: a replica failed since the last commit.
        """
        self.save()
        self.check_host_updates()

    def check_host_updates(self) -> None:
        """Raise :class:`HostsUpdatedInterrupt` on every rank when a replica waits to join.

        Raises:
            HostsUpdatedInterrupt: a replica waits.
            DistError: the check's all_reduce failed (a replica died).
        """
        mgr = _manager()
        if not mgr.should_commit():
            raise DistError(f"replica {mgr.replica_id}: a replica failed since the last commit")
        if mgr.needs_round():
            raise HostsUpdatedInterrupt()

    def save(self) -> None:
        """Keep a copy of the state in memory."""
        raise NotImplementedError

    def restore(self) -> None:
        """Go back to the last :meth:`save`."""
        raise NotImplementedError

    def sync(self) -> None:
        """Give every rank the state of the rank with the most commits."""
        raise NotImplementedError


class ObjectState(State):
    """State made of plain attributes (``ObjectState(epoch=0, batch=0)``; ``state.epoch``).

    Args:
        bcast_object: accepted for Horovod's signature; the broadcast is the process group's.
        get_rank: accepted for Horovod's signature.
        **kwargs: the attributes and their initial values (data only: numbers, strings,
            lists, dicts, arrays).
    """

    def __init__(self, bcast_object=None, get_rank=None, **kwargs):
        super().__init__()
        self._names = list(kwargs)
        for k, v in kwargs.items():
            setattr(self, k, v)
        self._saved: dict = {}
        ObjectState.save(self)

    def _values(self) -> dict:
        return {k: getattr(self, k) for k in self._names}

    def save(self) -> None:
        """Copy the attributes."""
        self._saved = copy.deepcopy(self._values())

    def restore(self) -> None:
        """Set the attributes back to the last save."""
        for k, v in copy.deepcopy(self._saved).items():
            setattr(self, k, v)

    def sync(self) -> None:
        """Broadcast the attributes from the rank with the most commits, and save."""
        for k, v in _broadcast(self._values()).items():
            setattr(self, k, v)
        ObjectState.save(self)


class TorchState(ObjectState):
    """A model, an optimizer, samplers and plain attributes (``horovod.torch.elastic``'s).

    Args:
        model: a module (its ``state_dict`` is saved, restored and broadcast).
        optimizer: an optimizer (the same).
        **kwargs: more attributes; :class:`ElasticSampler` values keep their progress and are
            re-split over the new world on every reset.
    """

    def __init__(self, model=None, optimizer=None, **kwargs):
        self.model, self.optimizer = model, optimizer
        self._samplers = {k: v for k, v in kwargs.items() if isinstance(v, ElasticSampler)}
        plain = {k: v for k, v in kwargs.items() if k not in self._samplers}
        for k, v in self._samplers.items():
            setattr(self, k, v)
        self._torch_saved: dict = {}
        super().__init__(**plain)
        self._save_torch()

    def _save_torch(self) -> None:
        snap = {}
        if self.model is not None:
            snap["model"] = _copy_state(self.model.state_dict())
        if self.optimizer is not None:
            snap["optimizer"] = _copy_state(self.optimizer.state_dict())
        snap["samplers"] = {k: s.state_dict() for k, s in self._samplers.items()}
        self._torch_saved = snap

    def save(self) -> None:
        """Copy the model's and optimizer's state dicts, the samplers' progress and the
        attributes."""
        super().save()
        self._save_torch()

    def restore(self) -> None:
        """Load the last save into the model, optimizer, samplers and attributes."""
        super().restore()
        snap = self._torch_saved
        if self.model is not None:
            self.model.load_state_dict(_copy_state(snap["model"]))
        if self.optimizer is not None:
            self.optimizer.load_state_dict(_copy_state(snap["optimizer"]))
            forget = getattr(self.optimizer, "_hvd_reset", None)  # hvd.DistributedOptimizer's
            if forget is not None:                                 # all-reduces in flight
                forget()
        for k, s in self._samplers.items():
            s.load_state_dict(snap["samplers"][k])

    def sync(self) -> None:
        """Broadcast model, optimizer and attributes from the rank with the most commits; the
        samplers' processed indices are united over the ranks and re-split; then save."""
        live = {}
        if self.model is not None:
            live["model"] = self.model.state_dict()
        if self.optimizer is not None:
            live["optimizer"] = self.optimizer.state_dict()
        got = _broadcast(live)
        if self.model is not None:
            self.model.load_state_dict(got["model"])
        if self.optimizer is not None:
            self.optimizer.load_state_dict(got["optimizer"])
        for s in self._samplers.values():
            s._sync()
        super().sync()
        self._save_torch()


def _copy_state(sd):
    if isinstance(sd, dict):
        return {k: _copy_state(v) for k, v in sd.items()}
    if isinstance(sd, list):
        return [_copy_state(v) for v in sd]
    if hasattr(sd, "clone"):
        return sd.detach().clone() if hasattr(sd, "detach") else sd.clone()
    return copy.deepcopy(sd)


def _broadcast(obj):
    from ... import distributed as dist
    if dist.get_world_size() == 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=_manager().source_rank())
    return box[0]


# ***** the loop *****
def run(func):
    """Decorate ``func(state, *args, **kwargs)`` so it survives replicas leaving and joining.

    Args:
        func: the training function; its first argument is a :class:`State`.

    Returns:
        The wrapped function: it joins the group (once), syncs the state, calls ``func``; on a
        failed collective it restores the last commit, on joiners it keeps the state; then it
        does a round of the quorum, remakes the process group, runs the reset callbacks, syncs
        and calls ``func`` again.

    Example::

        @hvd.elastic.run
        def train(state):
            for state.epoch in range(state.epoch, epochs):
                ...
                state.commit()
    """
    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        mgr = _manager()
        if mgr.needs_round():
            mgr.start_step()
        while True:
            state.sync()
            try:
                return func(state, *args, **kwargs)
            except HostsUpdatedInterrupt:
                pass
            except DistError as exc:
                mgr.report_error(exc)
                state.restore()
            mgr.start_step()
            state.on_reset()
    return wrapper


# ***** data *****
class ElasticSampler:
    """Horovod's ``ElasticSampler``: the epoch's indices split over the live ranks, remembering
    what was processed, so a reset re-splits only what is left.

    Args:
        dataset: anything with ``len()``.
        shuffle: a new permutation per epoch (seeded by ``seed + epoch``).
        seed: the shuffle's seed.
    """

    def __init__(self, dataset, shuffle: bool = True, seed: int = 0):
        self.dataset, self.shuffle, self.seed = dataset, bool(shuffle), int(seed)
        self.epoch = 0
        self.processed_indices: set = set()
        self.reset()

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch``: nothing processed yet.

        Args:
            epoch: the epoch.
        """
        self.epoch = int(epoch)
        self.processed_indices = set()
        self.reset()

    def record_batch(self, batch_idx: int, batch_size: int) -> None:
        """Mark this rank's batch ``batch_idx`` (of ``batch_size``) processed.

        Args:
            batch_idx: the batch's index in this rank's share.
            batch_size: samples per batch.
        """
        self.record_indices(self.get_indices(batch_idx, batch_size))

    def record_indices(self, indices) -> None:
        """Mark ``indices`` processed.

        Args:
            indices: dataset indices.
        """
        self.processed_indices.update(int(i) for i in indices)

    def get_indices(self, batch_idx: int, batch_size: int) -> list:
        """This rank's indices of batch ``batch_idx``.

        Args:
            batch_idx: the batch's index in this rank's share.
            batch_size: samples per batch.
        """
        start = batch_idx * batch_size
        return self.indices[start:min(start + batch_size, len(self.indices))]

    def state_dict(self) -> dict:
        """The epoch and the processed indices."""
        return {"epoch": self.epoch, "processed_indices": sorted(self.processed_indices)}

    def load_state_dict(self, state: dict) -> None:
        """Restore from :meth:`state_dict` and re-split.

        Args:
            state: as ``state_dict()`` returned it.
        """
        self.epoch = int(state["epoch"])
        self.processed_indices = set(int(i) for i in state["processed_indices"])
        self.reset()

    def _sync(self) -> None:
        from ... import distributed as dist
        if dist.is_initialized() and dist.get_world_size() > 1:
            every: list = [None] * dist.get_world_size()
            dist.all_gather_object(every, sorted(self.processed_indices))
            self.processed_indices = set(i for part in every for i in part)
        self.reset()

    def reset(self) -> None:
        """Split what is left of the epoch over the current ranks (padding to equal shares)."""
        from ... import distributed as dist
        on = dist.is_initialized()
        self.num_replicas = dist.get_world_size() if on else 1
        self.rank = dist.get_rank() if on else 0
        n = len(self.dataset)
        order = (np.random.default_rng(self.seed + self.epoch).permutation(n) if self.shuffle
                 else np.arange(n))
        left = [int(i) for i in order if int(i) not in self.processed_indices]
        self.num_samples = math.ceil(len(left) / self.num_replicas) if left else 0
        total = self.num_samples * self.num_replicas
        left += left[:total - len(left)]
        self.indices = left[self.rank:total:self.num_replicas]

    def __iter__(self):
        return iter(self.indices)

    def __len__(self) -> int:
        return self.num_samples
