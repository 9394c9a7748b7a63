"""Slices' gradients reach the engine as SliceGrad (zero but the slice) and sibling slices are
written into one array the engine owns (autograd/engine.py _sum_into): the gradients must equal
the dense sums, whatever mix of slices, full-size gradients, hooks and retained gradients meets
at one tensor. Reference: the same sums written out in NumPy."""
import numpy as np

import tensorbrain as tb

rng = np.random.default_rng(11)


def test_split_siblings_mixed_with_full_gradients_and_retained_grads():
    a = rng.standard_normal((4, 9)).astype(np.float32)
    x = tb.tensor(a, requires_grad=True)
    y = x * 2.0                                   # non-leaf: its pending sum is the engine's
    y.retain_grad()
    q, k, v = y.split(3, dim=1)
    seen = []
    k.register_hook(lambda g: seen.append(g.numpy().copy()))
    w1, w2, w3 = (rng.standard_normal((4, 3)).astype(np.float32) for _ in range(3))
    w4 = rng.standard_normal((4, 9)).astype(np.float32)
    loss = (q * tb.tensor(w1)).sum() + (k * tb.tensor(w2)).sum() + (q * tb.tensor(w3)).sum() \
        + (y * tb.tensor(w4)).sum() + y[1:3, 2:7].sum()
    loss.backward()
    gy = w4.copy()
    gy[:, 0:3] += w1 + w3
    gy[:, 3:6] += w2
    gy[1:3, 2:7] += 1.0
    np.testing.assert_allclose(y.grad.numpy(), gy, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), 2 * gy, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(seen[0], w2)          # the hook saw its own slice's gradient


def test_only_one_slice_used_and_leaf_slices():
    a = rng.standard_normal((6, 5)).astype(np.float32)
    x = tb.tensor(a, requires_grad=True)
    parts = x.chunk(3, dim=0)
    (parts[1] * 3.0).sum().backward()                   # one slice: its dense form only
    want = np.zeros_like(a)
    want[2:4] = 3.0
    np.testing.assert_array_equal(x.grad.numpy(), want)
    x.grad = None
    sum(p.sum() * (i + 1) for i, p in enumerate(x.unbind(0))).backward()   # six slices of a leaf
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(np.arange(1, 7, dtype=np.float32)[:, None], 5, 1))


def test_autograd_grad_of_sliced_nonleaf():
    x = tb.tensor(rng.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    y = x + 1.0
    a, b = y[:, :2], y[:, 2:]
    (gy,) = tb.autograd.grad((a * 2).sum() + (b * 5).sum() + (a * 7).sum(), [y])
    np.testing.assert_array_equal(gy.numpy(), np.array([[9, 9, 5, 5]] * 3, np.float32))
