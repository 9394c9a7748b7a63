"""MultiplicativeLR, ConstantLR, PolynomialLR, CosineAnnealingWarmRestarts, ChainedScheduler,
ReduceLROnPlateau (and LambdaLR again): closed forms written out, torch step by step when
installed, state_dict round trips that continue identically."""
import math

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.optim import lr_scheduler as S


def make(lr=0.1, lib=tb, **kw):
    p = lib.ones(1, requires_grad=True) if lib is tb else lib.nn.Parameter(lib.ones(1))
    return lib.optim.SGD([p], lr=lr, **kw)


def lrs(sched, opt, n, metrics=None):
    out = []
    for i in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step() if metrics is None else sched.step(metrics[i])
    return out


def test_closed_forms():
    opt = make()
    got = lrs(S.MultiplicativeLR(opt, lambda e: 0.9), opt, 6)
    np.testing.assert_allclose(got, [0.1 * 0.9 ** e for e in range(6)])
    opt = make()
    got = lrs(S.ConstantLR(opt, factor=0.5, total_iters=3), opt, 6)
    np.testing.assert_allclose(got, [0.05, 0.05, 0.05, 0.1, 0.1, 0.1])
    opt = make()
    got = lrs(S.PolynomialLR(opt, total_iters=4, power=2.0), opt, 7)
    np.testing.assert_allclose(got, [0.1 * (1 - min(e, 4) / 4) ** 2 for e in range(7)], atol=1e-15)
    opt = make()
    got = lrs(S.CosineAnnealingWarmRestarts(opt, T_0=3, T_mult=2, eta_min=0.01), opt, 10)
    # epochs 0-2 in a period of 3, 3-8 in a period of 6, 9 restarts
    tcur = [0, 1, 2, 0, 1, 2, 3, 4, 5, 0]
    ti = [3, 3, 3, 6, 6, 6, 6, 6, 6, 12]
    want = [0.01 + 0.09 * (1 + math.cos(math.pi * c / t)) / 2 for c, t in zip(tcur, ti, strict=True)]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_reduce_on_plateau_rules():
    opt = make()
    sched = S.ReduceLROnPlateau(opt, patience=1, factor=0.5, cooldown=1, min_lr=0.02)
    # improves, then flat: the 2nd bad epoch (> patience) halves, cooldown swallows one epoch
    metrics = [1.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    got = lrs(sched, opt, len(metrics), metrics)
    assert got == [0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]
    for _ in range(6):
        sched.step(0.5)
    assert opt.param_groups[0]["lr"] == 0.02      # floored at min_lr
    with pytest.raises(ValueError, match="Factor"):
        S.ReduceLROnPlateau(make(), factor=1.0)


def test_warm_restarts_fractional_epochs():
    opt = make()
    sched = S.CosineAnnealingWarmRestarts(opt, T_0=4, T_mult=2)
    sched.step(5.5)     # in the second period (4..12): T_cur = 1.5, T_i = 8
    assert sched.T_i == 8 and sched.T_cur == pytest.approx(1.5)
    assert opt.param_groups[0]["lr"] == pytest.approx(0.05 * (1 + math.cos(math.pi * 1.5 / 8)))
    with pytest.raises(ValueError, match="T_0"):
        S.CosineAnnealingWarmRestarts(make(), T_0=0)


def _build(lib, name, opt):
    s = lib.optim.lr_scheduler
    if name == "Chained":
        return s.ChainedScheduler([s.ConstantLR(opt, factor=0.5, total_iters=2),
                                   s.ExponentialLR(opt, gamma=0.9)])
    if name == "Plateau":
        return s.ReduceLROnPlateau(opt, mode="max", patience=2, threshold=0.1,
                                   threshold_mode="abs", cooldown=1)
    kw = dict(MultiplicativeLR=dict(lr_lambda=lambda e: 0.95 if e % 2 else 0.8),
              LambdaLR=dict(lr_lambda=lambda e: 1 / (1 + e)),
              ConstantLR=dict(factor=0.25, total_iters=4),
              PolynomialLR=dict(total_iters=6, power=0.5),
              CosineAnnealingWarmRestarts=dict(T_0=2, T_mult=3, eta_min=0.001))[name]
    return getattr(s, name)(opt, **kw)


NAMES = ["MultiplicativeLR", "LambdaLR", "ConstantLR", "PolynomialLR",
         "CosineAnnealingWarmRestarts", "Chained", "Plateau"]
METRICS = [0.1, 0.3, 0.35, 0.3, 0.2, 0.5, 0.5, 0.55, 0.5, 0.4, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7]


@pytest.mark.parametrize("name", NAMES)
def test_against_torch(name):
    torch = pytest.importorskip("torch")
    metrics = METRICS if name == "Plateau" else None
    n = len(METRICS)
    opt = make(momentum=0.9)
    mine = lrs(_build(tb, name, opt), opt, n, metrics)
    topt = make(lib=torch, momentum=0.9)
    theirs = lrs(_build(torch, name, topt), topt, n, metrics)
    np.testing.assert_allclose(mine, theirs, rtol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_state_dict_round_trip(name):
    metrics = METRICS if name == "Plateau" else None
    n = len(METRICS)
    opt = make()
    full = lrs(_build(tb, name, opt), opt, n, metrics)
    opt = make()
    sched = _build(tb, name, opt)
    first = lrs(sched, opt, 5, metrics)
    sd, osd = sched.state_dict(), opt.state_dict()
    opt2 = make(lr=7.0)
    sched2 = _build(tb, name, opt2)
    opt2.load_state_dict(osd)
    sched2.load_state_dict(sd)
    rest = lrs(sched2, opt2, n - 5, metrics[5:] if metrics else None)
    np.testing.assert_allclose(first + rest, full, rtol=1e-12)
