"""amin, clamp_min/max, logical_and/or/xor, isclose, unbind and tb.dtype: values against NumPy,
gradients against torch where it is installed."""
import numpy as np
import pytest

import tensorbrain as tb

A = np.array([[1.0, 3.0, 0.5], [0.0, 2.0, 0.0]], dtype=np.float32)


def test_values_match_numpy():
    t = tb.tensor(A)
    np.testing.assert_array_equal(tb.amin(t, 1).numpy(), A.min(1))
    np.testing.assert_array_equal(t.amin().numpy(), A.min())
    np.testing.assert_array_equal(t.amin(dim=0, keepdim=True).numpy(), A.min(0, keepdims=True))
    np.testing.assert_array_equal(t.clamp_min(1.0).numpy(), np.maximum(A, 1.0))
    np.testing.assert_array_equal(tb.clamp_max(t, 1.0).numpy(), np.minimum(A, 1.0))
    u = tb.tensor(A)
    u.clamp_min_(0.5)
    np.testing.assert_array_equal(u.numpy(), np.maximum(A, 0.5))
    b = tb.tensor([1, 0, 2, 0])
    c = tb.tensor([True, True, False, False])
    assert tb.logical_and(b, c).tolist() == [True, False, False, False]
    assert b.logical_or(c).tolist() == [True, True, True, False]
    assert tb.logical_xor(b, c).tolist() == [False, True, True, False]
    assert tb.isclose(tb.tensor([1.0, 2.0]), tb.tensor([1.0 + 1e-9, 2.1])).tolist() == [True, False]
    rows = tb.tensor(A).unbind()
    assert len(rows) == 2 and rows[1].tolist() == A[1].tolist()
    cols = tb.unbind(tb.tensor(A), dim=-1)
    assert [c.tolist() for c in cols] == A.T.tolist()
    assert isinstance(tb.float32, tb.dtype) and not isinstance("float32", tb.dtype)


def test_gradients_match_torch():
    torch = pytest.importorskip("torch")
    ours, theirs = tb.tensor(A, requires_grad=True), torch.tensor(A, requires_grad=True)
    for lib, x in ((tb, ours), (torch, theirs)):
        a, b = x.unbind(0)
        (lib.amin(x, 1).sum() * 2 + x.clamp_min(0.7).sum() + x.clamp_max(1.5).sum() + (a * b).sum()).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6)
