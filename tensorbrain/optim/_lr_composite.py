"""Schedulers made of schedulers: ``SequentialLR`` (one after another) and
``ChainedScheduler`` (all at once) (``tensorbrain.optim.lr_scheduler`` re-exports them).
"""
from __future__ import annotations

from bisect import bisect_right

from ._lr_base import LRScheduler


class SequentialLR(LRScheduler):
    """Runs ``schedulers`` one after another, switching at ``milestones``."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR expects {len(schedulers) - 1} milestones for "
                             f"{len(schedulers)} schedulers, got {len(milestones)}")
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: scheduler {i} belongs to another optimizer")
        self.optimizer = optimizer
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        for s in self._schedulers:  # undo the initial step each scheduler took
            s.last_epoch -= 1
        self._schedulers[0]._initial_step()
        self._last_lr = self._schedulers[0].get_last_lr()

    def step(self):
        """Advance one epoch with the scheduler whose milestone range holds it (a new one starts at its milestone)."""
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        sched = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            sched.step(0)
        else:
            sched.step()
        self._last_lr = sched.get_last_lr()

    def state_dict(self):
        """The state of this scheduler and of each of its schedulers.

        Returns:
            A dict for ``load_state_dict``.
        """
        d = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        d["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return d

    def load_state_dict(self, state_dict):
        """Restore a state from ``state_dict()``, its schedulers' included.

        Args:
            state_dict: the dict ``state_dict()`` returned.
        """
        state_dict = dict(state_dict)
        subs = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, subs, strict=False):
            s.load_state_dict(sd)


class ChainedScheduler(LRScheduler):
    """Steps every scheduler in ``schedulers`` at each ``step()`` (their effects compose).

    Args:
        schedulers: schedulers of one optimizer.
        optimizer: that optimizer (default: the first scheduler's).

    Raises:
        ValueError: no schedulers, or schedulers of different optimizers.
    """

    def __init__(self, schedulers, optimizer=None):
        schedulers = list(schedulers)
        if not schedulers:
            raise ValueError("ChainedScheduler expects at least one scheduler")
        optimizer = optimizer or schedulers[0].optimizer
        for i, s in enumerate(schedulers):
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler expects all schedulers to belong to the same "
                                 f"optimizer, but scheduler {i} does not")
        self.optimizer = optimizer
        self._schedulers = schedulers
        self._last_lr = [g["lr"] for g in optimizer.param_groups]

    def step(self):
        """Step every chained scheduler once."""
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        """This scheduler's state with its children's state dicts under ``_schedulers``."""
        d = {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "_schedulers")}
        d["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return d

    def load_state_dict(self, state_dict):
        """Restore a state from :meth:`state_dict`, the children's included."""
        state_dict = dict(state_dict)
        subs = state_dict.pop("_schedulers")
        self.__dict__.update(state_dict)
        for s, sd in zip(self._schedulers, subs, strict=True):
            s.load_state_dict(sd)
