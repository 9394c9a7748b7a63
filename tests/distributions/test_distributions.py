"""tb.distributions against torch.distributions (where torch is installed) and closed forms:
log_prob, entropy, KL and their gradients, sample shapes and frequencies, argument checks."""
import math

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.distributions import Bernoulli, Categorical, Normal, kl_divergence

RNG = np.random.default_rng(0)
P = RNG.random((3, 4)).astype(np.float32) + 0.05
LOGITS = RNG.standard_normal((3, 4)).astype(np.float32)


def _leaf(a):
    return tb.tensor(a, requires_grad=True)


def test_categorical_log_prob_entropy_match_closed_forms():
    probs = P / P.sum(-1, keepdims=True)
    value = np.array([0, 3, 2])
    for m in (Categorical(probs=tb.tensor(P)), Categorical(logits=tb.tensor(np.log(P)))):
        assert m.batch_shape == (3,) and m.event_shape == ()
        np.testing.assert_allclose(m.probs.numpy(), probs, rtol=1e-5)
        np.testing.assert_allclose(m.log_prob(tb.tensor(value)).numpy(),
                                   np.log(probs[np.arange(3), value]), rtol=1e-5)
        np.testing.assert_allclose(m.entropy().numpy(), -(probs * np.log(probs)).sum(-1), rtol=1e-5)
        assert m.mode.tolist() == probs.argmax(-1).tolist()
    # a value broadcast against the batch: shape (2, 3)
    m = Categorical(probs=tb.tensor(P))
    assert m.log_prob(tb.tensor([[0], [1]])).shape == (2, 3)


def test_categorical_sample_shapes_and_frequencies():
    tb.manual_seed(0)
    m = Categorical(probs=tb.tensor([0.1, 0.2, 0.7]))
    s = m.sample((20000,))
    assert s.shape == (20000,) and s.dtype == tb.int64
    np.testing.assert_allclose(np.bincount(s.numpy(), minlength=3) / 20000, [0.1, 0.2, 0.7], atol=0.015)
    assert m.sample().shape == ()
    assert Categorical(logits=tb.tensor(LOGITS)).sample((5, 2)).shape == (5, 2, 3)
    assert Categorical(logits=tb.zeros(2, 3)).enumerate_support().shape == (3, 2)


@pytest.mark.parametrize("param", ["probs", "logits"])
def test_categorical_gradients_match_torch(param):
    torch = pytest.importorskip("torch")
    a = P if param == "probs" else LOGITS
    value = [1, 0, 3]
    ours = _leaf(a)
    m = Categorical(**{param: ours})
    (m.log_prob(tb.tensor(value)).sum() + m.entropy().sum()).backward()
    theirs = torch.tensor(a, requires_grad=True)
    mt = torch.distributions.Categorical(**{param: theirs})
    (mt.log_prob(torch.tensor(value)).sum() + mt.entropy().sum()).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_normal_matches_closed_forms_and_torch():
    loc, scale = RNG.standard_normal(5).astype(np.float32), (RNG.random(5) + 0.5).astype(np.float32)
    x = RNG.standard_normal(5).astype(np.float32)
    m = Normal(_leaf(loc), _leaf(scale))
    want = -(x - loc) ** 2 / (2 * scale ** 2) - np.log(scale) - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(m.log_prob(tb.tensor(x)).numpy(force=True), want, rtol=1e-5)
    np.testing.assert_allclose(m.entropy().numpy(force=True), 0.5 + 0.5 * np.log(2 * np.pi) + np.log(scale),
                               rtol=1e-5)
    cdf = 0.5 * (1 + np.vectorize(math.erf)((x - loc) / scale / np.sqrt(2)))
    np.testing.assert_allclose(m.cdf(tb.tensor(x)).numpy(force=True), cdf, rtol=1e-5)
    assert m.batch_shape == (5,) and tb.equal(m.mean, m.loc) and m.stddev is m.scale


def test_normal_gradients_reach_the_leaves_and_match_torch():
    torch = pytest.importorskip("torch")
    loc, scale = _leaf([0.3, -1.0]), _leaf([0.5, 2.0])
    Normal(loc, scale).log_prob(tb.tensor([1.0, 0.0])).sum().backward()
    lt, st = torch.tensor([0.3, -1.0], requires_grad=True), torch.tensor([0.5, 2.0], requires_grad=True)
    torch.distributions.Normal(lt, st).log_prob(torch.tensor([1.0, 0.0])).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), lt.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(scale.grad.numpy(), st.grad.numpy(), rtol=1e-5)


def test_normal_sample_and_rsample():
    tb.manual_seed(1)
    loc, scale = _leaf([1.0, -2.0]), _leaf([0.5, 3.0])
    m = Normal(loc, scale)
    s = m.sample((20000,))
    assert s.shape == (20000, 2) and not s.requires_grad
    np.testing.assert_allclose(s.numpy().mean(0), [1.0, -2.0], atol=0.06)
    np.testing.assert_allclose(s.numpy().std(0), [0.5, 3.0], rtol=0.03)
    r = m.rsample((3,))
    r.sum().backward()                       # d/dloc = 3 draws, d/dscale = sum of the eps
    assert loc.grad.tolist() == [3.0, 3.0]
    eps = (r.detach() - tb.tensor([1.0, -2.0])) / tb.tensor([0.5, 3.0])
    np.testing.assert_allclose(scale.grad.numpy(), eps.sum(0).numpy(), rtol=1e-5)
    assert Normal(0.0, 1.0).sample((4,)).shape == (4,)


def test_bernoulli_matches_closed_forms():
    p = np.array([0.1, 0.5, 0.9], np.float32)
    for m in (Bernoulli(probs=tb.tensor(p)), Bernoulli(logits=tb.tensor(np.log(p / (1 - p))))):
        np.testing.assert_allclose(m.log_prob(tb.tensor([1.0, 0.0, 1.0])).numpy(),
                                   np.log([0.1, 0.5, 0.9]), rtol=1e-5)
        np.testing.assert_allclose(m.entropy().numpy(), -(p * np.log(p) + (1 - p) * np.log(1 - p)),
                                   rtol=1e-5)
    tb.manual_seed(2)
    s = Bernoulli(probs=tb.tensor(p)).sample((20000,))
    np.testing.assert_allclose(s.numpy().mean(0), p, atol=0.015)


def test_kl_divergence_closed_forms():
    p, q = Normal(tb.tensor([0.0, 1.0]), tb.tensor([1.0, 2.0])), Normal(tb.tensor([1.0, 1.0]), tb.tensor([2.0, 1.0]))
    want = np.log([2.0, 0.5]) + (np.array([1.0, 4.0]) + np.array([1.0, 0.0])) / (2 * np.array([4.0, 1.0])) - 0.5
    np.testing.assert_allclose(kl_divergence(p, q).numpy(), want, rtol=1e-5)
    a, b = np.array([0.2, 0.3, 0.5]), np.array([0.5, 0.25, 0.25])
    np.testing.assert_allclose(kl_divergence(Categorical(probs=tb.tensor(a)), Categorical(probs=tb.tensor(b))).item(),
                               (a * np.log(a / b)).sum(), rtol=1e-5)
    np.testing.assert_allclose(
        kl_divergence(Bernoulli(probs=tb.tensor([0.3])), Bernoulli(probs=tb.tensor([0.6]))).item(),
        0.3 * np.log(0.3 / 0.6) + 0.7 * np.log(0.7 / 0.4), rtol=1e-5)
    with pytest.raises(NotImplementedError, match="register_kl"):
        kl_divergence(p, Categorical(probs=tb.tensor(a)))


def test_invalid_arguments_are_refused_as_torch():
    with pytest.raises(ValueError, match="not both"):
        Categorical(probs=tb.ones(2), logits=tb.ones(2))
    with pytest.raises(ValueError, match="constraint"):
        Categorical(probs=tb.tensor([0.5, -0.1]))
    with pytest.raises(ValueError, match="constraint"):
        Categorical(probs=tb.ones(3)).log_prob(tb.tensor(3))
    with pytest.raises(ValueError, match="constraint"):
        Normal(tb.zeros(2), tb.tensor([1.0, 0.0]))
    with pytest.raises(ValueError, match="constraint"):
        Bernoulli(probs=tb.tensor([1.2]))
    Normal(tb.zeros(2), tb.tensor([1.0, 0.0]), validate_args=False)   # opting out works


def test_reinforce_step_matches_torch():
    """The policy-gradient idiom: Categorical(probs) from a softmax, log_prob of sampled actions
    times normalised returns, summed; the gradient matches torch's for the same weights."""
    torch = pytest.importorskip("torch")
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    x = RNG.standard_normal((6, 4)).astype(np.float32)
    actions, returns = [0, 2, 1, 1, 0, 2], RNG.standard_normal(6).astype(np.float32)
    grads = []
    for lib, dist in ((tb, tb.distributions), (torch, torch.distributions)):
        wt = lib.tensor(w, requires_grad=True)
        probs = lib.nn.functional.softmax(lib.tensor(x) @ wt, dim=1)
        m = dist.Categorical(probs)
        r = lib.tensor(returns)
        r = (r - r.mean()) / (r.std() + np.finfo(np.float32).eps.item())
        loss = (-m.log_prob(lib.tensor(actions)) * r).sum()
        loss.backward()
        grads.append(wt.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("name", ["Gamma", "Beta"])
def test_gamma_beta_match_torch(name):
    """log_prob, entropy, mean, variance, mode and their gradients against torch's; samples
    have the right moments."""
    torch = pytest.importorskip("torch")
    a0, b0 = np.array([0.7, 2.0, 9.0]), np.array([1.5, 0.4, 3.0])
    x0 = np.array([0.2, 0.5, 0.9])
    res = []
    for lib in (tb, torch):
        a, b = lib.tensor(a0, requires_grad=True), lib.tensor(b0, requires_grad=True)
        m = getattr(lib.distributions, name)(a, b)
        outs = [m.log_prob(lib.tensor(x0)), m.entropy(), m.mean, m.variance, m.mode]
        sum(o.sum() for o in outs[:4]).backward()
        res.append([o.detach().numpy() for o in outs] + [a.grad.numpy(), b.grad.numpy()])
    for got, want in zip(*res):
        np.testing.assert_allclose(got, want, rtol=1e-8)
    tb.manual_seed(0)
    m = getattr(tb.distributions, name)(tb.tensor([2.0]), tb.tensor([3.0]))
    s = m.sample((20000,)).numpy()
    assert s.shape == (20000, 1) and not m.sample().requires_grad
    np.testing.assert_allclose(s.mean(), m.mean.item(), rtol=0.03)
    np.testing.assert_allclose(s.var(), m.variance.item(), rtol=0.06)
    assert isinstance(getattr(tb.distributions, name.lower()), type(tb.distributions))
    with pytest.raises(ValueError, match="constraint"):
        getattr(tb.distributions, name)(tb.tensor([1.0]), tb.tensor([-1.0]))


def test_gamma_rsample_gradient_is_torchs_implicit_gradient():
    """d sample / d concentration at a fixed CDF: against torch._standard_gamma_grad (a fitted
    approximation, so 2e-3) and against finite differences of SciPy's gammainc (tight)."""
    torch = pytest.importorskip("torch")
    from tensorbrain.distributions.gamma import standard_gamma_grad
    rng = np.random.default_rng(1)
    for a in (0.05, 0.6, 1.0, 3.5, 40.0, 2000.0):
        x = np.maximum(rng.standard_gamma(a, 500), 1e-30)
        got = standard_gamma_grad(x, np.full_like(x, a))
        want = torch._standard_gamma_grad(torch.full((500,), a, dtype=torch.float64),
                                          torch.tensor(x)).numpy()
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=1e-12)
    sp = pytest.importorskip("scipy.special")
    a, x, h = 2.5, np.array([0.3, 2.0, 6.0]), 1e-6
    pdf = np.exp((a - 1) * np.log(x) - x - sp.gammaln(a))
    fd = -(sp.gammainc(a + h, x) - sp.gammainc(a - h, x)) / (2 * h) / pdf
    np.testing.assert_allclose(standard_gamma_grad(x, np.full(3, a)), fd, rtol=1e-6)
    # through rsample: x = X / rate, so dx/drate = -x / rate, dx/dconc = grad / rate
    tb.manual_seed(3)
    c, r = tb.tensor([2.5], requires_grad=True), tb.tensor([2.0], requires_grad=True)
    s = tb.distributions.Gamma(c, r).rsample((4,))
    s.sum().backward()
    sv = s.detach().numpy()[:, 0]
    np.testing.assert_allclose(r.grad.item(), (-sv / 2.0).sum(), rtol=1e-6)
    np.testing.assert_allclose(c.grad.item(), (standard_gamma_grad(sv * 2.0, np.full(4, 2.5))
                                                / 2.0).sum(), rtol=1e-5)


def test_beta_rsample_expected_gradient():
    """E[x] = a / (a + b): the mean of many rsamples' gradients matches d/da, d/db of it."""
    tb.manual_seed(0)
    a, b = tb.tensor([2.0], requires_grad=True), tb.tensor([3.0], requires_grad=True)
    tb.distributions.Beta(a, b).rsample((40000,)).mean().backward()
    np.testing.assert_allclose(a.grad.item(), 3.0 / 25.0, rtol=0.05)
    np.testing.assert_allclose(b.grad.item(), -2.0 / 25.0, rtol=0.05)
