"""DeepSpeed's learning-rate schedules (``deepspeed.runtime.lr_schedules``): LRRangeTest, OneCycle,
WarmupLR, WarmupDecayLR, WarmupCosineLR, stepped once per optimizer step.

They follow DeepSpeed's own objects (not ``torch.optim.lr_scheduler``): ``last_batch_iteration``
starts at -1 and construction only *initialises* the optimizer's lr (WarmupLR/WarmupDecayLR:
``warmup_min_lr``; WarmupCosineLR: 0; OneCycle/LRRangeTest: their minimum), so the first
optimizer step runs at that value and ``step()`` number ``k`` sets the lr of iteration ``k - 1``.
The first two steps of a warm-up therefore both run at ``warmup_min_lr``, as in DeepSpeed (since
its PR #6597, 2024; earlier versions ran the first step at the optimizer's configured lr).
``state_dict()`` is ``{"last_batch_iteration": k}``.
"""
from __future__ import annotations

import math


def _per_group(optimizer, value, name: str) -> list:
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"expected {len(optimizer.param_groups)} values for {name} (one per "
                             f"parameter group), got {len(value)}")
        return [float(v) for v in value]
    return [float(value)] * len(optimizer.param_groups)


def _check_warmup_type(warmup_type: str) -> str:
    if warmup_type not in ("log", "linear"):
        raise ValueError(f"warmup_type must be 'log' or 'linear', got {warmup_type!r}")
    return warmup_type


class _Schedule:
    """The protocol of DeepSpeed's schedules: ``step``, ``get_lr``, ``get_last_lr``,
    ``state_dict``/``load_state_dict`` around ``last_batch_iteration``."""

    def __init__(self, optimizer, last_batch_iteration: int):
        if not hasattr(optimizer, "param_groups"):   # a wrapper: DeepSpeed looks inside it
            optimizer = getattr(optimizer, "optimizer", optimizer)
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"{type(optimizer).__name__} is not an optimizer (no param_groups)")
        self.optimizer = optimizer
        self.last_batch_iteration = int(last_batch_iteration)
        self._last_lr: list | None = None

    def get_lr(self) -> list:
        """The learning rates of ``last_batch_iteration``, one per parameter group."""
        raise NotImplementedError

    def _apply(self, lrs) -> None:
        for group, lr in zip(self.optimizer.param_groups, lrs, strict=False):
            group["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]

    def step(self, last_batch_iteration=None) -> None:
        """Advance to the next iteration (or to ``last_batch_iteration``) and set its lr.

        Args:
            last_batch_iteration: the iteration to jump to (default: the next one).
        """
        if last_batch_iteration is None:
            last_batch_iteration = self.last_batch_iteration + 1
        self.last_batch_iteration = int(last_batch_iteration)
        self._apply(self.get_lr())

    def get_last_lr(self) -> list:
        """The learning rates last set.

        Raises:
            AssertionError: nothing was set yet (DeepSpeed's message).
        """
        assert self._last_lr is not None, "need to call step() first"
        return self._last_lr

    def state_dict(self) -> dict:
        """``{"last_batch_iteration": k}``."""
        return {"last_batch_iteration": self.last_batch_iteration}

    def load_state_dict(self, state_dict: dict) -> None:
        """Resume at ``state_dict["last_batch_iteration"]``.

        Args:
            state_dict: what :meth:`state_dict` returned.
        """
        self.last_batch_iteration = int(state_dict["last_batch_iteration"])


class LRRangeTest(_Schedule):
    """Grow the lr from ``lr_range_test_min_lr`` by ``step_rate`` every ``step_size`` steps
    (continuously, or in stairs), to find the largest lr that still trains.

    Args:
        optimizer: the optimizer.
        lr_range_test_min_lr: the first lr (one value, or one per group).
        lr_range_test_step_size: steps per unit of increase.
        lr_range_test_step_rate: the increase per unit.
        lr_range_test_staircase: increase in whole units only.
        last_batch_iteration: the step to resume from (-1: start).
    """

    def __init__(self, optimizer, lr_range_test_min_lr=1e-3, lr_range_test_step_size=2000,
                 lr_range_test_step_rate=1.0, lr_range_test_staircase=False,
                 last_batch_iteration=-1):
        super().__init__(optimizer, last_batch_iteration)
        self.min_lr = _per_group(self.optimizer, lr_range_test_min_lr, "lr_range_test_min_lr")
        if int(lr_range_test_step_size) <= 0:
            raise ValueError(f"lr_range_test_step_size must be a positive integer, got "
                             f"{lr_range_test_step_size}")
        self.step_size, self.step_rate = int(lr_range_test_step_size), float(lr_range_test_step_rate)
        self.staircase = bool(lr_range_test_staircase)
        if self.last_batch_iteration == -1:
            self._apply(self.min_lr)

    def get_lr(self) -> list:
        """``min_lr * (1 + step_rate * interval)``."""
        interval = (self.last_batch_iteration + 1) / self.step_size
        if self.staircase:
            interval = math.floor(interval)
        return [lr * (1 + self.step_rate * interval) for lr in self.min_lr]


class OneCycle(_Schedule):
    """One triangle from ``cycle_min_lr`` up to ``cycle_max_lr`` (``cycle_first_step_size``
    steps) and back (``cycle_second_step_size``), then a decay; Adam-style ``betas[0]`` cycles
    the opposite way between ``cycle_max_mom`` and ``cycle_min_mom``.

    Args:
        optimizer: the optimizer.
        cycle_min_lr: the lowest lr (one value, or one per group).
        cycle_max_lr: the peak lr.
        decay_lr_rate: after the cycle, lr = ``cycle_min_lr / (1 + rate * k / decay_step_size)``.
        cycle_first_step_size: steps of the rising half.
        cycle_second_step_size: steps of the falling half (default: the first's).
        cycle_first_stair_count: hold the lr in this many stairs on the way up (0: smooth).
        cycle_second_stair_count: stairs on the way down (default: the first's).
        decay_step_size: steps per decay interval (0: no decay).
        cycle_momentum: cycle ``betas[0]`` too (only optimizers with ``betas``).
        cycle_min_mom: the lowest momentum.
        cycle_max_mom: the highest momentum.
        decay_mom_rate: after the cycle, momentum grows by this rate per decay interval.
        last_batch_iteration: the step to resume from (-1: start).
    """

    def __init__(self, optimizer, cycle_min_lr, cycle_max_lr, decay_lr_rate=0.0,
                 cycle_first_step_size=2000, cycle_second_step_size=None,
                 cycle_first_stair_count=0, cycle_second_stair_count=None, decay_step_size=0,
                 cycle_momentum=True, cycle_min_mom=0.8, cycle_max_mom=0.9, decay_mom_rate=0.0,
                 last_batch_iteration=-1):
        super().__init__(optimizer, last_batch_iteration)
        first = float(cycle_first_step_size)
        second = first if cycle_second_step_size is None else float(cycle_second_step_size)
        if first <= 0:
            raise ValueError(f"cycle_first_step_size must be positive, got {first}")
        if second < 0:
            raise ValueError(f"cycle_second_step_size must be non-negative, got {second}")
        self.first_step_size, self.second_step_size = first, second
        self.total_size = first + second
        self.step_ratio = first / self.total_size
        self.first_stair_count = int(cycle_first_stair_count)
        self.second_stair_count = self.first_stair_count if cycle_second_stair_count is None \
            else int(cycle_second_stair_count)
        self.decay_step_size = float(decay_step_size)
        self.min_lrs = _per_group(self.optimizer, cycle_min_lr, "cycle_min_lr")
        self.max_lrs = _per_group(self.optimizer, cycle_max_lr, "cycle_max_lr")
        self.decay_lr_rate, self.decay_mom_rate = float(decay_lr_rate), float(decay_mom_rate)
        self.skip_lr_decay = self.decay_step_size == 0 or self.decay_lr_rate == 0
        self.skip_mom_decay = self.decay_step_size == 0 or self.decay_mom_rate == 0
        defaults = getattr(self.optimizer, "defaults", None) or self.optimizer.param_groups[0]
        self.cycle_momentum = bool(cycle_momentum) and "betas" in defaults
        if self.cycle_momentum:   # DeepSpeed cycles Adam's beta1 only (SGD's momentum is left)
            self.min_moms = [(m, 0.99) for m in _per_group(self.optimizer, cycle_min_mom,
                                                           "cycle_min_mom")]
            self.max_moms = [(m, 0.99) for m in _per_group(self.optimizer, cycle_max_mom,
                                                           "cycle_max_mom")]
        if self.last_batch_iteration == -1:
            self._apply(self.min_lrs)
            if self.cycle_momentum:
                for group, mom in zip(self.optimizer.param_groups, self.min_moms, strict=True):
                    group["betas"] = mom

    def _scale(self) -> float:
        it = self.last_batch_iteration + 1
        x = 1.0 + it / self.total_size - math.floor(1 + it / self.total_size)
        rising = x <= self.step_ratio
        scale = x / self.step_ratio if rising else (x - 1) / (self.step_ratio - 1)
        stairs = self.first_stair_count if rising else self.second_stair_count
        if stairs > 0:   # hold flat in stairs, counted from the integer position in the cycle
            pos = it % self.total_size
            where = (pos * stairs / self.first_step_size if pos <= self.first_step_size
                     else (self.total_size - pos) * stairs / self.second_step_size)
            scale = math.floor(where) / stairs
        return scale

    def _decay_intervals(self) -> float:
        return (self.last_batch_iteration - self.total_size + 1) / self.decay_step_size

    def get_lr(self) -> list:
        """The lr of ``last_batch_iteration``: the cycle, then the decay."""
        if self.last_batch_iteration < self.total_size:
            s = self._scale()
            return [lo + (hi - lo) * s for lo, hi in zip(self.min_lrs, self.max_lrs, strict=True)]
        if self.skip_lr_decay:
            return list(self.min_lrs)
        return [lo / (1 + self.decay_lr_rate * self._decay_intervals()) for lo in self.min_lrs]

    def get_mom(self):
        """The ``betas`` of ``last_batch_iteration`` (None without ``cycle_momentum``)."""
        if not self.cycle_momentum:
            return None
        if self.last_batch_iteration < self.total_size:
            s = self._scale()
            return [(hi[0] - (hi[0] - lo[0]) * s, lo[1])
                    for lo, hi in zip(self.min_moms, self.max_moms, strict=True)]
        if self.skip_mom_decay:
            return list(self.max_moms)
        k = self._decay_intervals()
        return [(b0 * (1 + self.decay_mom_rate * k), b1) for b0, b1 in self.max_moms]

    def step(self, batch_iteration=None) -> None:
        """Advance one iteration (or to ``batch_iteration``): set its lr and ``betas``.

        Args:
            batch_iteration: the iteration to jump to (default: the next one).
        """
        super().step(batch_iteration)
        moms = self.get_mom()
        if moms is not None:
            for group, mom in zip(self.optimizer.param_groups, moms, strict=True):
                group["betas"] = mom


class WarmupLR(_Schedule):
    """From ``warmup_min_lr`` to ``warmup_max_lr`` over ``warmup_num_steps`` ("log" or
    "linear" warm-up), then constant.

    Args:
        optimizer: the optimizer.
        warmup_min_lr: the first learning rate (one value, or one per group).
        warmup_max_lr: the learning rate after the warm-up.
        warmup_num_steps: the warm-up length in steps (at least 2).
        warmup_type: "log" (DeepSpeed's default) or "linear".
        last_batch_iteration: the step to resume from (-1: start).

    Example:
        >>> import tensorbrain as tb
        >>> opt = tb.optim.SGD([tb.zeros(1, requires_grad=True)], lr=0.5)
        >>> sched = WarmupLR(opt, 0.0, 1.0, 4, warmup_type="linear")
        >>> lrs = []
        >>> for _ in range(6):
        ...     lrs.append(opt.param_groups[0]["lr"])   # the lr this optimizer step runs at
        ...     sched.step()
        >>> lrs
        [0.0, 0.0, 0.25, 0.5, 0.75, 1.0]
    """

    def __init__(self, optimizer, warmup_min_lr=0.0, warmup_max_lr=0.001, warmup_num_steps=1000,
                 warmup_type="log", last_batch_iteration=-1):
        super().__init__(optimizer, last_batch_iteration)
        self.min_lrs = _per_group(self.optimizer, warmup_min_lr, "warmup_min_lr")
        self.max_lrs = _per_group(self.optimizer, warmup_max_lr, "warmup_max_lr")
        self.delta_lrs = [hi - lo for hi, lo in zip(self.max_lrs, self.min_lrs, strict=True)]
        self.warmup_num_steps = max(2, int(warmup_num_steps))
        self.warmup_type = _check_warmup_type(warmup_type)
        self.inverse_log_warm_up = 1.0 / math.log(self.warmup_num_steps)
        if self.last_batch_iteration == -1:
            self._apply(self.get_lr())

    def _warmup(self) -> float:
        it = self.last_batch_iteration
        if self.warmup_type == "log":
            return self.inverse_log_warm_up * math.log(it + 1)
        return it / self.warmup_num_steps

    def _gamma(self) -> float:
        return self._warmup() if self.last_batch_iteration < self.warmup_num_steps else 1.0

    def get_lr(self) -> list:
        """``min + (max - min) * gamma`` (``min`` before the first step)."""
        if self.last_batch_iteration < 0:
            return list(self.min_lrs)
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

    Raises:
        ValueError: ``total_num_steps`` below ``warmup_num_steps`` (DeepSpeed only warns).
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
        if self.last_batch_iteration < self.warmup_num_steps:
            return self._warmup()
        return max(0.0, (self.total_num_steps - self.last_batch_iteration)
                   / max(1.0, self.total_num_steps - self.warmup_num_steps))


class WarmupCosineLR(_Schedule):
    """A warm-up to the optimizer's lr (ratio ``warmup_min_ratio`` -> 1), then a cosine decay
    to ``cos_min_ratio`` times it at ``total_num_steps``. Before the first step the lr is 0.

    Args:
        optimizer: the optimizer (its lr at construction is the peak).
        total_num_steps: the end of the cosine.
        warmup_min_ratio: the first lr as a fraction of the peak.
        warmup_num_steps: the warm-up length (a positive int).
        cos_min_ratio: the last lr as a fraction of the peak.
        warmup_type: "log" or "linear".
        last_batch_iteration: the step to resume from (-1: start).
    """

    def __init__(self, optimizer, total_num_steps, warmup_min_ratio=0.0, warmup_num_steps=1000,
                 cos_min_ratio=0.0001, warmup_type="log", last_batch_iteration=-1):
        if not isinstance(warmup_num_steps, int) or warmup_num_steps <= 0:
            raise ValueError(f"warmup_num_steps must be a positive integer, got "
                             f"{warmup_num_steps!r}")
        super().__init__(optimizer, last_batch_iteration)
        self.total_num_steps = int(total_num_steps)
        self.warmup_min_ratio, self.cos_min_ratio = float(warmup_min_ratio), float(cos_min_ratio)
        self.warmup_num_steps = max(2, warmup_num_steps)
        self.warmup_type = _check_warmup_type(warmup_type)
        self.inverse_log_warm_up = 1.0 / math.log(self.warmup_num_steps)
        self.org_lrs = [float(g["lr"]) for g in self.optimizer.param_groups]
        if self.last_batch_iteration == -1:
            self._apply(self.get_lr())

    def get_lr_ratio(self) -> float:
        """The fraction of the peak lr at ``last_batch_iteration``."""
        it = self.last_batch_iteration
        if it < 0:
            return 0.0
        if it < self.warmup_num_steps:
            gamma = (self.inverse_log_warm_up * math.log(it + 1) if self.warmup_type == "log"
                     else it / self.warmup_num_steps)
            return self.warmup_min_ratio + (1.0 - self.warmup_min_ratio) * gamma
        progress = min(1.0, (it - self.warmup_num_steps + 1)
                       / max(1, self.total_num_steps - self.warmup_num_steps))
        cos = (1.0 + math.cos(math.pi * progress)) / 2
        return max(0.0, self.cos_min_ratio + (1.0 - self.cos_min_ratio) * cos)

    def get_lr(self) -> list:
        """``peak * get_lr_ratio()`` per group."""
        ratio = self.get_lr_ratio()
        return [lr * ratio for lr in self.org_lrs]


SCHEDULES = {"LRRangeTest": LRRangeTest, "OneCycle": OneCycle, "WarmupLR": WarmupLR,
             "WarmupDecayLR": WarmupDecayLR, "WarmupCosineLR": WarmupCosineLR}

__all__ = ["LRRangeTest", "OneCycle", "WarmupCosineLR", "WarmupDecayLR", "WarmupLR"]
