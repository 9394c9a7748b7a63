"""The schedules given by a formula of the step: step, exponential, cosine, linear,
polynomial... (``tensorbrain.optim.lr_scheduler`` re-exports them; the cyclic ones are in
``_lr_cyclic.py``).
"""
from __future__ import annotations

import math
from bisect import bisect_right
from collections import Counter

from ._lr_base import LRScheduler


class StepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every ``step_size`` epochs.

    Args:
        optimizer: the optimizer whose groups' ``lr`` it sets.
        step_size: epochs between decays.
        gamma: the decay factor.
        last_epoch: the index of the last epoch when resuming (-1: start).

    Raises:
        TypeError: ``optimizer`` is not an Optimizer.

    Example:
        >>> import tensorbrain as tb
        >>> opt = tb.optim.SGD([tb.zeros(1, requires_grad=True)], lr=1.0)
        >>> sched = tb.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        >>> lrs = []
        >>> for _ in range(4):
        ...     lrs.append(sched.get_last_lr()[0]); opt.step(); sched.step()
        >>> lrs
        [1.0, 1.0, 0.5, 0.5]
    """
    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (StepLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` at each epoch in ``milestones``.

    Args:
        optimizer: the optimizer whose groups' ``lr`` it sets.
        milestones: epoch numbers (a repeated one decays several times).
        gamma: the decay factor.
        last_epoch: the index of the last epoch when resuming (-1: start).

    Raises:
        TypeError: ``optimizer`` is not an Optimizer.
    """
    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones = Counter(milestones)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (MultiStepLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        if self.last_epoch not in self.milestones:
            return self._lrs()
        return [lr * self.gamma ** self.milestones[self.last_epoch] for lr in self._lrs()]

    def _get_closed_form_lr(self):
        ms = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(ms, self.last_epoch) for b in self.base_lrs]

    def state_dict(self):
        """The scheduler's state, with the milestones as a JSON-safe dict.

        Returns:
            A dict for ``load_state_dict``.
        """
        d = super().state_dict()
        d["milestones"] = {str(k): v for k, v in self.milestones.items()}  # JSON-safe keys
        return d


class ExponentialLR(LRScheduler):
    """Multiply the learning rate by ``gamma`` every epoch.

    Args:
        optimizer: the optimizer whose groups' ``lr`` it sets.
        gamma: the decay factor.
        last_epoch: the index of the last epoch when resuming (-1: start).

    Raises:
        TypeError: ``optimizer`` is not an Optimizer.
    """
    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (ExponentialLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        if self.last_epoch == 0:
            return self._lrs()
        return [lr * self.gamma for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Anneal the learning rate from its initial value to ``eta_min`` along a cosine over ``T_max`` epochs.

    Args:
        optimizer: the optimizer whose groups' ``lr`` it sets.
        T_max: epochs of one half period.
        eta_min: the lowest learning rate.
        last_epoch: the index of the last epoch when resuming (-1: start).

    Raises:
        TypeError: ``optimizer`` is not an Optimizer.
    """
    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (CosineAnnealingLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        e, T, lo = self.last_epoch, self.T_max, self.eta_min
        if e == 0:
            return self._lrs()
        if self._step_count == 1 and e > 0:
            return [lo + (b - lo) * (1 + math.cos(e * math.pi / T)) / 2 for b in self.base_lrs]
        if (e - 1 - T) % (2 * T) == 0:
            return [lr + (b - lo) * (1 - math.cos(math.pi / T)) / 2
                    for lr, b in zip(self._lrs(), self.base_lrs, strict=False)]
        return [(1 + math.cos(math.pi * e / T)) / (1 + math.cos(math.pi * (e - 1) / T)) * (lr - lo) + lo
                for lr in self._lrs()]

    def _get_closed_form_lr(self):
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
                for b in self.base_lrs]


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch). The lambdas are not part of the state dict (as torch)."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (LambdaLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        return [b * fn(self.last_epoch) for fn, b in zip(self.lr_lambdas, self.base_lrs, strict=False)]


class LinearLR(LRScheduler):
    """Scale the learning rate by a factor going linearly from ``start_factor`` to ``end_factor`` over ``total_iters`` epochs.

    Args:
        optimizer: the optimizer whose groups' ``lr`` it sets.
        start_factor: the factor at epoch 0.
        end_factor: the factor from ``total_iters`` on.
        total_iters: epochs of the ramp.
        last_epoch: the index of the last epoch when resuming (-1: start).

    Raises:
        TypeError: ``optimizer`` is not an Optimizer.
    """
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (LinearLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        if e == 0:
            return [lr * s for lr in self._lrs()]
        if e > n:
            return self._lrs()
        return [lr * (1.0 + (f - s) / (n * s + (e - 1) * (f - s))) for lr in self._lrs()]

    def _get_closed_form_lr(self):
        e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
        return [b * (s + (f - s) * min(n, e) / n) for b in self.base_lrs]


class MultiplicativeLR(LRScheduler):
    """lr *= lr_lambda(epoch) at every step after the first (PyTorch's MultiplicativeLR).

    Args:
        optimizer: the optimizer whose groups' ``lr`` is set.
        lr_lambda: a function of the epoch, or one per parameter group (not saved in the
            state dict, as in torch).
        last_epoch: -1 to start; otherwise resume (the groups need ``initial_lr``).

    Raises:
        ValueError: a list of lambdas of another length than the groups.
    """

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        n = len(optimizer.param_groups)
        self.lr_lambdas = list(lr_lambda) if isinstance(lr_lambda, (list, tuple)) else [lr_lambda] * n
        if len(self.lr_lambdas) != n:
            raise ValueError(f"Expected {n} lr_lambdas, but got {len(self.lr_lambdas)}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (MultiplicativeLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        if self.last_epoch > 0:
            return [lr * fn(self.last_epoch) for fn, lr in zip(self.lr_lambdas, self._lrs(), strict=True)]
        return self._lrs()


class ConstantLR(LRScheduler):
    """lr = base_lr * factor until ``total_iters`` steps, then base_lr.

    Args:
        optimizer: the optimizer; factor: in [0, 1]; total_iters: steps at the lower rate;
        last_epoch: -1 to start.

    Raises:
        ValueError: a factor outside [0, 1].
    """

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        if not 0 <= factor <= 1:
            raise ValueError("Constant multiplicative factor expected to be between 0 and 1.")
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (ConstantLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        if self.last_epoch == 0:
            return [lr * self.factor for lr in self._lrs()]
        if self.last_epoch != self.total_iters:
            return self._lrs()
        return [lr * (1.0 / self.factor) for lr in self._lrs()]

    def _get_closed_form_lr(self):
        on = self.last_epoch >= self.total_iters
        return [b * (self.factor + on * (1 - self.factor)) for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base_lr * (1 - min(epoch, total_iters) / total_iters) ** power.

    Args:
        optimizer: the optimizer; total_iters: steps to reach 0; power: the polynomial's
        degree; last_epoch: -1 to start.
    """

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (PolynomialLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        e, n = self.last_epoch, self.total_iters
        if e == 0 or e > n:
            return self._lrs()
        factor = ((1.0 - e / n) / (1.0 - (e - 1) / n)) ** self.power
        return [lr * factor for lr in self._lrs()]

    def _get_closed_form_lr(self):
        e, n = self.last_epoch, self.total_iters
        return [b * (1.0 - min(n, e) / n) ** self.power for b in self.base_lrs]
