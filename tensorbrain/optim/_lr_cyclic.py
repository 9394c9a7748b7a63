"""The cyclic schedules, which go up and down instead of only down: ``OneCycleLR`` (with
momentum cycling), ``CyclicLR`` and ``CosineAnnealingWarmRestarts``
(``tensorbrain.optim.lr_scheduler`` re-exports them).
"""
from __future__ import annotations

import math

from ._lr_base import LRScheduler


def _set_momentum(group, m, use_beta1: bool) -> None:
    """Write momentum ``m`` where the optimizer keeps it: Adam's beta1, else SGD's momentum."""
    if use_beta1:
        group["betas"] = (m, *group["betas"][1:])
    else:
        group["momentum"] = m


def _start_momentum(groups, maxs, bases, use_beta1: bool) -> None:
    """A cyclic schedule's first step: each group starts at its max momentum, both bounds kept."""
    for mm, bm, group in zip(maxs, bases, groups):
        _set_momentum(group, mm, use_beta1)
        group["max_momentum"], group["base_momentum"] = mm, bm


class OneCycleLR(LRScheduler):
    """The 1cycle policy (Smith & Topin), with momentum cycling, as ``torch.optim.lr_scheduler``."""

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        if total_steps is None:
            if epochs is None or steps_per_epoch is None:
                raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")
            total_steps = epochs * steps_per_epoch
        if total_steps <= 0:
            raise ValueError(f"OneCycleLR: total_steps must be positive, got {total_steps}")
        if not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: pct_start must be in [0, 1], got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        self.total_steps = total_steps
        self.anneal_strategy = anneal_strategy
        if three_phase:
            self._schedule_phases = [
                dict(end_step=float(pct_start * total_steps) - 1, start_lr="initial_lr",
                     end_lr="max_lr", start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * total_steps) - 2, start_lr="max_lr",
                     end_lr="initial_lr", start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=total_steps - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=float(pct_start * total_steps) - 1, start_lr="initial_lr",
                     end_lr="max_lr", start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=total_steps - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        groups = optimizer.param_groups
        max_lrs = list(max_lr) if isinstance(max_lr, (list, tuple)) else [max_lr] * len(groups)
        if last_epoch == -1:
            for lr, group in zip(max_lrs, groups, strict=False):
                group["initial_lr"] = lr / div_factor
                group["max_lr"] = lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = "betas" in optimizer.defaults
            if not self.use_beta1 and "momentum" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with cycle_momentum")
            bms = base_momentum if isinstance(base_momentum, (list, tuple)) else [base_momentum] * len(groups)
            mms = max_momentum if isinstance(max_momentum, (list, tuple)) else [max_momentum] * len(groups)
            if last_epoch == -1:
                _start_momentum(groups, mms, bms, self.use_beta1)
        super().__init__(optimizer, last_epoch)

    def _anneal(self, start, end, pct):
        if self.anneal_strategy == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self):
        """The learning rates for the current epoch (OneCycleLR's rule).

        Returns:
            One learning rate per parameter group.
        """
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(f"Tried to step {step} times. The specified number of total steps "
                             f"is {self.total_steps}")
        lrs = []
        for group in self.optimizer.param_groups:
            start = 0.0
            for i, phase in enumerate(self._schedule_phases):
                end = phase["end_step"]
                if step <= end or i == len(self._schedule_phases) - 1:
                    pct = (step - start) / (end - start)
                    lr = self._anneal(group[phase["start_lr"]], group[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = self._anneal(group[phase["start_momentum"]], group[phase["end_momentum"]], pct)
                    break
                start = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(group, mom, self.use_beta1)
        return lrs


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR (Loshchilov & Hutter): cosine from base_lr to ``eta_min`` over ``T_i`` epochs, then a
    restart with ``T_i *= T_mult``. ``step(epoch)`` takes fractional epochs, as in PyTorch.

    Args:
        optimizer: the optimizer; T_0: the first period (a positive int); T_mult: the
        period's growth factor (an int >= 1); eta_min: the lowest lr; last_epoch: -1 to start.

    Raises:
        ValueError: a bad T_0 or T_mult, a negative epoch given to ``step``.
    """

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"Expected positive integer T_0, but got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"Expected integer T_mult >= 1, but got {T_mult}")
        self.T_0, self.T_i, self.T_mult, self.eta_min = T_0, T_0, T_mult, eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        """The learning rates for the current epoch (CosineAnnealingWarmRestarts's rule).

        Returns:
            One learning rate per parameter group.
        """
        return [self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for b in self.base_lrs]

    def step(self, epoch=None):
        """Advance one epoch, or jump to ``epoch`` (may be fractional) and set the lrs."""
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur = self.T_cur + 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur - self.T_i
                self.T_i = self.T_i * self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"Expected non-negative epoch, but got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr(), strict=True):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class CyclicLR(LRScheduler):
    """The cyclical learning rate policy (Smith, 2017), stepped after every batch: the rate goes
    from ``base_lr`` up to ``max_lr`` over ``step_size_up`` steps and back down over
    ``step_size_down``, the amplitude scaled per ``mode``; momentum (or Adam's beta1) cycles the
    other way. As ``torch.optim.lr_scheduler.CyclicLR``.

    Args:
        optimizer: the optimizer.
        base_lr: the lower rate (one per group, or one for all).
        max_lr: the upper rate (one per group, or one for all).
        step_size_up: steps of the rising half.
        step_size_down: steps of the falling half (default: ``step_size_up``).
        mode: ``"triangular"``, ``"triangular2"`` (amplitude halved every cycle) or
            ``"exp_range"`` (amplitude times ``gamma ** step``).
        gamma: the base of ``exp_range``.
        scale_fn: a custom amplitude scale (overrides ``mode``).
        scale_mode: ``"cycle"`` or ``"iterations"``, what ``scale_fn`` is given.
        cycle_momentum: cycle momentum inversely to the rate.
        base_momentum: the lower momentum.
        max_momentum: the upper momentum.
        last_epoch: the index of the last batch (-1: start).

    Raises:
        ValueError: an unknown ``mode`` without ``scale_fn``, or ``cycle_momentum`` with an
            optimizer that has neither momentum nor betas.
        TypeError: ``optimizer`` is not an optimizer.
    """

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        from .optimizer import Optimizer
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        groups = optimizer.param_groups

        def per_group(name, value):
            if isinstance(value, (list, tuple)):
                if len(value) != len(groups):
                    raise ValueError(f"expected {len(groups)} values for {name}, got "
                                     f"{len(value)}")
                return list(value)
            return [value] * len(groups)

        base_lrs = per_group("base_lr", base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, groups):
                group["lr"] = lr
        self.max_lrs = per_group("max_lr", max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("mode is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError("optimizer must support momentum or beta1 with "
                                 "`cycle_momentum` option enabled")
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = per_group("base_momentum", base_momentum)
            self.max_momentums = per_group("max_momentum", max_momentum)
            if last_epoch == -1:
                _start_momentum(groups, self.max_momentums, self.base_momentums, self.use_beta1)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        if self._scale_fn_custom is not None:
            return
        if self.mode == "triangular":
            self.scale_mode = "cycle"
        elif self.mode == "triangular2":
            self.scale_mode = "cycle"
        elif self.mode == "exp_range":
            self.scale_mode = "iterations"

    def scale_fn(self, x) -> float:
        """The amplitude scale at ``x`` (the cycle number or the step, per ``scale_mode``)."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        """The learning rates for the current batch (and, with ``cycle_momentum``, sets the
        groups' momentum).

        Returns:
            One learning rate per parameter group.
        """
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        if x <= self.step_ratio:
            scale_factor = x / self.step_ratio
        else:
            scale_factor = (x - 1) / (self.step_ratio - 1)
        at = cycle if self.scale_mode == "cycle" else self.last_epoch
        lrs = [base + (top - base) * scale_factor * self.scale_fn(at)
               for base, top in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for bm, mm, group in zip(self.base_momentums, self.max_momentums,
                                     self.optimizer.param_groups):
                m = mm - (mm - bm) * scale_factor * self.scale_fn(at)
                _set_momentum(group, m, self.use_beta1)
        return lrs

    def state_dict(self) -> dict:
        """The scheduler's state; a custom ``scale_fn`` is kept only as its ``__dict__`` when it
        is a callable object (as torch's)."""
        import types
        state = super().state_dict()
        fn = self._scale_fn_custom
        state["_scale_fn_custom"] = None
        if fn is not None and not isinstance(fn, types.FunctionType):
            state["_scale_fn_custom"] = fn.__dict__.copy()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state from :meth:`state_dict`."""
        state_dict = dict(state_dict)
        fn = state_dict.pop("_scale_fn_custom", None)
        custom = self._scale_fn_custom
        super().load_state_dict(state_dict)
        self._scale_fn_custom = custom
        if fn is not None and custom is not None:
            custom.__dict__.update(fn)
        self._init_scale_fn()
