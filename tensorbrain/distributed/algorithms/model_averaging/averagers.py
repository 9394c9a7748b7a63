"""Model averagers (torch's ``model_averaging.averagers``): ``PeriodicModelAverager``."""
from __future__ import annotations

from . import utils


class ModelAverager:
    """Base of the averagers: ``average_parameters(params)`` once per optimizer step; ``step``
    counts the calls.

    Args:
        process_group: the group to average over (None: the default group).
    """

    def __init__(self, process_group=None):
        self.process_group = process_group
        self.step = 0

    def average_parameters(self, params) -> None:
        """Average (or not, by the averager's rule) and count the step.

        Args:
            params: parameters or an optimizer's ``param_groups``.
        """
        raise NotImplementedError


class PeriodicModelAverager(ModelAverager):
    """Average every ``period`` steps once ``warmup_steps`` have passed (torch's semantics:
    during the warm-up DDP keeps the replicas equal, e.g. with ``post_localSGD_hook``).

    Args:
        period: steps between two averages (1 averages every step).
        warmup_steps: steps before the first average.
        process_group: the group (None: the default group).

    Raises:
        ValueError: ``period`` < 1 or ``warmup_steps`` < 0.

    Example::

        averager = PeriodicModelAverager(period=4, warmup_steps=100)
        opt = PostLocalSGDOptimizer(tb.optim.SGD(model.parameters(), lr=0.01), averager)
    """

    def __init__(self, period: int, warmup_steps: int = 0, process_group=None):
        super().__init__(process_group)
        if warmup_steps < 0:
            raise ValueError("Arg ``warmup_steps`` must be a non-negative number.")
        if period < 1:
            raise ValueError("Arg ``period`` must be a positive value.")
        self.warmup_steps, self.period = int(warmup_steps), int(period)

    def average_parameters(self, params) -> None:
        """Average when ``step >= warmup_steps`` and ``(step - warmup_steps) % period == 0``.

        Args:
            params: parameters or an optimizer's ``param_groups``.
        """
        if self.step >= self.warmup_steps and (self.step - self.warmup_steps) % self.period == 0:
            utils.average_parameters_or_parameter_groups(params, self.process_group)
        self.step += 1
