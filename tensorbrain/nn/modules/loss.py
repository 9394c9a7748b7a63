"""Loss modules: they hold the options and call ``tb.nn.functional``.

``reduction`` is ``'mean'`` (default), ``'sum'`` or ``'none'``, as in PyTorch.
"""
from __future__ import annotations

from .. import functional as F
from .module import Module

_REDUCTIONS = ("none", "mean", "sum")


class _Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        if reduction not in _REDUCTIONS:
            raise ValueError(f"{type(self).__name__}: reduction must be one of {_REDUCTIONS}, "
                             f"got {reduction!r}")
        self.reduction = reduction


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, reduction: str = "mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)


class CrossEntropyLoss(_WeightedLoss):
    """Cross entropy between logits ``(N, C, ...)`` and class indices ``(N, ...)`` or class
    probabilities ``(N, C, ...)``; ``ignore_index`` and ``label_smoothing`` as in PyTorch.

    >>> import tensorbrain as tb
    >>> loss = tb.nn.CrossEntropyLoss()(tb.zeros(2, 4), tb.tensor([0, 3]))
    >>> round(loss.item(), 4)  # log(4)
    1.3863
    """

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    """Negative log likelihood of log-probabilities ``(N, C, ...)`` at class indices."""

    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(weight, reduction)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(_Loss):
    """Mean squared error."""

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    """Mean absolute error."""

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy on logits (numerically stable), with ``weight`` and ``pos_weight``."""

    def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class BCELoss(_WeightedLoss):
    """Binary cross entropy on probabilities in [0, 1]; logs clamped at -100 as in PyTorch.

    >>> import tensorbrain as tb
    >>> round(tb.nn.BCELoss()(tb.tensor([0.5]), tb.tensor([1.0])).item(), 4)
    0.6931
    """

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class KLDivLoss(_Loss):
    """KL divergence; ``input`` holds log-probabilities, ``target`` probabilities (or
    log-probabilities with ``log_target=True``). ``reduction`` also takes ``'batchmean'``."""

    def __init__(self, reduction: str = "mean", log_target: bool = False):
        Module.__init__(self)
        if reduction not in _REDUCTIONS + ("batchmean",):
            raise ValueError(f"KLDivLoss: reduction must be one of {_REDUCTIONS + ('batchmean',)}, "
                             f"got {reduction!r}")
        self.reduction, self.log_target = reduction, log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SmoothL1Loss(_Loss):
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``beta=0``: L1)."""

    def __init__(self, reduction: str = "mean", beta: float = 1.0):
        super().__init__(reduction)
        if beta < 0:
            raise ValueError(f"SmoothL1Loss: beta must be non-negative, got {beta}")
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""

    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction)
        if delta <= 0:
            raise ValueError(f"HuberLoss: delta must be positive, got {delta}")
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class CosineEmbeddingLoss(_Loss):
    """``1 - cos(x1, x2)`` for target 1, ``max(0, cos(x1, x2) - margin)`` for target -1."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, margin=self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_Loss):
    """``max(0, -y (x1 - x2) + margin)`` with ``y`` in {1, -1}."""

    def __init__(self, margin: float = 0.0, reduction: str = "mean"):
        super().__init__(reduction)
        self.margin = margin

    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, margin=self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_Loss):
    """``max(0, d(a, p) - d(a, n) + margin)`` with the p-norm pairwise distance; ``swap`` as
    in PyTorch."""

    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                 reduction: str = "mean"):
        super().__init__(reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: margin must be greater than 0, got {margin}")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
                                     eps=self.eps, swap=self.swap, reduction=self.reduction)


class CTCLoss(_Loss):
    """Not supported yet: constructing it raises ``NotImplementedError`` (torch's name is kept
    so that the error is clear rather than an AttributeError)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        raise NotImplementedError("CTCLoss is not supported by TensorBrain yet (no CTC forward/"
                                  "backward is implemented); compute it with another library")
