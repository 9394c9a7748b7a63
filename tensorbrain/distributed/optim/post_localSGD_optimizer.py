"""``PostLocalSGDOptimizer`` (torch's ``torch.distributed.optim``): local steps, with the
parameters averaged by a model averager after each (``PeriodicModelAverager``: every
``period`` steps after ``warmup_steps``)."""
from __future__ import annotations

import warnings


class PostLocalSGDOptimizer:
    """Wrap ``optim``; ``step()`` is the optimizer's step followed by
    ``averager.average_parameters`` (torch's semantics and state dict: the averager's step is
    saved under ``"step"``).

    Args:
        optim: the local optimizer.
        averager: a model averager (``PeriodicModelAverager``).

    Example::

        ddp.register_comm_hook(PostLocalSGDState(None, None, start_localSGD_iter=100),
                               post_localSGD_hook)
        opt = PostLocalSGDOptimizer(tb.optim.SGD(ddp.parameters(), lr=0.01),
                                    PeriodicModelAverager(period=4, warmup_steps=100))
    """

    def __init__(self, optim, averager):
        self.optim = optim
        self.param_groups = optim.param_groups
        self.averager = averager

    @property
    def state(self):
        """The local optimizer's state."""
        return self.optim.state

    def __repr__(self) -> str:
        return f"PostLocalSGDOptimizer({self.optim!r})"

    def state_dict(self) -> dict:
        """The local optimizer's state dict with the averager's step under ``"step"``."""
        sd = self.optim.state_dict()
        sd["step"] = self.averager.step
        return sd

    def load_state_dict(self, state_dict: dict) -> None:
        """Load the local optimizer's state and the averager's step.

        Args:
            state_dict: as ``state_dict()`` returned it.
        """
        state_dict = dict(state_dict)
        step = state_dict.pop("step", None)
        self.optim.load_state_dict(state_dict)
        if step is None:
            warnings.warn("Loaded state dict does not contain a step counter for an averager. "
                          "Setting step counter to 0.", stacklevel=2)
            step = 0
        self.averager.step = int(step)

    def step(self) -> None:
        """The local step, then the averager (which counts it)."""
        self.optim.step()
        self.averager.average_parameters(params=self.param_groups)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients.

        Args:
            set_to_none: as the optimizer's.
        """
        self.optim.zero_grad(set_to_none=set_to_none)

    def add_param_group(self, param_group) -> None:
        """Add a parameter group to the local optimizer.

        Args:
            param_group: the group (a dict with ``"params"``).
        """
        self.optim.add_param_group(param_group)
