"""tb.multinomial, tb.bernoulli, tb.normal and Tensor.type_as: torch's shapes, dtypes, errors, and
draws whose frequencies match the requested probabilities."""
import numpy as np
import pytest

import tensorbrain as tb


def test_multinomial_frequencies_follow_the_weights():
    tb.manual_seed(0)
    w = tb.tensor([1.0, 0.0, 3.0, 4.0])                    # unnormalised, one zero weight
    draws = tb.multinomial(w, 40000, replacement=True)
    assert draws.dtype == tb.int64 and draws.shape == (40000,)
    freq = np.bincount(draws.numpy(), minlength=4) / 40000
    np.testing.assert_allclose(freq, [0.125, 0.0, 0.375, 0.5], atol=0.01)


def test_multinomial_rows_and_without_replacement():
    tb.manual_seed(1)
    w = tb.tensor([[0.0, 1.0, 1.0, 0.0, 1.0], [5.0, 1.0, 0.0, 0.0, 0.0]])
    out = w.multinomial(2)
    assert out.shape == (2, 2)
    for row, weights in zip(out.tolist(), w.tolist()):
        assert len(set(row)) == 2 and all(weights[i] > 0 for i in row)
    # a one-hot row always gives its index, also in the token-sampling idiom probs[:, [-1]]
    probs = tb.softmax(tb.tensor([[0.0, 80.0, 0.0]]), dim=-1)
    assert tb.multinomial(probs, num_samples=1).tolist() == [[1]]


def test_multinomial_without_replacement_uses_zero_weights_last_as_torch_cpu():
    for lib in _libs():
        out = lib.multinomial(lib.tensor([0.0, 1.0, 0.0, 0.0]), 3).tolist()
        assert out[0] == 1 and len(set(out)) == 3 and set(out[1:]) <= {0, 2, 3}


def _libs():
    try:
        import torch
    except ImportError:
        return [tb]
    return [tb, torch]


def test_multinomial_same_seed_same_draws():
    w = tb.rand(3, 7)
    g1, g2 = tb.Generator().manual_seed(5), tb.Generator().manual_seed(5)
    assert tb.equal(tb.multinomial(w, 4, generator=g1), tb.multinomial(w, 4, generator=g2))


@pytest.mark.parametrize("weights, n, replacement, match", [
    ([[[1.0]]], 1, True, "1 or 2 dim"),
    ([1.0, -1.0], 1, True, "element < 0"),
    ([1.0, float("nan")], 1, True, "nan"),
    ([0.0, 0.0], 1, True, "sum of probabilities"),
    ([1.0, 1.0], 3, False, "without replacement"),
    ([1.0], 0, True, "num_samples"),
])
def test_multinomial_rejects_what_torch_rejects(weights, n, replacement, match):
    with pytest.raises(RuntimeError, match=match):
        tb.multinomial(tb.tensor(weights), n, replacement)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.tensor(weights), n, replacement)


def test_bernoulli_forms():
    tb.manual_seed(2)
    p = tb.full((20000,), 0.3)
    d = tb.bernoulli(p)
    assert d.dtype == tb.float32 and set(np.unique(d.numpy())) <= {0.0, 1.0}
    assert abs(d.mean().item() - 0.3) < 0.015
    assert abs(tb.zeros(20000).bernoulli(0.8).mean().item() - 0.8) < 0.015
    t = tb.empty(20000).bernoulli_(0.1)
    assert abs(t.mean().item() - 0.1) < 0.01
    t = tb.empty(2, 3).bernoulli_(tb.tensor([0.0, 1.0, 0.0]))    # probabilities broadcast
    assert t.tolist() == [[0.0, 1.0, 0.0]] * 2
    with pytest.raises(RuntimeError, match=r"\[0, 1\]"):
        tb.bernoulli(tb.tensor([1.5]))


def test_normal_forms():
    tb.manual_seed(3)
    a = tb.normal(tb.full((20000,), 2.0), tb.full((20000,), 0.5))
    assert abs(a.mean().item() - 2.0) < 0.02 and abs(a.std().item() - 0.5) < 0.02
    b = tb.normal(tb.zeros(2, 3), 1.0)
    assert b.shape == (2, 3)
    c = tb.normal(1.0, tb.zeros(4))
    assert c.tolist() == [1.0] * 4
    d = tb.normal(0.0, 1.0, size=(3, 2), dtype=tb.float64)
    assert d.shape == (3, 2) and d.dtype == tb.float64
    with pytest.raises(RuntimeError, match="size="):
        tb.normal(0.0, 1.0)
    with pytest.raises(RuntimeError, match="std >= 0"):
        tb.normal(tb.zeros(2), tb.tensor([1.0, -1.0]))


def test_type_as():
    x = tb.tensor([1.5, 2.5])
    assert x.type_as(tb.tensor([1])).dtype == tb.int64
    assert x.type_as(tb.tensor([1])).tolist() == [1, 2]
    assert x.type_as(tb.zeros(1, dtype=tb.float64)).dtype == tb.float64
    w = tb.ones(2, requires_grad=True)                      # stays in the graph, as torch
    w.type_as(tb.zeros(1, dtype=tb.float64)).sum().backward()
    assert w.grad.tolist() == [1.0, 1.0]


# ***** addcmul / addcdiv / lerp, new / resize_, _grad *****
def test_addcmul_addcdiv_lerp_values_and_gradients_match_torch():
    rng = np.random.default_rng(4)
    a, b, c = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3))
    c = np.abs(c) + 0.5
    np.testing.assert_allclose(tb.addcmul(tb.tensor(a), tb.tensor(b), tb.tensor(c), value=0.5).numpy(),
                               a + 0.5 * b * c, rtol=1e-6)
    np.testing.assert_allclose(tb.tensor(a).addcdiv(tb.tensor(b), tb.tensor(c), value=-2).numpy(),
                               a - 2 * b / c, rtol=1e-6)
    np.testing.assert_allclose(tb.lerp(tb.tensor(a), tb.tensor(b), 0.25).numpy(), a + 0.25 * (b - a),
                               rtol=1e-6)
    t = tb.tensor(a)
    t.addcmul_(tb.tensor(b), tb.tensor(b), value=0.1).addcdiv_(tb.tensor(b), tb.tensor(c)).lerp_(tb.zeros(3), 0.5)
    np.testing.assert_allclose(t.numpy(), (a + 0.1 * b * b + b / c) * 0.5, rtol=1e-6)
    torch = pytest.importorskip("torch")
    ours = [tb.tensor(v, requires_grad=True) for v in (a, b, c)]
    theirs = [torch.tensor(v, requires_grad=True) for v in (a, b, c)]
    for lib, (x, y, z) in ((tb, ours), (torch, theirs)):
        (lib.addcmul(x, y, z, value=0.3) * lib.addcdiv(x, y, z, value=2) + lib.lerp(x, y, z)).sum().backward()
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(o.grad.numpy(), t.grad.numpy(), rtol=1e-5)


def test_legacy_new_resize_and_grad_alias():
    p = tb.ones(2, 3, dtype=tb.float64)
    e = p.new()
    assert e.shape == (0,) and e.dtype == tb.float64
    assert e.resize_as_(p).zero_().tolist() == [[0.0] * 3] * 2
    assert p.new(4).shape == (4,) and p.new((2, 2)).shape == (2, 2)
    assert p.new([1, 2]).tolist() == [1.0, 2.0] and p.new([1, 2]).dtype == tb.float64
    r = tb.arange(6).float().resize_(2, 3)
    assert r.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert r.resize_(4).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(RuntimeError, match="require grad"):
        tb.ones(2, requires_grad=True).resize_(3)
    w, g = tb.ones(2, requires_grad=True), tb.tensor([1.0, 2.0])
    w._grad = g                               # torch's alias of .grad (A3C's ensure_shared_grads)
    assert w.grad is g and w._grad is g

