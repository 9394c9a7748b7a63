"""Adam's one-pass native update (csrc/kernels/adam.cpp, adam_avx2.cpp) against its NumPy twin
(tensorbrain/optim/adam.py's adam_step), bit for bit, over several steps;
and the optimizer on the native path against torch.optim.Adam."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _native
from tensorbrain.optim import adam

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
rng = np.random.default_rng(5)


def test_native_step_equals_twin_bit_for_bit(cpu_path):
    C = cpu_path                                          # the scalar and the AVX2 bodies
    n = 200_003                                           # an odd size
    p0 = rng.standard_normal(n).astype(np.float32)
    states = [[p0.copy(), np.zeros(n, np.float32), np.zeros(n, np.float32)] for _ in range(2)]
    for step in range(1, 4):
        g = (rng.standard_normal(n) * 10.0 ** rng.integers(-6, 3, n)).astype(np.float32)
        b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
        args = (b1, b2, (1 - b2 ** step) ** 0.5, eps, lr / (1 - b1 ** step))
        C.adam_step(*states[0][:1], g, *states[0][1:], *args)
        adam.adam_step(states[1][0], g, *states[1][1:], *args, np.empty(n, np.float32))
        for a, b in zip(*states):
            assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="exp_avg must be a writable C-contiguous float32 array of 3 values"):
        C.adam_step(np.ones(3, np.float32), np.ones(3, np.float32), np.ones(4, np.float32),
                    np.ones(3, np.float32), 0.9, 0.999, 1.0, 1e-8, 1e-3)


@pytest.mark.parametrize("kw", [{}, {"weight_decay": 0.1}, {"amsgrad": True}, {"maximize": True}])
def test_adam_matches_torch(kw):
    torch = pytest.importorskip("torch")
    w0 = rng.standard_normal((33, 17)).astype(np.float32)
    p, tp = tb.nn.Parameter(tb.tensor(w0.copy())), torch.nn.Parameter(torch.tensor(w0.copy()))
    opt, topt = tb.optim.Adam([p], lr=1e-2, **kw), torch.optim.Adam([tp], lr=1e-2, **kw)
    for _ in range(5):
        g = rng.standard_normal(w0.shape).astype(np.float32)
        p.grad, tp.grad = tb.tensor(g), torch.tensor(g)
        opt.step()
        topt.step()
    np.testing.assert_allclose(p.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
