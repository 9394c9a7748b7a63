"""Adadelta, Adagrad, Adamax, NAdam, RAdam and LBFGS: step by step against their formulas
written out in NumPy (always) and against torch (when installed); state_dict round trips."""
import math

import numpy as np
import pytest

import tensorbrain as tb

rng = np.random.default_rng(3)
P0 = rng.standard_normal((4, 3)).astype(np.float32)
GRADS = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(12)]   # RAdam: see below


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
    torch = pytest.importorskip("torch")
    p = torch.tensor(P0.copy(), requires_grad=True)
    opt = getattr(torch.optim, name)([p], **kw)
    out = []
    for g in GRADS:
        p.grad = torch.tensor(g.copy())
        opt.step()
        out.append(p.detach().numpy().copy())
    return out


def _grads(maximize):
    return [(-g if maximize else g).astype(np.float64) for g in GRADS]


# ***** the formulas, written out (torch's documented algorithms) *****
def ref_adagrad(lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                eps=1e-10, maximize=False, foreach=None):
    p, out = P0.astype(np.float64), []
    s = np.full_like(p, initial_accumulator_value)
    for t, g in enumerate(_grads(maximize), 1):
        g = g + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (np.sqrt(s) + eps)
        out.append(p)
    return out


def ref_adadelta(lr=1.0, rho=0.9, eps=1e-6, weight_decay=0.0, maximize=False, foreach=None):
    p, out = P0.astype(np.float64), []
    v, u = np.zeros_like(p), np.zeros_like(p)
    for g in _grads(maximize):
        g = g + weight_decay * p
        v = rho * v + (1 - rho) * g * g
        delta = np.sqrt(u + eps) / np.sqrt(v + eps) * g
        u = rho * u + (1 - rho) * delta * delta
        p = p - lr * delta
        out.append(p)
    return out


def ref_adamax(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, maximize=False,
               foreach=None):
    p, out = P0.astype(np.float64), []
    m, u = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(_grads(maximize), 1):
        g = g + weight_decay * p
        m = betas[0] * m + (1 - betas[0]) * g
        u = np.maximum(betas[1] * u, np.abs(g) + eps)
        p = p - lr / (1 - betas[0] ** t) * m / u
        out.append(p)
    return out


def ref_nadam(lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, momentum_decay=4e-3,
              decoupled_weight_decay=False, maximize=False, foreach=None):
    b1, b2 = betas
    p, out = P0.astype(np.float64), []
    m, v, mu_prod = np.zeros_like(p), np.zeros_like(p), 1.0
    for t, g in enumerate(_grads(maximize), 1):
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        mu = b1 * (1 - 0.5 * 0.96 ** (t * momentum_decay))
        mu_next = b1 * (1 - 0.5 * 0.96 ** ((t + 1) * momentum_decay))
        mu_prod *= mu
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        denom = np.sqrt(v / (1 - b2 ** t)) + eps
        p = p - lr * (1 - mu) / (1 - mu_prod) * g / denom \
            - lr * mu_next / (1 - mu_prod * mu_next) * m / denom
        out.append(p)
    return out


def ref_radam(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
              decoupled_weight_decay=False, maximize=False, foreach=None):
    b1, b2 = betas
    p, out = P0.astype(np.float64), []
    m, v = np.zeros_like(p), np.zeros_like(p)
    rho_inf = 2 / (1 - b2) - 1
    for t, g in enumerate(_grads(maximize), 1):
        if decoupled_weight_decay:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        mhat = m / (1 - b1 ** t)
        rho_t = rho_inf - 2 * t * b2 ** t / (1 - b2 ** t)
        if rho_t > 5:
            r = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
            p = p - lr * mhat * r * math.sqrt(1 - b2 ** t) / (np.sqrt(v) + eps)
        else:
            p = p - lr * mhat
        out.append(p)
    return out


CASES = [
    (tb.optim.Adagrad, "Adagrad", dict(lr=0.1), ref_adagrad),
    (tb.optim.Adagrad, "Adagrad", dict(lr=0.1, lr_decay=0.1, weight_decay=0.05,
                                       initial_accumulator_value=0.3, maximize=True), ref_adagrad),
    (tb.optim.Adadelta, "Adadelta", dict(), ref_adadelta),
    (tb.optim.Adadelta, "Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1, maximize=True,
                                         foreach=True), ref_adadelta),
    (tb.optim.Adamax, "Adamax", dict(lr=0.01), ref_adamax),
    (tb.optim.Adamax, "Adamax", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1, maximize=True),
     ref_adamax),
    (tb.optim.NAdam, "NAdam", dict(lr=0.01), ref_nadam),
    (tb.optim.NAdam, "NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01), ref_nadam),
    (tb.optim.NAdam, "NAdam", dict(lr=0.01, weight_decay=0.1, decoupled_weight_decay=True,
                                   maximize=True), ref_nadam),
    (tb.optim.RAdam, "RAdam", dict(lr=0.01), ref_radam),
    # betas[1] = 0.8 makes rho_t > 5 from step 8 on: both branches run
    (tb.optim.RAdam, "RAdam", dict(lr=0.01, betas=(0.9, 0.8), weight_decay=0.1), ref_radam),
    (tb.optim.RAdam, "RAdam", dict(lr=0.01, betas=(0.9, 0.8), weight_decay=0.1,
                                   decoupled_weight_decay=True, maximize=True), ref_radam),
]
IDS = [f"{c[1]}-{i}" for i, c in enumerate(CASES)]


@pytest.mark.parametrize("cls,name,kw,ref", CASES, ids=IDS)
def test_against_formula(cls, name, kw, ref):
    got, _ = run_tb(cls, **kw)
    for step, (a, b) in enumerate(zip(got, ref(**kw), strict=True)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=f"{name} step {step}")


@pytest.mark.parametrize("cls,name,kw,ref", CASES, ids=IDS)
def test_against_torch(cls, name, kw, ref):
    want = run_torch(name, **kw)
    got, _ = run_tb(cls, **kw)
    for step, (a, b) in enumerate(zip(got, want, strict=True)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{name} step {step}")


def test_radam_takes_the_rectified_branch():
    """The case above is only a test of both branches if rho_t crosses 5 within the steps."""
    b2 = 0.8
    rho_inf = 2 / (1 - b2) - 1
    rhos = [rho_inf - 2 * t * b2 ** t / (1 - b2 ** t) for t in range(1, len(GRADS) + 1)]
    assert min(rhos) <= 5 < max(rhos)


@pytest.mark.parametrize("cls,name,kw,ref", CASES, ids=IDS)
def test_state_dict_round_trip(cls, name, kw, ref):
    full, _ = run_tb(cls, **kw)
    p = tb.tensor(P0.copy(), requires_grad=True)
    opt = cls([p], **kw)
    for g in GRADS[:2]:
        p.grad = tb.tensor(g.copy())
        opt.step()
    sd = opt.state_dict()
    p2 = tb.tensor(p._data.copy(), requires_grad=True)
    opt2 = cls([p2], **{**kw, "lr": 123.0})
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == opt.param_groups[0]["lr"]
    for g in GRADS[2:]:
        p2.grad = tb.tensor(g.copy())
        opt2.step()
    np.testing.assert_array_equal(p2._data, full[-1])


def test_unsupported_flags_are_refused():
    p = tb.ones(1, requires_grad=True)
    with pytest.raises(ValueError, match="capturable"):
        tb.optim.NAdam([p], capturable=True)
    with pytest.raises(ValueError, match="differentiable"):
        tb.optim.Adadelta([p], differentiable=True)
    with pytest.raises(ValueError, match="rho"):
        tb.optim.Adadelta([p], rho=1.5)
    with pytest.raises(ValueError, match="line_search_fn"):
        tb.optim.LBFGS([p], line_search_fn="backtracking")
    with pytest.raises(ValueError, match="parameter groups"):
        tb.optim.LBFGS([{"params": [p]}, {"params": [tb.ones(1, requires_grad=True)]}])


# ***** LBFGS *****
A = rng.standard_normal((6, 4))
B = rng.standard_normal(6)


def _lbfgs_run(lib, line_search_fn, steps=3, **kw):
    """Minimise a smooth non-quadratic loss (soft-plus least squares) with ``lib``'s LBFGS."""
    x = lib.tensor(np.full(4, 0.5), requires_grad=True)
    a, b = lib.tensor(A), lib.tensor(B)
    opt = lib.optim.LBFGS([x], line_search_fn=line_search_fn, **kw)

    def closure():
        opt.zero_grad()
        r = a @ x - b
        loss = (r * r).sum() + (x * x * x * x).sum() * 0.1
        loss.backward()
        return loss
    traj, losses = [], []
    for _ in range(steps):
        losses.append(float(opt.step(closure).detach() if lib is not tb else opt.step(closure)))
        traj.append(np.array(x.detach().numpy() if lib is not tb else x._data))
    return traj, losses, opt


def _numpy_minimum():
    """The minimiser by Newton's method in NumPy: the reference both runs must reach."""
    x = np.full(4, 0.5)
    for _ in range(50):
        g = 2 * A.T @ (A @ x - B) + 0.4 * x ** 3
        h = 2 * A.T @ A + np.diag(1.2 * x ** 2)
        x = x - np.linalg.solve(h, g)
    return x


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_reaches_the_numpy_minimum(line_search_fn):
    traj, losses, opt = _lbfgs_run(tb, line_search_fn, steps=5)
    np.testing.assert_allclose(traj[-1], _numpy_minimum(), atol=1e-5)
    assert losses[-1] <= losses[0]
    st = opt.state[opt.param_groups[0]["params"][0]]
    assert st["n_iter"] > 1 and st["func_evals"] >= st["n_iter"]


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("kw", [dict(), dict(max_iter=4, history_size=2, lr=0.5)])
def test_lbfgs_against_torch(line_search_fn, kw):
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        want, want_losses, topt = _lbfgs_run(torch, line_search_fn, **kw)
    finally:
        torch.set_default_dtype(torch.float32)
    got, got_losses, opt = _lbfgs_run(tb, line_search_fn, **kw)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-9)
    tst = topt.state[topt.param_groups[0]["params"][0]]
    st = opt.state[opt.param_groups[0]["params"][0]]
    assert (st["n_iter"], st["func_evals"]) == (tst["n_iter"], tst["func_evals"])


def test_lbfgs_state_dict_round_trip():
    full, _, _ = _lbfgs_run(tb, "strong_wolfe", steps=3, max_iter=3)
    x = tb.tensor(np.full(4, 0.5), requires_grad=True)
    a, b = tb.tensor(A), tb.tensor(B)

    def make(x):
        opt = tb.optim.LBFGS([x], line_search_fn="strong_wolfe", max_iter=3)

        def closure():
            opt.zero_grad()
            r = a @ x - b
            loss = (r * r).sum() + (x * x * x * x).sum() * 0.1
            loss.backward()
            return loss
        return opt, closure
    opt, closure = make(x)
    opt.step(closure)
    sd = opt.state_dict()
    x2 = tb.tensor(x._data.copy(), requires_grad=True)
    opt2, closure2 = make(x2)
    opt2.load_state_dict(sd)
    for _ in range(2):
        opt2.step(closure2)
    np.testing.assert_array_equal(x2._data, full[-1])


def test_existing_optimizers_take_torchs_keyword_flags():
    """SGD/Adam/AdamW/RMSprop accept foreach (ignored) and refuse what they cannot do."""
    p = tb.ones(2, requires_grad=True)
    for cls in (tb.optim.SGD, tb.optim.Adam, tb.optim.AdamW, tb.optim.RMSprop):
        cls([p], lr=0.1, foreach=True)
        cls([p], lr=0.1, foreach=False, differentiable=False)
        with pytest.raises(ValueError, match="differentiable"):
            cls([p], lr=0.1, differentiable=True)
    for cls in (tb.optim.SGD, tb.optim.Adam, tb.optim.AdamW, tb.optim.Adagrad):
        cls([p], lr=0.1, fused=True)      # torch takes it on the CPU too
        with pytest.raises(RuntimeError, match="`fused` and `foreach` cannot be `True`"):
            cls([p], lr=0.1, fused=True, foreach=True)


def test_fused_adamw_trains_as_torchs_fused_adamw():
    torch = pytest.importorskip("torch")
    w0 = np.random.default_rng(0).standard_normal((3, 2))
    out = []
    for lib in (tb, torch):
        w = lib.tensor(w0, requires_grad=True)
        opt = lib.optim.AdamW([w], lr=0.05, weight_decay=0.1, fused=True)
        for step in range(5):
            opt.zero_grad()
            ((w * (step + 1)) ** 2).sum().backward()
            opt.step()
        out.append(w.detach().numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-10)


def test_adam_decoupled_weight_decay_is_adamw():
    a, _ = run_tb(tb.optim.Adam, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)
    b, _ = run_tb(tb.optim.AdamW, lr=0.01, weight_decay=0.1)
    np.testing.assert_array_equal(a[-1], b[-1])
    c, _ = run_tb(tb.optim.Adam, lr=0.01, weight_decay=0.1)
    assert not np.array_equal(a[-1], c[-1])
