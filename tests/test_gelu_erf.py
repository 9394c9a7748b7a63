"""The float32 erf (a rational approximation in cache-sized chunks) and the exact GELU built on
it: against math.erf in float64 always, and against torch where it is installed."""
import math

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain._ops.erf import _erf, _erf_f32


def test_float32_erf_within_5e_7_of_float64_everywhere():
    x = np.concatenate([np.linspace(-6, 6, 200001), [0.0, -0.0, 1e-30, -1e-30, 3.99, 4.0, 4.5]])
    x32 = x.astype(np.float32)
    ref = np.array([math.erf(v) for v in x32.astype(np.float64)])
    got = _erf_f32(x32)
    assert got.dtype == np.float32 and got.shape == x32.shape
    assert np.abs(got - ref).max() < 5e-7
    assert _erf_f32(np.array([np.inf, -np.inf, np.nan], np.float32)).tolist()[:2] == [1.0, -1.0]
    assert np.isnan(_erf_f32(np.array([np.nan], np.float32))[0])


def test_chunk_boundaries_and_shapes():
    x = np.random.default_rng(0).standard_normal((3, 70000)).astype(np.float32)   # > 1 chunk
    ref = np.vectorize(math.erf)(x.astype(np.float64))
    np.testing.assert_allclose(_erf(x), ref, atol=5e-7, rtol=0)
    assert _erf(np.float32(0.5) * np.ones((2, 3), np.float32)).shape == (2, 3)


def test_float64_erf_stays_exact():
    x = np.linspace(-3, 3, 101)
    np.testing.assert_allclose(_erf(x), [math.erf(v) for v in x], rtol=1e-15, atol=1e-16)


def test_gelu_float32_against_float64_formula_and_grad():
    x = np.random.default_rng(1).standard_normal(5000).astype(np.float32) * 3
    t = tb.tensor(x, requires_grad=True)
    y = F.gelu(t)
    y.backward(tb.ones(5000))
    x64 = x.astype(np.float64)
    cdf = 0.5 * (1 + np.vectorize(math.erf)(x64 / math.sqrt(2)))
    np.testing.assert_allclose(y.detach().numpy(), x64 * cdf, rtol=2e-6, atol=2e-6)
    pdf = np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(t.grad.numpy(), cdf + x64 * pdf, rtol=2e-6, atol=2e-6)


def test_gelu_against_torch():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((8, 128, 64)).astype(np.float32) * 2
    ours = F.gelu(tb.tensor(x)).numpy()
    theirs = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=2e-6)   # 1+erf cancels for x << 0
