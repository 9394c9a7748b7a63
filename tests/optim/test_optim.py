"""Optimizers step by step against their formulas written in NumPy, and against torch when
installed (same initial values, same gradients)."""
import math

import numpy as np
import pytest

import tensorbrain as tb

try:
    import torch
except ImportError:  # CI does not install torch; the formula checks still run
    torch = None

rng = np.random.default_rng(0)
P0 = rng.standard_normal((4, 3)).astype(np.float32)
GRADS = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(5)]


def run_tb(cls, **kw):
    p = tb.tensor(P0.copy(), requires_grad=True)
    opt = cls([p], **kw)
    out = []
    for g in GRADS:
        p.grad = tb.tensor(g.copy())
        opt.step()
        out.append(p._data.copy())
    return out, opt


def run_torch(name, **kw):
    p = torch.tensor(P0.copy(), requires_grad=True)
    opt = getattr(torch.optim, name)([p], **kw)
    out = []
    for g in GRADS:
        p.grad = torch.tensor(g.copy())
        opt.step()
        out.append(p.detach().numpy().copy())
    return out


def ref_sgd(lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, maximize=False):
    p, buf, out = P0.astype(np.float64), None, []
    for g in GRADS:
        g = -g.astype(np.float64) if maximize else g.astype(np.float64)
        g = g + weight_decay * p
        if momentum:
            buf = g.copy() if buf is None else momentum * buf + (1 - dampening) * g
            g = g + momentum * buf if nesterov else buf
        p = p - lr * g
        out.append(p)
    return out


def ref_adam(lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, amsgrad=False, decoupled=False):
    p = P0.astype(np.float64)
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    out = []
    for t, g in enumerate(GRADS, 1):
        g = g.astype(np.float64)
        if weight_decay:
            if decoupled:
                p = p * (1 - lr * weight_decay)
            else:
                g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        vmax = np.maximum(vmax, v)
        vv = vmax if amsgrad else v
        mhat = m / (1 - betas[0] ** t)
        denom = np.sqrt(vv) / math.sqrt(1 - betas[1] ** t) + eps
        p = p - lr * mhat / denom
        out.append(p)
    return out


def ref_rmsprop(lr, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0, centered=False):
    p = P0.astype(np.float64)
    sq = np.zeros_like(p)
    ga = np.zeros_like(p)
    buf = np.zeros_like(p)
    out = []
    for g in GRADS:
        g = g.astype(np.float64) + weight_decay * p
        sq = alpha * sq + (1 - alpha) * g * g
        if centered:
            ga = alpha * ga + (1 - alpha) * g
            avg = np.sqrt(sq - ga * ga) + eps
        else:
            avg = np.sqrt(sq) + eps
        if momentum:
            buf = momentum * buf + g / avg
            p = p - lr * buf
        else:
            p = p - lr * g / avg
        out.append(p)
    return out


CASES = [
    (tb.optim.SGD, "SGD", dict(lr=0.1), ref_sgd),
    (tb.optim.SGD, "SGD", dict(lr=0.1, momentum=0.9), ref_sgd),
    (tb.optim.SGD, "SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=0.01), ref_sgd),
    (tb.optim.SGD, "SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1), ref_sgd),
    (tb.optim.SGD, "SGD", dict(lr=0.05, momentum=0.8, maximize=True), ref_sgd),
    (tb.optim.Adam, "Adam", dict(lr=0.01), ref_adam),
    (tb.optim.Adam, "Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, amsgrad=True), ref_adam),
    (tb.optim.AdamW, "AdamW", dict(lr=0.01, weight_decay=0.1),
     lambda **kw: ref_adam(decoupled=True, **kw)),
    (tb.optim.AdamW, "AdamW", dict(lr=0.01, weight_decay=0.1, amsgrad=True),
     lambda **kw: ref_adam(decoupled=True, **kw)),
    (tb.optim.RMSprop, "RMSprop", dict(lr=0.01), ref_rmsprop),
    (tb.optim.RMSprop, "RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.01),
     ref_rmsprop),
]


@pytest.mark.parametrize("cls,name,kw,ref", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_against_formula(cls, name, kw, ref):
    got, _ = run_tb(cls, **kw)
    want = ref(**kw)
    for step, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=f"{name} step {step}")


@pytest.mark.skipif(torch is None, reason="torch not installed")
@pytest.mark.parametrize("cls,name,kw,ref", CASES, ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_against_torch(cls, name, kw, ref):
    got, _ = run_tb(cls, **kw)
    want = run_torch(name, **kw)
    for step, (a, b) in enumerate(zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{name} step {step}")


def test_updates_in_place_without_reallocation():
    p = tb.tensor(P0.copy(), requires_grad=True)
    opt = tb.optim.Adam([p], lr=0.01)
    buf = p._data
    p.grad = tb.tensor(GRADS[0])
    opt.step()
    state_arrays = [id(v) for v in opt.state[p].values() if hasattr(v, "shape")]
    p.grad = tb.tensor(GRADS[1])
    opt.step()
    assert p._data is buf
    assert [id(v) for v in opt.state[p].values() if hasattr(v, "shape")] == state_arrays


def test_state_dict_round_trip_continues_identically():
    full, _ = run_tb(tb.optim.Adam, lr=0.01, amsgrad=True)
    p = tb.tensor(P0.copy(), requires_grad=True)
    opt = tb.optim.Adam([p], lr=0.01, amsgrad=True)
    for g in GRADS[:2]:
        p.grad = tb.tensor(g.copy())
        opt.step()
    sd = opt.state_dict()
    p2 = tb.tensor(p._data.copy(), requires_grad=True)
    opt2 = tb.optim.Adam([p2], lr=0.5, amsgrad=True)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.01
    for g in GRADS[2:]:
        p2.grad = tb.tensor(g.copy())
        opt2.step()
    np.testing.assert_array_equal(p2._data, full[-1])


def test_param_groups_and_zero_grad():
    a = tb.ones(2, requires_grad=True)
    b = tb.ones(3, requires_grad=True)
    opt = tb.optim.SGD([{"params": [a]}, {"params": [b], "lr": 1.0}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    (a.sum() + b.sum()).backward()
    opt.step()
    np.testing.assert_allclose(a._data, 0.9)
    np.testing.assert_allclose(b._data, 0.0)
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and not a.grad._data.any()
    opt.zero_grad()
    assert a.grad is None and b.grad is None
    c = tb.ones(1, requires_grad=True)
    opt.add_param_group({"params": c, "lr": 0.5})
    assert opt.param_groups[2]["momentum"] == 0.0
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})


def test_bad_arguments():
    p = tb.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match="learning rate"):
        tb.optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Nesterov"):
        tb.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="beta"):
        tb.optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="empty"):
        tb.optim.SGD([], lr=0.1)
