"""SGD's one-pass native momentum update (csrc/kernels/sgd.cpp) against its NumPy twin
(tensorbrain/optim/sgd.py's sgd_step), bit for bit, over several steps; and the
optimizer on the native path against torch.optim.SGD."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _native
from tensorbrain.optim import sgd

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
rng = np.random.default_rng(7)


@pytest.mark.parametrize("damp,nesterov,momentum", [(1.0, False, 0.9), (0.75, False, 0.9), (1.0, True, 0.9),
                                                   (1.0, False, 0.0)])
def test_native_step_equals_twin_bit_for_bit(damp, nesterov, momentum):
    C = _native.module()
    n = 300_007                                           # odd, and split across threads
    p0 = rng.standard_normal(n).astype(np.float32)
    b0 = rng.standard_normal(n).astype(np.float32) if momentum else None
    states = [[p0.copy(), None if b0 is None else b0.copy()] for _ in range(2)]
    for _ in range(3):
        g = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 3, n)).astype(np.float32)
        C.sgd_step(states[0][0], g, states[0][1], 0.013, momentum, damp, nesterov)
        sgd.sgd_step(states[1][0], g, states[1][1], 0.013, momentum, damp, nesterov, np.empty(n, np.float32))
        for a, b in zip(*states):
            assert (a is None and b is None) or np.array_equal(a, b)
    with pytest.raises(ValueError, match="momentum_buffer must be a writable C-contiguous float32 array of 3"):
        C.sgd_step(np.ones(3, np.float32), np.ones(3, np.float32), np.ones(4, np.float32), 0.1, 0.9, 1.0,
                   False)


def test_the_optimizer_takes_the_native_path(monkeypatch):
    """SGD with momentum calls the one-pass kernel from the second step on (the first makes the
    buffer), without momentum from the first; both reach the bits of the NumPy path."""
    calls = []
    C = _native.module()
    w0 = rng.standard_normal((33, 17)).astype(np.float32)
    grads = [rng.standard_normal(w0.shape).astype(np.float32) for _ in range(4)]

    def run(native, momentum=0.9):
        monkeypatch.setattr(_native, "loaded", (lambda: C) if native else (lambda: None))
        p = tb.nn.Parameter(tb.tensor(w0.copy()))
        opt = tb.optim.SGD([p], lr=0.05, momentum=momentum, dampening=0.1 if momentum else 0.0)
        for g in grads:
            p.grad = tb.tensor(g)
            opt.step()
        return p.detach().numpy()
    real = C.sgd_step

    def counted(*a):
        calls.append(1)
        return real(*a)
    monkeypatch.setattr(C, "sgd_step", counted)
    assert np.array_equal(run(True), run(False))
    assert len(calls) == len(grads) - 1
    calls.clear()
    assert np.array_equal(run(True, 0.0), run(False, 0.0))
    assert len(calls) == len(grads)


@pytest.mark.parametrize("kw", [{"momentum": 0.9}, {"momentum": 0.9, "nesterov": True},
                                {"momentum": 0.9, "dampening": 0.5, "weight_decay": 0.01},
                                {"momentum": 0.9, "maximize": True}])
def test_sgd_matches_torch(kw):
    torch = pytest.importorskip("torch")
    w0 = rng.standard_normal((33, 17)).astype(np.float32)
    p, tp = tb.nn.Parameter(tb.tensor(w0.copy())), torch.nn.Parameter(torch.tensor(w0.copy()))
    opt, topt = tb.optim.SGD([p], lr=1e-2, **kw), torch.optim.SGD([tp], lr=1e-2, **kw)
    for _ in range(5):
        g = rng.standard_normal(w0.shape).astype(np.float32)
        p.grad, tp.grad = tb.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-6, atol=1e-7)
