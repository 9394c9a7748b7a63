"""``ReduceLROnPlateau``: the learning rate follows a metric, not the step
(``tensorbrain.optim.lr_scheduler`` re-exports it).
"""
from __future__ import annotations

import math

from ._lr_base import LRScheduler
from .optimizer import Optimizer


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` once a metric passed to ``step(metrics)`` has not improved
    for more than ``patience`` epochs (then wait ``cooldown`` epochs), as in PyTorch.

    Args:
        optimizer: the optimizer; mode: ``'min'`` or ``'max'`` (which way is better);
        factor: the multiplier (< 1); patience: bad epochs tolerated; threshold and
        threshold_mode (``'rel'`` or ``'abs'``): what counts as an improvement; cooldown:
        epochs to wait after a reduction; min_lr: a floor (one per group or one for all);
        eps: smaller lr changes are skipped.

    Raises:
        ValueError: factor >= 1, an unknown mode or threshold mode, a min_lr list of the wrong
            length.
        TypeError: ``optimizer`` is not an Optimizer.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        if factor >= 1.0:
            raise ValueError("Factor should be < 1.0.")
        if mode not in ("min", "max"):
            raise ValueError(f"mode {mode} is unknown!")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"threshold mode {threshold_mode} is unknown!")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        n = len(optimizer.param_groups)
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != n:
                raise ValueError(f"expected {n} min_lrs, got {len(min_lr)}")
            self.min_lrs = list(min_lr)
        else:
            self.min_lrs = [min_lr] * n
        self.factor, self.patience, self.cooldown, self.eps = factor, patience, cooldown, eps
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.last_epoch = 0
        self._last_lr = [g["lr"] for g in optimizer.param_groups]
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    @property
    def in_cooldown(self):
        """True while the cooldown after a reduction runs."""
        return self.cooldown_counter > 0

    def is_better(self, a, best):
        """Whether metric ``a`` improves on ``best`` by the threshold."""
        rel = self.threshold_mode == "rel"
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if rel else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if rel else a > best + self.threshold

    def step(self, metrics, epoch=None):
        """Record this epoch's metric; reduce the lrs after too many bad epochs."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self.is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0   # ignore bad epochs in cooldown
        if self.num_bad_epochs > self.patience:
            for i, group in enumerate(self.optimizer.param_groups):
                old = float(group["lr"])
                new = max(old * self.factor, self.min_lrs[i])
                if old - new > self.eps:
                    group["lr"] = new
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        """Everything but the optimizer (best, counters, options)."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        """Restore a state from :meth:`state_dict`."""
        self.__dict__.update(state_dict)
