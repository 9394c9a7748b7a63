"""The scheduler base class: ``step()``, the learning rates it writes, state dicts.

The schedulers themselves are in ``_lr_schedules.py``, ``_lr_cyclic.py``, ``_lr_composite.py``
and ``_lr_plateau.py``; ``tensorbrain.optim.lr_scheduler`` is their public home.
"""
from __future__ import annotations

from collections import Counter

from .optimizer import Optimizer


class LRScheduler:
    """Base class: ``step()`` advances ``last_epoch`` and writes ``get_lr()`` into the groups."""

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] when "
                                   "resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self.step()

    def get_lr(self) -> list[float]:  # pragma: no cover - abstract
        """The learning rates for the current ``last_epoch`` (subclasses define it).

        Returns:
            One learning rate per parameter group.
        """
        raise NotImplementedError

    def get_last_lr(self) -> list[float]:
        """The learning rates the last ``step()`` wrote into the optimizer.

        Returns:
            One learning rate per parameter group.
        """
        return self._last_lr

    def step(self, epoch=None):
        """Advance one epoch (or jump to ``epoch``) and write the new rates into the optimizer.

        Args:
            epoch: None to advance by one (the normal use); an epoch number to jump to (deprecated
                in torch; uses the closed form where the scheduler has one).
        """
        self._step_count += 1
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed = getattr(self, "_get_closed_form_lr", None)
            values = closed() if closed is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values, strict=False):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _lrs(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict:
        """The scheduler's state (everything but the optimizer and callables).

        Returns:
            A dict for ``load_state_dict``.
        """
        return {k: v for k, v in self.__dict__.items() if k not in ("optimizer", "lr_lambdas")
                and not callable(v)}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a state from ``state_dict()``.

        Args:
            state_dict: the dict ``state_dict()`` returned.
        """
        for k, v in state_dict.items():
            if k == "_milestones_list":
                continue
            self.__dict__[k] = Counter({int(m): c for m, c in v.items()}) if k == "milestones" \
                and isinstance(v, dict) else v


_LRScheduler = LRScheduler
