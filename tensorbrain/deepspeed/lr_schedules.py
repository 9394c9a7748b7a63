"""DeepSpeed's learning-rate schedules (``deepspeed.runtime.lr_schedules``): WarmupLR,
WarmupDecayLR, WarmupCosineLR, stepped once per optimizer step."""
from __future__ import annotations

import math

from ..optim.lr_scheduler import LRScheduler


class WarmupLR(LRScheduler):
    """From ``warmup_min_lr`` to ``warmup_max_lr`` over ``warmup_num_steps`` ("log" or
    "linear" warm-up), then constant.

    Args:
        optimizer: the optimizer.
        warmup_min_lr: the first learning rate.
        warmup_max_lr: the learning rate after the warm-up.
        warmup_num_steps: the warm-up length in steps.
        warmup_type: "log" (DeepSpeed's default) or "linear".
        last_batch_iteration: the step to resume from (-1: start).
    """

    def __init__(self, optimizer, warmup_min_lr=0.0, warmup_max_lr=0.001, warmup_num_steps=1000,
                 warmup_type="log", last_batch_iteration=-1):
        if warmup_type not in ("log", "linear"):
            raise ValueError(f"warmup_type must be 'log' or 'linear', got {warmup_type!r}")
        self.min_lrs = _per_group(optimizer, warmup_min_lr)
        self.max_lrs = _per_group(optimizer, warmup_max_lr)
        self.delta_lrs = [hi - lo for hi, lo in zip(self.max_lrs, self.min_lrs, strict=True)]
        self.warmup_num_steps = max(2, int(warmup_num_steps))
        self.warmup_type = warmup_type
        self.inverse_log_warm_up = 1.0 / math.log(self.warmup_num_steps)
        super().__init__(optimizer, last_batch_iteration)

    def _gamma(self) -> float:
        it = self.last_epoch
        if it < self.warmup_num_steps:
            if self.warmup_type == "log":
                return self.inverse_log_warm_up * math.log(it + 1)
            return it / self.warmup_num_steps
        return 1.0

    def get_lr(self):
        """The learning rates of the current step."""
        gamma = self._gamma()
        return [lo + d * gamma for lo, d in zip(self.min_lrs, self.delta_lrs, strict=True)]


class WarmupDecayLR(WarmupLR):
    """:class:`WarmupLR`, then a linear decay to 0 at ``total_num_steps``.

    Args:
        optimizer: the optimizer.
        total_num_steps: the step at which the learning rate reaches 0.
        warmup_min_lr: as :class:`WarmupLR`.
        warmup_max_lr: as :class:`WarmupLR`.
        warmup_num_steps: as :class:`WarmupLR`.
        warmup_type: as :class:`WarmupLR`.
        last_batch_iteration: the step to resume from (-1: start).
    """

    def __init__(self, optimizer, total_num_steps, warmup_min_lr=0.0, warmup_max_lr=0.001,
                 warmup_num_steps=1000, warmup_type="log", last_batch_iteration=-1):
        self.total_num_steps = int(total_num_steps)
        if self.total_num_steps < warmup_num_steps:
            raise ValueError(f"total_num_steps {total_num_steps} is less than "
                             f"warmup_num_steps {warmup_num_steps}")
        super().__init__(optimizer, warmup_min_lr, warmup_max_lr, warmup_num_steps, warmup_type,
                         last_batch_iteration)

    def _gamma(self) -> float:
        if self.last_epoch < self.warmup_num_steps:
            return super()._gamma()
        return max(0.0, (self.total_num_steps - self.last_epoch)
                   / max(1.0, self.total_num_steps - self.warmup_num_steps))


class WarmupCosineLR(LRScheduler):
    """A warm-up to the optimizer's lr (ratio ``warmup_min_ratio`` -> 1), then a cosine decay
    to ``cos_min_ratio`` times it at ``total_num_steps``.

    Args:
        optimizer: the optimizer (its lr is the peak).
        total_num_steps: the end of the cosine.
        warmup_min_ratio: the first lr as a fraction of the peak.
        warmup_num_steps: the warm-up length.
        cos_min_ratio: the last lr as a fraction of the peak.
        warmup_type: "log" or "linear".
        last_batch_iteration: the step to resume from (-1: start).
    """

    def __init__(self, optimizer, total_num_steps, warmup_min_ratio=0.0, warmup_num_steps=1000,
                 cos_min_ratio=0.0001, warmup_type="log", last_batch_iteration=-1):
        if warmup_type not in ("log", "linear"):
            raise ValueError(f"warmup_type must be 'log' or 'linear', got {warmup_type!r}")
        self.total_num_steps = int(total_num_steps)
        self.warmup_min_ratio, self.cos_min_ratio = float(warmup_min_ratio), float(cos_min_ratio)
        self.warmup_num_steps = max(2, int(warmup_num_steps))
        self.warmup_type = warmup_type
        self.inverse_log_warm_up = 1.0 / math.log(self.warmup_num_steps)
        super().__init__(optimizer, last_batch_iteration)

    def _ratio(self) -> float:
        it = self.last_epoch
        if it < self.warmup_num_steps:
            gamma = (self.inverse_log_warm_up * math.log(it + 1) if self.warmup_type == "log"
                     else it / self.warmup_num_steps)
            return self.warmup_min_ratio + (1.0 - self.warmup_min_ratio) * gamma
        progress = min(1.0, (it - self.warmup_num_steps)
                       / max(1, self.total_num_steps - self.warmup_num_steps))
        cos = 0.5 * (1.0 + math.cos(math.pi * progress))
        return self.cos_min_ratio + (1.0 - self.cos_min_ratio) * cos

    def get_lr(self):
        """The learning rates of the current step."""
        return [base * self._ratio() for base in self.base_lrs]


def _per_group(optimizer, value):
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} values, got {len(value)}")
        return [float(v) for v in value]
    return [float(value)] * len(optimizer.param_groups)


SCHEDULES = {"WarmupLR": WarmupLR, "WarmupDecayLR": WarmupDecayLR,
             "WarmupCosineLR": WarmupCosineLR}
