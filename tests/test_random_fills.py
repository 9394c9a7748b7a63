"""In-place random fills (random_, exponential_, geometric_, log_normal_, cauchy_, and the
uniform_/normal_/bernoulli_ already there): the distributions' quantiles against their closed
forms and, when torch is installed, against torch's own draws; torch's argument rules."""
import math

import numpy as np
import pytest

import tensorbrain as tb

N = 200_000
QS = np.array([0.05, 0.25, 0.5, 0.75, 0.95])


def _quantiles(t):
    return np.quantile(t.numpy().astype(np.float64), QS)


CASES = {
    # name, args, closed-form quantile function
    "exponential_": ((2.0,), lambda q: -np.log1p(-q) / 2.0),
    "log_normal_": ((0.5, 0.25), lambda q: np.exp(0.5 + 0.25 * math.sqrt(2) * _erfinv(2 * q - 1))),
    "cauchy_": ((1.0, 2.0), lambda q: 1.0 + 2.0 * np.tan(math.pi * (q - 0.5))),
    "uniform_": ((-1.0, 3.0), lambda q: -1.0 + 4.0 * q),
    "normal_": ((1.0, 2.0), lambda q: 1.0 + 2.0 * math.sqrt(2) * _erfinv(2 * q - 1)),
}


def _erfinv(y):
    # Newton on math.erf: exact enough for quantile references
    y = np.asarray(y, dtype=np.float64)
    x = np.zeros_like(y)
    for _ in range(60):
        x = x - (np.vectorize(math.erf)(x) - y) / (2 / math.sqrt(math.pi) * np.exp(-x * x))
    return x


@pytest.mark.parametrize("name", sorted(CASES))
def test_continuous_fills_follow_their_distribution(name):
    args, ppf = CASES[name]
    tb.manual_seed(0)
    t = tb.empty(N, dtype=tb.float64)
    assert getattr(t, name)(*args) is t
    got = _quantiles(t)
    # a sample quantile's standard error: sqrt(q (1 - q) / N) / density = ... * ppf'(q)
    slope = (ppf(QS + 1e-6) - ppf(QS - 1e-6)) / 2e-6
    se = np.sqrt(QS * (1 - QS) / N) * slope
    assert np.all(np.abs(got - ppf(QS)) < 5 * se), (got, ppf(QS), se)
    torch = pytest.importorskip("torch")
    ref = np.quantile(getattr(torch.empty(N, dtype=torch.float64), name)(*args).numpy(), QS)
    assert np.all(np.abs(got - ref) < 5 * np.sqrt(2) * se), (got, ref, se)


def test_geometric_counts_trials_from_one():
    tb.manual_seed(0)
    t = tb.empty(N).geometric_(0.3)
    v = t.numpy()
    assert v.min() == 1 and t.dtype == tb.float32
    for k in (1, 2, 3):
        assert abs((v == k).mean() - 0.7 ** (k - 1) * 0.3) < 0.01
    torch = pytest.importorskip("torch")
    r = torch.empty(N).geometric_(0.3).numpy()
    assert r.min() == 1 and abs(r.mean() - v.mean()) < 0.05   # both 1/p


def test_random_ranges_follow_torch():
    tb.manual_seed(0)
    v = tb.empty(10_000, dtype=tb.int64).random_(3, 7).numpy()
    assert set(np.unique(v)) == {3, 4, 5, 6}
    v = tb.empty(10_000).random_(5).numpy()
    assert set(np.unique(v)) == {0, 1, 2, 3, 4}
    v = tb.empty(10_000, dtype=tb.uint8).random_().numpy()
    assert v.min() == 0 and v.max() == 255
    v = tb.zeros(1000, dtype=tb.bool).random_().numpy()
    assert set(np.unique(v)) == {False, True}
    v = tb.empty(10_000, dtype=tb.float16).random_().numpy()
    assert v.min() >= 0 and v.max() <= 2 ** 11 and np.all(v == np.round(v))
    v = tb.empty(10_000, dtype=tb.int8).random_(-5, None).numpy()
    assert v.min() == -5 and v.max() > 100
    v = tb.empty(100, dtype=tb.int64).random_(**{"from": 2, "to": 4}).numpy()
    assert set(np.unique(v)) <= {2, 3}
    torch = pytest.importorskip("torch")
    assert set(np.unique(torch.empty(10_000).random_(5).numpy())) == {0, 1, 2, 3, 4}
    r = torch.empty(10_000, dtype=torch.float16).random_().numpy()
    assert r.max() <= 2 ** 11


def test_fills_refuse_bad_arguments_as_torch():
    with pytest.raises(RuntimeError, match="lambda > 0"):
        tb.empty(3).exponential_(0.0)
    with pytest.raises(RuntimeError, match=r"p to be in \(0, 1\)"):
        tb.empty(3).geometric_(1.5)
    with pytest.raises(RuntimeError, match="from=5 >= to=2"):
        tb.empty(3).random_(5, 2)
    with pytest.raises(RuntimeError, match="floating point"):
        tb.zeros(3, dtype=tb.int64).cauchy_()
    torch = pytest.importorskip("torch")
    for call in (lambda: torch.empty(3).exponential_(0.0), lambda: torch.empty(3).random_(5, 2)):
        with pytest.raises(RuntimeError):
            call()


def test_fills_take_a_generator_and_bump_the_version():
    a = tb.empty(5).exponential_(generator=tb.Generator().manual_seed(3))
    b = tb.empty(5).exponential_(generator=tb.Generator().manual_seed(3))
    assert tb.equal(a, b)
    t = tb.empty(4)
    v = t._version[0]
    t.cauchy_()
    assert t._version[0] == v + 1
    w = tb.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable"):
        w.exponential_()
    with tb.no_grad():
        w.log_normal_()   # an initialiser's form
    assert (w.detach().numpy() > 0).all()
