"""Margin and embedding losses, written from primitive ops (their gradients come from autograd).

``margin_ranking_loss``, ``cosine_embedding_loss``, ``triplet_margin_loss`` and
``pairwise_distance`` with PyTorch's formulas (``aten/src/ATen/native/Loss.cpp``,
``Distance.cpp``), including its epsilons: ``1e-12`` added to each squared norm in the cosine,
``eps`` added to the difference in the pairwise distance.
"""
from __future__ import annotations

from .._factories import tensor
from .._tensor_base import TensorBase as Tensor
from . import elementwise as _E
from . import reduce as _R
from ..amp.autocast_mode import autocast_op  # PyTorch's autocast lists: tensorbrain/amp/_lists.py
from .loss import _check_reduction, _legacy_reduction, _same_device


def _reduce(loss, reduction):
    if reduction == "mean":
        return _R.mean(loss)
    if reduction == "sum":
        return _R.sum(loss)
    return loss


def _target(name, target, like):
    """A target tensor on ``like``'s device and dtype (a Python number is allowed too)."""
    if not isinstance(target, Tensor):
        target = tensor(target, dtype=like.dtype, device=like.device)
    _same_device(name, like, target)
    return target


@autocast_op("margin_ranking_loss")
def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -target * (input1 - input2) + margin)``; ``target`` holds 1 or -1.

    Args:
        input1, input2: scores of the same shape.
        target: 1 (input1 should rank higher) or -1, a tensor of the same rank or a number.
        margin: the required gap.
        reduction: ``'mean'`` (default), ``'sum'`` or ``'none'``; ``size_average``/``reduce``
            are torch's deprecated flags, mapped as torch maps them.

    Returns:
        The reduced loss (or per-element losses with ``'none'``).

    Raises:
        RuntimeError: inputs and target of different ranks.

    >>> import tensorbrain as tb
    >>> tb.nn.functional.margin_ranking_loss(tb.tensor([1.0, 0.0]), tb.tensor([0.0, 1.0]),
    ...                                      tb.tensor([1.0, 1.0])).item()
    0.5
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    target = _target("margin_ranking_loss", target, input1)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise RuntimeError(f"margin_ranking_loss: input1 {tuple(input1.shape)}, input2 "
                           f"{tuple(input2.shape)} and target {tuple(target.shape)} must have "
                           f"the same number of dimensions")
    z = _E.add(_E.mul(_E.neg(target), _E.sub(input1, input2)), margin)
    return _reduce(_E.clamp(z, min=0.0), reduction)


@autocast_op("cosine_embedding_loss")
def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` where target is 1, ``max(0, cos(x1, x2) - margin)`` where it is -1;
    the cosine is taken over the last dim of ``(N, D)`` or ``(D,)`` inputs.

    Args:
        input1, input2: ``(N, D)`` or ``(D,)`` embeddings.
        target: ``(N,)`` (or a scalar for 1-D inputs) of 1 or -1.
        margin: subtracted from the cosine of dissimilar pairs.
        reduction: ``'mean'`` (default), ``'sum'`` or ``'none'``; ``size_average``/``reduce``
            are torch's deprecated flags, mapped as torch maps them.

    Returns:
        The reduced loss (or ``(N,)`` losses with ``'none'``).

    Raises:
        RuntimeError: inputs of other ranks or shapes, a target of the wrong shape.

    >>> import tensorbrain as tb
    >>> x = tb.tensor([[1.0, 0.0], [0.0, 1.0]])
    >>> round(tb.nn.functional.cosine_embedding_loss(x, x, tb.tensor([1, -1])).item(), 4)
    0.5
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if input1.shape != input2.shape or input1.ndim not in (1, 2):
        raise RuntimeError(f"cosine_embedding_loss: inputs must be 1-D or 2-D of the same shape, "
                           f"got {tuple(input1.shape)} and {tuple(input2.shape)}")
    target = _target("cosine_embedding_loss", target, input1)
    want = () if input1.ndim == 1 else (input1.shape[0],)
    if tuple(target.shape) != want:
        raise RuntimeError(f"cosine_embedding_loss: target must have shape {want} for inputs of "
                           f"shape {tuple(input1.shape)}, got {tuple(target.shape)}")
    dim = input1.ndim - 1
    eps = 1e-12
    prod = _R.sum(_E.mul(input1, input2), dim)
    m1 = _E.add(_R.sum(_E.mul(input1, input1), dim), eps)
    m2 = _E.add(_R.sum(_E.mul(input2, input2), dim), eps)
    cos = _E.div(prod, _E.sqrt(_E.mul(m1, m2)))
    t = target._data
    pos = _E.where(t == 1, _E.sub(1.0, cos), 0.0)
    neg = _E.where(t == -1, _E.clamp(_E.sub(cos, margin), min=0.0), 0.0)
    return _reduce(_E.add(pos, neg), reduction)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` over the last dim (PyTorch adds ``eps`` to the difference).

    Args:
        x1, x2: tensors that broadcast together.
        p: the norm degree (> 0).
        eps: added to the difference (keeps the gradient finite at ``x1 == x2``).
        keepdim: keep the reduced last dim.

    Returns:
        The distances.

    Raises:
        ValueError: ``p <= 0``.

    >>> import tensorbrain as tb
    >>> round(tb.nn.functional.pairwise_distance(tb.tensor([[3.0, 0.0]]), tb.tensor([[0.0, 4.0]])).item(), 3)
    5.0
    """
    d = _E.add(_E.sub(x1, x2), eps)
    if p == 2:
        return _E.sqrt(_R.sum(_E.mul(d, d), -1, keepdim=keepdim))
    if p == 1:
        return _R.sum(_E.abs(d), -1, keepdim=keepdim)
    if p <= 0:
        raise ValueError(f"pairwise_distance: p must be positive, got {p}")
    return _E.pow(_R.sum(_E.pow(_E.abs(d), p), -1, keepdim=keepdim), 1.0 / p)


@autocast_op("triplet_margin_loss")
def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(0, d(a, p) - d(a, n) + margin)`` with ``d = pairwise_distance``; ``swap`` uses
    ``min(d(a, n), d(p, n))`` as the negative distance (Balntas et al.).

    Args:
        anchor, positive, negative: embeddings ``(N, D)`` or ``(D,)``.
        margin: the required gap between the distances.
        p, eps: the norm degree and the term added to the difference in
            :func:`pairwise_distance`.
        swap: use the distance swap.
        reduction: ``'mean'`` (default), ``'sum'`` or ``'none'``; ``size_average``/``reduce``
            are torch's deprecated flags, mapped as torch maps them.

    Returns:
        The reduced loss (or ``(N,)`` losses with ``'none'``).

    Raises:
        RuntimeError: inputs of different ranks or on different devices.

    >>> import tensorbrain as tb
    >>> a = tb.zeros(1, 2)
    >>> round(tb.nn.functional.triplet_margin_loss(a, a, a + 3.0).item(), 3)
    0.0
    """
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction)
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise RuntimeError(f"triplet_margin_loss: anchor {tuple(anchor.shape)}, positive "
                           f"{tuple(positive.shape)} and negative {tuple(negative.shape)} must "
                           f"have the same number of dimensions")
    _same_device("triplet_margin_loss", anchor, positive, negative)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:
        d_neg = _E.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce(_E.clamp(_E.add(_E.sub(d_pos, d_neg), margin), min=0.0), reduction)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean",
             zero_infinity=False):
    """Not supported yet: raises ``NotImplementedError`` (see docs/functional.md)."""
    raise NotImplementedError("ctc_loss / CTCLoss is not supported by TensorBrain yet")
