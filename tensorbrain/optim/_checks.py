"""Argument checks shared by the optimizers (PyTorch's messages)."""
from __future__ import annotations


def check_hparams(lr=0.0, eps=0.0, weight_decay=0.0, betas=None):
    if lr < 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if eps < 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if weight_decay < 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")
    if betas is not None:
        for i, b in enumerate(betas):
            if not 0.0 <= b < 1.0:
                raise ValueError(f"Invalid beta parameter at index {i}: {b}")


def check_flags(name, capturable=False, differentiable=False, fused=None):
    """``foreach`` is accepted and ignored everywhere (every update is already one vectorised
    array op per parameter); capturable/differentiable/fused have no meaning here."""
    if capturable:
        raise ValueError(f"{name}: capturable=True (CUDA graphs) is not supported")
    if differentiable:
        raise ValueError(f"{name}: differentiable=True is not supported")
    if fused:
        raise ValueError(f"{name}: fused=True is not supported")
