"""Learning-rate schedulers with PyTorch's (chainable, recursive) formulas and state dicts.

This is their public home (``torch.optim.lr_scheduler``); the code is split by kind: the base
class (``_lr_base.py``), the schedules given by a formula of the step (``_lr_schedules.py``),
the cyclic ones (``_lr_cyclic.py``), schedulers made of schedulers (``_lr_composite.py``) and the metric-driven
``ReduceLROnPlateau`` (``_lr_plateau.py``).
"""
from __future__ import annotations

from ._lr_base import LRScheduler
from ._lr_composite import ChainedScheduler, SequentialLR
from ._lr_plateau import ReduceLROnPlateau
from ._lr_cyclic import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR
from ._lr_schedules import (ConstantLR, CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR,
                            MultiplicativeLR, MultiStepLR, PolynomialLR, StepLR)

__all__ = ["LRScheduler", "StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "LambdaLR", "LinearLR", "SequentialLR", "OneCycleLR", "MultiplicativeLR", "ConstantLR", "PolynomialLR", "CosineAnnealingWarmRestarts", "ChainedScheduler", "ReduceLROnPlateau", "CyclicLR"]
