"""tb.nn.init: bounds and moments of each scheme (PyTorch's formulas), seeding, default inits."""
import math

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn
from tensorbrain.nn import init


def test_calculate_gain_table():
    assert init.calculate_gain("linear") == 1 and init.calculate_gain("conv2d") == 1
    assert init.calculate_gain("sigmoid") == 1
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / (1 + 0.01 ** 2)))
    assert init.calculate_gain("leaky_relu", math.sqrt(5)) == pytest.approx(math.sqrt(1 / 3))
    assert init.calculate_gain("selu") == 0.75
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")


def test_fan_in_fan_out():
    assert init._calculate_fan_in_and_fan_out(tb.empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(tb.empty(8, 4, 3, 3)) == (36, 72)
    with pytest.raises(ValueError, match="fewer than 2"):
        init._calculate_fan_in_and_fan_out(tb.empty(4))


def test_uniform_normal_constant():
    t = tb.empty(200, 300)
    init.uniform_(t, -2, 3)
    assert t._data.min() >= -2 and t._data.max() < 3 and abs(t._data.mean() - 0.5) < 0.02
    init.normal_(t, 1.0, 0.5)
    assert abs(t._data.mean() - 1.0) < 0.01 and abs(t._data.std() - 0.5) < 0.01
    init.constant_(t, 0.25)
    assert (t._data == 0.25).all()
    assert (init.ones_(t)._data == 1).all() and (init.zeros_(t)._data == 0).all()
    np.testing.assert_array_equal(init.eye_(tb.empty(2, 3))._data, np.eye(2, 3))


def test_xavier_and_kaiming_moments():
    t = tb.empty(400, 600)
    init.xavier_uniform_(t, gain=2.0)
    a = 2.0 * math.sqrt(6 / 1000)
    assert t._data.max() <= a and t._data.min() >= -a
    assert t._data.std() == pytest.approx(a / math.sqrt(3), rel=0.02)
    init.xavier_normal_(t)
    assert t._data.std() == pytest.approx(math.sqrt(2 / 1000), rel=0.02)
    init.kaiming_uniform_(t, a=0, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / 600)
    assert t._data.max() <= bound and t._data.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    init.kaiming_normal_(t, mode="fan_out", nonlinearity="relu")
    assert t._data.std() == pytest.approx(math.sqrt(2 / 400), rel=0.02)
    with pytest.raises(ValueError, match="Mode"):
        init.kaiming_normal_(t, mode="fan_avg")


def test_trunc_normal_bounds_and_moments():
    t = tb.empty(400, 250)
    init.trunc_normal_(t, mean=0.0, std=1.0, a=-1.0, b=2.0)
    assert t._data.min() >= -1.0 and t._data.max() <= 2.0
    # mean of N(0,1) truncated to [-1, 2]: (phi(-1) - phi(2)) / (Phi(2) - Phi(-1))
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda x: 0.5 * (1 + math.erf(x / math.sqrt(2)))  # noqa: E731
    expected = (phi(-1) - phi(2)) / (cdf(2) - cdf(-1))
    assert t._data.mean() == pytest.approx(expected, abs=0.01)


def test_orthogonal_and_dirac():
    w = init.orthogonal_(tb.empty(4, 6))
    np.testing.assert_allclose(w._data @ w._data.T, np.eye(4), atol=1e-5)
    conv = nn.Conv2d(3, 3, 3, padding=1, bias=False)
    init.dirac_(conv.weight)
    x = tb.randn(1, 3, 5, 5)
    np.testing.assert_allclose(conv(x)._data, x._data, atol=1e-6)


def test_manual_seed_makes_initialisation_reproducible():
    tb.manual_seed(123)
    a = nn.Sequential(nn.Linear(4, 5), nn.Conv2d(2, 3, 3), nn.Embedding(4, 2))
    tb.manual_seed(123)
    b = nn.Sequential(nn.Linear(4, 5), nn.Conv2d(2, 3, 3), nn.Embedding(4, 2))
    for (k, v), w in zip(a.state_dict().items(), b.state_dict().values()):
        np.testing.assert_array_equal(v._data, w._data, err_msg=k)
    g = tb.Generator().manual_seed(5)
    x, y = tb.empty(3, 3), tb.empty(3, 3)
    init.normal_(x, generator=g)
    init.normal_(y, generator=tb.Generator().manual_seed(5))
    np.testing.assert_array_equal(x._data, y._data)


def test_default_initialisation_is_pytorchs():
    lin = nn.Linear(50, 400)
    bound = 1 / math.sqrt(50)  # kaiming_uniform_(a=sqrt(5)) == U(-1/sqrt(fan_in), 1/sqrt(fan_in))
    assert np.abs(lin.weight._data).max() <= bound
    assert lin.weight._data.std() == pytest.approx(bound / math.sqrt(3), rel=0.03)
    assert np.abs(lin.bias._data).max() <= bound
    conv = nn.Conv2d(4, 64, 3)
    bound = 1 / math.sqrt(36)
    assert np.abs(conv.weight._data).max() <= bound and np.abs(conv.bias._data).max() <= bound
    assert conv.weight._data.std() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    emb = nn.Embedding(1000, 20)
    assert emb.weight._data.std() == pytest.approx(1.0, rel=0.03)
    bn = nn.BatchNorm2d(3)
    assert (bn.weight._data == 1).all() and (bn.bias._data == 0).all()
    assert (bn.running_var._data == 1).all() and bn.num_batches_tracked.item() == 0
    mha = nn.MultiheadAttention(8, 2)
    assert (mha.in_proj_bias._data == 0).all() and (mha.out_proj.bias._data == 0).all()
    assert np.abs(mha.in_proj_weight._data).max() <= math.sqrt(6 / (8 + 24))


def test_init_keeps_parameter_identity_and_leaves_no_graph():
    lin = nn.Linear(3, 3)
    w = lin.weight
    init.kaiming_normal_(lin.weight)
    init.trunc_normal_(lin.bias, std=0.02)
    assert lin.weight is w and w.is_leaf and w.grad_fn is None and w.requires_grad
