"""Schedulers against their closed forms and, when installed, torch's schedulers step by step."""
import math

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.optim import lr_scheduler as S

try:
    import torch
except ImportError:
    torch = None


def make(opt_cls=tb.optim.SGD, lr=0.1, **kw):
    p = tb.ones(1, requires_grad=True)
    return opt_cls([p], lr=lr, **kw)


def lrs(sched, opt, n):
    out = []
    for _ in range(n):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


def test_step_lr_closed_form():
    opt = make()
    got = lrs(S.StepLR(opt, step_size=3, gamma=0.5), opt, 10)
    np.testing.assert_allclose(got, [0.1 * 0.5 ** (e // 3) for e in range(10)])


def test_multistep_exponential_linear_cosine_closed_forms():
    opt = make()
    got = lrs(S.MultiStepLR(opt, [2, 5, 5], gamma=0.1), opt, 8)
    np.testing.assert_allclose(got, [0.1 * 0.1 ** (int(e >= 2) + 2 * int(e >= 5)) for e in range(8)])
    opt = make()
    np.testing.assert_allclose(lrs(S.ExponentialLR(opt, 0.9), opt, 6), [0.1 * 0.9 ** e for e in range(6)])
    opt = make()
    got = lrs(S.LinearLR(opt, start_factor=0.25, total_iters=4), opt, 7)
    np.testing.assert_allclose(got, [0.1 * (0.25 + 0.75 * min(e, 4) / 4) for e in range(7)])
    opt = make()
    got = lrs(S.CosineAnnealingLR(opt, T_max=5, eta_min=0.01), opt, 6)
    want = [0.01 + 0.09 * (1 + math.cos(math.pi * e / 5)) / 2 for e in range(6)]
    np.testing.assert_allclose(got, want, rtol=1e-9)


def test_lambda_and_state_dict():
    opt = make()
    sched = S.LambdaLR(opt, lambda e: 1.0 / (e + 1))
    got = lrs(sched, opt, 4)
    np.testing.assert_allclose(got, [0.1 / (e + 1) for e in range(4)])
    sd = sched.state_dict()
    assert "lr_lambdas" not in sd and sd["last_epoch"] == 4
    opt2 = make()
    s2 = S.StepLR(opt2, step_size=2)
    lrs(s2, opt2, 3)
    s3 = S.StepLR(make(), step_size=2)
    s3.load_state_dict(s2.state_dict())
    assert s3.last_epoch == 3 and s3.get_last_lr() == s2.get_last_lr()


def test_onecycle_shape():
    opt = make(momentum=0.9)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=100)
    got = lrs(sched, opt, 100)
    assert got[0] == pytest.approx(1.0 / 25)
    assert max(got) == pytest.approx(1.0, rel=1e-3)
    assert int(np.argmax(got)) == 29
    assert got[-1] == pytest.approx(1.0 / 25 / 1e4, rel=1e-2)
    with pytest.raises(ValueError, match="total steps"):
        for _ in range(5):
            sched.step()


TORCH_CASES = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("MultiStepLR", dict(milestones=[2, 6], gamma=0.3)),
    ("ExponentialLR", dict(gamma=0.8)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.001)),
    ("LinearLR", dict(start_factor=0.1, total_iters=5)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=20, three_phase=True)),
    ("OneCycleLR", dict(max_lr=0.5, total_steps=20, anneal_strategy="linear")),
]


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("name,kw", TORCH_CASES, ids=[c[0] for c in TORCH_CASES])
def test_against_torch(name, kw):
    n = 15 if name != "OneCycleLR" else 19
    opt = make(momentum=0.9)
    mine = lrs(getattr(S, name)(opt, **kw), opt, n)
    tp = torch.nn.Parameter(torch.ones(1))
    topt = torch.optim.SGD([tp], lr=0.1, momentum=0.9)
    tsched = getattr(torch.optim.lr_scheduler, name)(topt, **kw)
    theirs = []
    for _ in range(n):
        theirs.append(topt.param_groups[0]["lr"])
        topt.step()
        tsched.step()
    np.testing.assert_allclose(mine, theirs, rtol=1e-9)


@pytest.mark.skipif(torch is None, reason="torch not installed")
def test_sequential_against_torch():
    opt = make()
    mine = lrs(S.SequentialLR(opt, [S.LinearLR(opt, start_factor=0.5, total_iters=3),
                                    S.ExponentialLR(opt, gamma=0.9)], milestones=[3]), opt, 10)
    tp = torch.nn.Parameter(torch.ones(1))
    topt = torch.optim.SGD([tp], lr=0.1)
    ts = torch.optim.lr_scheduler
    tsched = ts.SequentialLR(topt, [ts.LinearLR(topt, start_factor=0.5, total_iters=3),
                                    ts.ExponentialLR(topt, gamma=0.9)], milestones=[3])
    theirs = []
    for _ in range(10):
        theirs.append(topt.param_groups[0]["lr"])
        topt.step()
        tsched.step()
    np.testing.assert_allclose(mine, theirs, rtol=1e-9)
