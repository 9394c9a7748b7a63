"""``tb.optim.swa_utils`` (``torch.optim.swa_utils``): stochastic weight averaging and EMA.

:class:`AveragedModel` keeps a deep copy of a model whose parameters (and, with
``use_buffers``, buffers) are the running average of the model's (equal weights by default;
``get_ema_multi_avg_fn(decay)`` for an exponential moving average); :class:`SWALR` anneals
each group's learning rate to ``swa_lr``; :func:`update_bn` recomputes BatchNorm statistics
with one pass over the data. As torch's.

>>> import tensorbrain as tb
>>> model = tb.nn.Linear(2, 1)
>>> swa = tb.optim.swa_utils.AveragedModel(model)
>>> swa.update_parameters(model)
>>> int(swa.n_averaged)
1
"""
from __future__ import annotations

import copy
import math

from .. import _factories
from ..autograd import grad_mode
from ..nn.modules.module import Module
from ._lr_base import LRScheduler


def get_ema_multi_avg_fn(decay: float = 0.999):
    """An averaging function for an exponential moving average (``ema = decay * ema + (1 -
    decay) * p``).

    Args:
        decay: the weight of the old average.
    """
    def ema_update(averaged, current, num_averaged):
        with grad_mode.no_grad():
            for a, c in zip(averaged, current):
                a.lerp_(c, 1 - decay)
    return ema_update


def get_swa_multi_avg_fn():
    """The equal-weights averaging function (the default)."""
    def swa_update(averaged, current, num_averaged):
        n = float(num_averaged)
        with grad_mode.no_grad():
            for a, c in zip(averaged, current):
                a.add_((c - a) / (n + 1))
    return swa_update


def get_ema_avg_fn(decay: float = 0.999):
    """The per-parameter form of :func:`get_ema_multi_avg_fn`.

    Args:
        decay: the weight of the old average.
    """
    def ema(averaged, current, num_averaged):
        return decay * averaged + (1 - decay) * current
    return ema


def get_swa_avg_fn():
    """The per-parameter form of :func:`get_swa_multi_avg_fn`."""
    def swa(averaged, current, num_averaged):
        return averaged + (current - averaged) / (num_averaged + 1)
    return swa


class AveragedModel(Module):
    """A running average of a model's parameters.

    Args:
        model: the model to average.
        device: move the copy there.
        avg_fn: ``(averaged, current, num_averaged) -> new`` per parameter, or None.
        multi_avg_fn: the same for lists of parameters (in place), or None.
        use_buffers: average the buffers too (else they are copied).
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None,
                 use_buffers: bool = False):
        super().__init__()
        self.module = copy.deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", _factories.tensor(0, dtype="int64"))
        self.avg_fn, self.multi_avg_fn, self.use_buffers = avg_fn, multi_avg_fn, use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def _tensors(self, model):
        params = list(model.parameters())
        return params + list(model.buffers()) if self.use_buffers else params

    def update_parameters(self, model) -> None:
        """Average ``model``'s current parameters in.

        Args:
            model: the trained model (same structure).
        """
        mine, theirs = self._tensors(self.module), self._tensors(model)
        n = int(self.n_averaged.item())
        with grad_mode.no_grad():
            if n == 0:
                for a, c in zip(mine, theirs):
                    a.copy_(c.detach())
            elif self.multi_avg_fn is not None:
                self.multi_avg_fn(mine, [c.detach() for c in theirs], n)
            elif self.avg_fn is not None:
                for a, c in zip(mine, theirs):
                    a.copy_(self.avg_fn(a.detach(), c.detach(), n))
            else:
                get_swa_multi_avg_fn()(mine, [c.detach() for c in theirs], n)
            if not self.use_buffers:
                for a, c in zip(self.module.buffers(), model.buffers()):
                    a.copy_(c.detach())
        self.n_averaged._data += 1


class SWALR(LRScheduler):
    """Anneal each group's learning rate to ``swa_lr`` over ``anneal_epochs`` steps, then
    hold it.

    Args:
        optimizer: the optimizer.
        swa_lr: the target learning rate (one, or one per group).
        anneal_epochs: the annealing steps.
        anneal_strategy: ``"cos"`` or ``"linear"``.
        last_epoch: the index of the last step.

    Raises:
        ValueError: an unknown strategy or a negative ``anneal_epochs``.
    """

    def __init__(self, optimizer, swa_lr, anneal_epochs: int = 10, anneal_strategy: str = "cos",
                 last_epoch: int = -1):
        lrs = swa_lr if isinstance(swa_lr, (list, tuple)) else [swa_lr] * len(
            optimizer.param_groups)
        for group, lr in zip(optimizer.param_groups, lrs):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must by one of 'cos' or 'linear', instead got "
                             f"{anneal_strategy}")
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got "
                             f"{anneal_epochs}")
        self.anneal_epochs, self.anneal_strategy = anneal_epochs, anneal_strategy
        super().__init__(optimizer, last_epoch)

    def _factor(self, t):
        if self.anneal_strategy == "cos":
            return (1 - math.cos(math.pi * t)) / 2
        return t

    def get_lr(self):
        """The learning rates for this step: each group's rate annealed from where it was
        towards ``swa_lr`` over ``anneal_epochs`` steps (linearly or by cosine), as torch's.

        Returns:
            list[float]: one learning rate per parameter group.
        """
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self._factor(prev_t)
        prev_lrs = [(g["lr"] - prev_alpha * g["swa_lr"]) / (1 - prev_alpha) if prev_alpha < 1
                    else g["swa_lr"] for g in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self._factor(t)
        return [g["swa_lr"] * alpha + lr * (1 - alpha)
                for g, lr in zip(self.optimizer.param_groups, prev_lrs)]


def update_bn(loader, model, device=None) -> None:
    """Recompute every BatchNorm's running statistics with one pass over ``loader``
    (cumulative averages), as ``torch.optim.swa_utils.update_bn``.

    Args:
        loader: batches (a tensor, or a list/tuple whose first item is the input).
        model: the model.
        device: move each input there.
    """
    from ..nn.modules.batchnorm import _BatchNorm
    norms = [m for m in model.modules() if isinstance(m, _BatchNorm)]
    if not norms:
        return
    momenta = {}
    for m in norms:
        m.reset_running_stats()
        momenta[m] = m.momentum
        m.momentum = None
    was_training = model.training
    model.train()
    with grad_mode.no_grad():
        for batch in loader:
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            if device is not None:
                x = x.to(device)
            model(x)
    for m in norms:
        m.momentum = momenta[m]
    model.train(was_training)
