"""DeepSpeed's fp16 loss scaling: static, or dynamic with a window and hysteresis."""
from __future__ import annotations


class DynamicLossScaler:
    """Scale the loss so float16 gradients do not underflow; on overflow skip the step.

    An overflow halves the scale (not below ``min_scale``) once ``hysteresis`` overflows have
    been absorbed; ``scale_window`` steps without overflow double it. ``loss_scale > 0`` in the
    config means a static scale (``dynamic=False``).

    Args:
        init_scale: the starting scale (``2 ** initial_scale_power``).
        scale_window: clean steps before the scale doubles.
        min_scale: the smallest scale.
        delayed_shift: the hysteresis: overflows tolerated before the scale is halved.
        consecutive_hysteresis: refill the hysteresis after every clean step.
        dynamic: False for a static scale.
    """

    def __init__(self, init_scale=2.0 ** 16, scale_window=1000, min_scale=1.0, delayed_shift=2,
                 consecutive_hysteresis=False, dynamic=True):
        self.cur_scale = float(init_scale)
        self.scale_window = int(scale_window)
        self.min_scale = float(min_scale)
        self.delayed_shift = self.cur_hysteresis = int(delayed_shift)
        self.consecutive_hysteresis = bool(consecutive_hysteresis)
        self.dynamic = bool(dynamic)
        self.cur_iter = 0
        self.last_overflow_iter = -1

    @property
    def loss_scale(self) -> float:
        """The current scale."""
        return self.cur_scale

    def update_scale(self, overflow: bool) -> None:
        """Record one optimizer step.

        Args:
            overflow: a gradient was inf/NaN (the step was skipped).
        """
        if self.dynamic:
            if overflow:
                if self.delayed_shift == 1 or self.cur_hysteresis == 1:
                    self.cur_scale = max(self.cur_scale / 2.0, self.min_scale)
                else:
                    self.cur_hysteresis -= 1
                self.last_overflow_iter = self.cur_iter
            else:
                if self.consecutive_hysteresis:
                    self.cur_hysteresis = self.delayed_shift
                if (self.cur_iter - self.last_overflow_iter) % self.scale_window == 0:
                    if not self.consecutive_hysteresis:
                        self.cur_hysteresis = self.delayed_shift
                    self.cur_scale *= 2.0
        self.cur_iter += 1

    def state_dict(self) -> dict:
        """The scaler's state."""
        return dict(self.__dict__)

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict`.

        Args:
            state: what :meth:`state_dict` returned.
        """
        self.__dict__.update(state)


def from_config(fp16: dict) -> DynamicLossScaler:
    """The scaler an ``"fp16"`` config section asks for (DeepSpeed's defaults).

    Args:
        fp16: the section (``loss_scale``, ``initial_scale_power``, ``loss_scale_window``,
            ``hysteresis``, ``min_loss_scale``, ``consecutive_hysteresis``).

    Returns:
        A :class:`DynamicLossScaler`.
    """
    static = float(fp16.get("loss_scale", 0) or 0)
    if static > 0:
        return DynamicLossScaler(init_scale=static, dynamic=False)
    return DynamicLossScaler(init_scale=2.0 ** int(fp16.get("initial_scale_power", 16)),
                             scale_window=int(fp16.get("loss_scale_window", 1000)),
                             min_scale=float(fp16.get("min_loss_scale", 1)),
                             delayed_shift=int(fp16.get("hysteresis", 2)),
                             consecutive_hysteresis=bool(fp16.get("consecutive_hysteresis", False)))
