"""Losses: forward against NumPy formulas, gradients against float64 finite differences, and
both against torch when it is installed (gradcheck skips the torch part without it)."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain import nn
from tensorbrain.testing import gradcheck

try:
    import torch
    import torch.nn.functional as TF
except ImportError:
    torch = TF = None

rng = np.random.default_rng(1)
REDUCTIONS = ["mean", "sum", "none"]


def tfn(make):
    return make(TF) if TF is not None else None


def np_reduce(v, reduction):
    return v.mean() if reduction == "mean" else (v.sum() if reduction == "sum" else v)


# ***** the losses that were there, with their options *****
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll_loss_weight_ignore_index_nd(reduction):
    x = rng.standard_normal((3, 4, 2, 2))
    t = rng.integers(0, 4, (3, 2, 2))
    t[0, 0, 0] = -1
    w = rng.uniform(0.5, 2, 4)

    def ref(x, t, w):
        valid = t != -1
        ts = np.where(valid, t, 0)
        picked = np.take_along_axis(x, ts[:, None], 1)[:, 0]
        per = -w[ts] * picked * valid
        if reduction == "mean":
            return per.sum() / (w[ts] * valid).sum()
        return per.sum() if reduction == "sum" else per
    gradcheck(lambda x, t, w: F.nll_loss(x, t, weight=w, ignore_index=-1, reduction=reduction),
              [x, t, w], grad_inputs=[0], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x, t, w: TF.nll_loss(x, t, weight=w, ignore_index=-1,
                                                                  reduction=reduction)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_weight(reduction):
    p = rng.uniform(0.05, 0.95, (4, 3))
    t = rng.uniform(0, 1, (4, 3))
    w = rng.uniform(0.5, 2, (3,))
    gradcheck(lambda p, t, w: nn.BCELoss(weight=w, reduction=reduction)(p, t), [p, t, w],
              grad_inputs=[0, 1],
              numpy_fn=lambda p, t, w: np_reduce(-w * (t * np.log(p) + (1 - t) * np.log1p(-p)), reduction),
              torch_fn=tfn(lambda TF: lambda p, t, w: TF.binary_cross_entropy(p, t, w, reduction=reduction)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_bce_with_logits_pos_weight_and_weight(reduction):
    x = rng.standard_normal((4, 3)) * 3
    t = rng.uniform(0, 1, (4, 3))
    w = rng.uniform(0.5, 2, (4, 1))
    pw = rng.uniform(0.5, 3, (3,))

    def ref(x, t, w, pw):
        s = 1 / (1 + np.exp(-x))
        return np_reduce(-w * (pw * t * np.log(s) + (1 - t) * np.log1p(-s)), reduction)
    gradcheck(lambda x, t, w, pw: nn.BCEWithLogitsLoss(weight=w, reduction=reduction, pos_weight=pw)(x, t),
              [x, t, w, pw], grad_inputs=[0, 1], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x, t, w, pw: TF.binary_cross_entropy_with_logits(
                  x, t, w, reduction=reduction, pos_weight=pw)))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none", "batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x = np.log(rng.dirichlet(np.ones(5), 3))
    q = rng.dirichlet(np.ones(5), 3)
    t = np.log(q) if log_target else q

    def ref(x, t):
        per = q * (np.log(q) - x)
        return per.sum() / 3 if reduction == "batchmean" else np_reduce(per, reduction)
    gradcheck(lambda x, t: nn.KLDivLoss(reduction, log_target=log_target)(x, t), [x, t],
              numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x, t: TF.kl_div(x, t, reduction=reduction,
                                                             log_target=log_target)))


@pytest.mark.parametrize("beta", [0.0, 0.5, 2.0])
def test_smooth_l1_beta(beta):
    x, y = rng.standard_normal((3, 4)) * 2, rng.standard_normal((3, 4))

    def ref(x, y):
        d = np.abs(x - y)
        return (d if beta == 0 else np.where(d < beta, 0.5 * d * d / max(beta, 1e-30), d - 0.5 * beta)).mean()
    gradcheck(lambda x, y: nn.SmoothL1Loss(beta=beta)(x, y), [x, y], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x, y: TF.smooth_l1_loss(x, y, beta=beta)))


@pytest.mark.parametrize("delta", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_huber_delta(delta, reduction):
    x, y = rng.standard_normal((3, 4)) * 2, rng.standard_normal((3, 4))

    def ref(x, y):
        d = np.abs(x - y)
        return np_reduce(np.where(d < delta, 0.5 * d * d, delta * (d - 0.5 * delta)), reduction)
    gradcheck(lambda x, y: nn.HuberLoss(reduction, delta)(x, y), [x, y], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x, y: TF.huber_loss(x, y, reduction, delta)))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_l1(reduction):
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    gradcheck(lambda x, y: nn.L1Loss(reduction=reduction)(x, y), [x, y],
              numpy_fn=lambda x, y: np_reduce(np.abs(x - y), reduction),
              torch_fn=tfn(lambda TF: lambda x, y: TF.l1_loss(x, y, reduction=reduction)))


# ***** the new margin and embedding losses *****
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.3])
def test_margin_ranking(reduction, margin):
    a, b = rng.standard_normal(6), rng.standard_normal(6)
    y = np.where(rng.uniform(size=6) < 0.5, -1.0, 1.0)
    gradcheck(lambda a, b, y: nn.MarginRankingLoss(margin, reduction)(a, b, y), [a, b, y],
              grad_inputs=[0, 1],
              numpy_fn=lambda a, b, y: np_reduce(np.maximum(0, -y * (a - b) + margin), reduction),
              torch_fn=tfn(lambda TF: lambda a, b, y: TF.margin_ranking_loss(a, b, y, margin,
                                                                             reduction=reduction)))


def np_cosine_embedding(a, b, y, margin, reduction):
    dim = a.ndim - 1
    cos = (a * b).sum(dim) / np.sqrt(((a * a).sum(dim) + 1e-12) * ((b * b).sum(dim) + 1e-12))
    per = np.where(y == 1, 1 - cos, 0) + np.where(y == -1, np.maximum(0, cos - margin), 0)
    return np_reduce(per, reduction)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("margin", [0.0, 0.2])
def test_cosine_embedding(reduction, margin):
    a, b = rng.standard_normal((5, 4)), rng.standard_normal((5, 4))
    y = np.array([1, -1, 1, -1, -1])
    gradcheck(lambda a, b, y: nn.CosineEmbeddingLoss(margin, reduction)(a, b, y), [a, b, y],
              numpy_fn=lambda a, b, y: np_cosine_embedding(a, b, y, margin, reduction),
              torch_fn=tfn(lambda TF: lambda a, b, y: TF.cosine_embedding_loss(
                  a, b, y, margin, reduction=reduction)))


def test_cosine_embedding_1d_inputs():
    a, b = rng.standard_normal(4), rng.standard_normal(4)
    y = np.array(-1)
    gradcheck(lambda a, b, y: F.cosine_embedding_loss(a, b, y, -0.5), [a, b, y],
              numpy_fn=lambda a, b, y: np_cosine_embedding(a, b, y, -0.5, "mean"),
              torch_fn=tfn(lambda TF: lambda a, b, y: TF.cosine_embedding_loss(a, b, y, -0.5)))


def np_pdist(x, y, p, eps):
    return (np.abs(x - y + eps) ** p).sum(-1) ** (1 / p)


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_triplet_margin(p, swap, reduction):
    a, pos, neg = (rng.standard_normal((4, 3)) for _ in range(3))

    def ref(a, pos, neg):
        dn = np_pdist(a, neg, p, 1e-6)
        if swap:
            dn = np.minimum(dn, np_pdist(pos, neg, p, 1e-6))
        return np_reduce(np.maximum(0, np_pdist(a, pos, p, 1e-6) - dn + 0.5), reduction)
    gradcheck(lambda a, pos, neg: nn.TripletMarginLoss(0.5, p, swap=swap, reduction=reduction)(a, pos, neg),
              [a, pos, neg], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda a, pos, neg: TF.triplet_margin_loss(
                  a, pos, neg, 0.5, p, swap=swap, reduction=reduction)))


def test_pairwise_distance_keepdim():
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    gradcheck(lambda x, y: F.pairwise_distance(x, y, keepdim=True), [x, y],
              numpy_fn=lambda x, y: np_pdist(x, y, 2, 1e-6)[:, None],
              torch_fn=tfn(lambda TF: lambda x, y: TF.pairwise_distance(x, y, keepdim=True)))


# ***** errors *****
def test_loss_errors_are_clear():
    with pytest.raises(NotImplementedError, match="CTCLoss"):
        nn.CTCLoss()
    with pytest.raises(NotImplementedError, match="ctc_loss"):
        F.ctc_loss(tb.zeros(2, 1, 3), tb.zeros(1, 1), [2], [1])
    with pytest.raises(ValueError, match="reduction"):
        nn.KLDivLoss("avg")
    with pytest.raises(RuntimeError, match="target must have shape"):
        F.cosine_embedding_loss(tb.zeros(3, 2), tb.zeros(3, 2), tb.ones(2))
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        F.margin_ranking_loss(tb.zeros(3), tb.zeros(3), tb.ones(3, 1))
    with pytest.raises(ValueError, match="margin"):
        nn.TripletMarginLoss(margin=0)
