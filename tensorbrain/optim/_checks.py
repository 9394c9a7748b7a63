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


def check_flags(name, capturable=False, differentiable=False, fused=None, foreach=None):
    """``foreach`` and ``fused`` are accepted where torch accepts them (Adam, AdamW, SGD and
    Adagrad take ``fused=True`` on the CPU too) and change nothing: every update here is
    already one vectorised array op per parameter, which is what both ask for. Their
    combinations torch refuses are refused with torch's errors; capturable and differentiable
    have no meaning here."""
    if fused and foreach:
        raise RuntimeError("`fused` and `foreach` cannot be `True` together.")
    if fused and differentiable:
        raise RuntimeError("`fused` does not support `differentiable`")
    if capturable:
        raise ValueError(f"{name}: capturable=True (CUDA graphs) is not supported")
    if differentiable:
        raise ValueError(f"{name}: differentiable=True is not supported")
