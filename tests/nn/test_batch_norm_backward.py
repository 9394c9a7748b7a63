"""batch_norm's two-sum backward: the cases the affine tests in test_functional.py leave out
(no weight/bias, weight without bias, a broadcast incoming gradient), against finite
differences and torch."""
import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain.testing import gradcheck

rng = np.random.default_rng(3)


def _ref(x, w=None, b=None):
    axes = (0,) + tuple(range(2, x.ndim))
    bs = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5)
    if w is not None:
        y = y * w.reshape(bs)
    return y if b is None else y + b.reshape(bs)


@pytest.mark.parametrize("shape", [(6, 3), (3, 3, 4, 5)])
def test_no_affine_and_weight_only(shape):
    x, w = rng.standard_normal(shape), rng.standard_normal(3)
    gradcheck(lambda x: F.batch_norm(x, None, None, training=True), [x], numpy_fn=_ref)
    gradcheck(lambda x, w: F.batch_norm(x, None, None, w, training=True), [x, w],
              numpy_fn=lambda x, w: _ref(x, w))


@pytest.mark.parametrize("loss", ["square", "plain_sum"])
def test_float32_gradients_match_torch(loss):
    # plain_sum: the incoming gradient is a stride-0 broadcast of ones (sum's backward)
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    w = (rng.standard_normal(3) ** 2).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    grads = []
    for lib in (tb, torch):
        xt, wt, bt = (lib.tensor(a, requires_grad=True) for a in (x, w, b))
        y = lib.nn.functional.batch_norm(xt, None, None, wt, bt, training=True)
        (y * y if loss == "square" else y).sum().backward()
        grads.append([t.grad.detach().numpy() for t in (xt, wt, bt)])
    for ours, theirs in zip(*grads, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-4)
