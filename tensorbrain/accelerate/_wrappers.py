"""The optimizer and scheduler wrappers :meth:`Accelerator.prepare` returns."""
from __future__ import annotations


class AcceleratedOptimizer:
    """Wraps an optimizer: ``step``/``zero_grad`` act only when gradients were synchronised
    (the end of an accumulation cycle), and ``step`` goes through the GradScaler with fp16.

    Every other attribute (``param_groups``, ``state_dict``, ...) is the wrapped optimizer's.
    """

    def __init__(self, optimizer, state, scaler=None):
        self.optimizer = optimizer
        self._state = state
        self.scaler = scaler
        self._is_overflow = False

    def __getattr__(self, name):
        return getattr(self.__dict__["optimizer"], name)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    @property
    def state(self):
        return self.optimizer.state

    def state_dict(self):
        """The wrapped optimizer's state dict."""
        return self.optimizer.state_dict()

    def load_state_dict(self, state_dict) -> None:
        """Load into the wrapped optimizer."""
        self.optimizer.load_state_dict(state_dict)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients, unless gradients are still being accumulated."""
        if self._state.sync_gradients:
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None):
        """Apply the update at an accumulation boundary (skipped on fp16 overflow)."""
        if not self._state.sync_gradients:
            return None
        if self.scaler is None:
            self._is_overflow = False
            return self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        scale = self.scaler.get_scale()
        result = self.scaler.step(self.optimizer)
        self.scaler.update()
        self._is_overflow = self.scaler.get_scale() < scale
        return result

    @property
    def step_was_skipped(self) -> bool:
        """Whether the last ``step`` was skipped because a gradient overflowed."""
        return self._is_overflow


class AcceleratedScheduler:
    """Wraps an LR scheduler: steps only after a real optimizer step, and (as Accelerate, with
    ``split_batches=False``) ``num_processes`` times per step, because each step of ``n``
    processes consumes ``n`` batches of the original schedule."""

    def __init__(self, scheduler, optimizers, state, num_processes: int,
                 split_batches: bool = False, step_with_optimizer: bool = True):
        self.scheduler = scheduler
        self.optimizers = optimizers
        self._state = state
        self.num_processes = num_processes
        self.split_batches = split_batches
        self.step_with_optimizer = step_with_optimizer

    def __getattr__(self, name):
        return getattr(self.__dict__["scheduler"], name)

    def step(self, *args, **kwargs) -> None:
        """Advance the schedule (see the class docstring for how many times)."""
        if not self.step_with_optimizer:
            self.scheduler.step(*args, **kwargs)
            return
        if not self._state.sync_gradients:
            return
        if any(getattr(o, "step_was_skipped", False) for o in self.optimizers):
            return
        times = 1 if self.split_batches else self.num_processes
        for _ in range(times):
            total = getattr(self.scheduler, "total_steps", None)
            if total is not None and getattr(self.scheduler, "_step_count", 0) > total:
                break   # OneCycleLR would raise past its end (Accelerate stops there too)
            self.scheduler.step(*args, **kwargs)

    def get_last_lr(self):
        """The wrapped scheduler's last learning rates."""
        return self.scheduler.get_last_lr()

    def state_dict(self):
        """The wrapped scheduler's state dict."""
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict) -> None:
        """Load into the wrapped scheduler."""
        self.scheduler.load_state_dict(state_dict)
