"""Layers added for real programs: finite differences always, torch where installed."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn
from tensorbrain.nn import functional as F
from tensorbrain.testing import gradcheck

RNG = np.random.default_rng(2)


def _tf(name, *args, **kw):
    """``torch.nn.functional.<name>`` bound to ``args``/``kw``, or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    fn = getattr(torch.nn.functional, name)
    return lambda *xs: fn(*xs, *args, **kw)


def _away_from_kinks(shape, kinks):
    x = RNG.standard_normal(shape) * 3
    for k in kinks:
        x[np.abs(x - k) < 1e-3] += 0.01
    return x


@pytest.mark.parametrize("name,kinks", [("mish", []), ("hardswish", [-3, 3]),
                                        ("hardsigmoid", [-3, 3])])
def test_activations(name, kinks):
    x = _away_from_kinks((4, 5), kinks)
    np_ref = {"mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
              "hardswish": lambda x: x * np.clip(x + 3, 0, 6) / 6,
              "hardsigmoid": lambda x: np.clip(x + 3, 0, 6) / 6}[name]
    gradcheck(getattr(F, name), [x], numpy_fn=np_ref, torch_fn=_tf(name))


@pytest.mark.parametrize("shape,channels", [((4, 3, 2), 3), ((5,), 1), ((2, 3), 1),
                                            ((2, 4, 3, 3), 4)])
def test_prelu(shape, channels):
    x = _away_from_kinks(shape, [0])
    w = RNG.random(channels)
    gradcheck(F.prelu, [x, w], torch_fn=_tf("prelu"))


@pytest.mark.parametrize("weight", [True, False])
def test_rms_norm(weight):
    x = RNG.standard_normal((3, 2, 4))
    inputs = [x] + ([RNG.standard_normal((2, 4))] if weight else [])
    def fn(x, w=None):
        return (F.rms_norm(x, (2, 4), w, 1e-5))
    tfn = None
    try:
        import torch
        def tfn(x, w=None):
            return (torch.nn.functional.rms_norm(x, (2, 4), w, 1e-5))
    except ImportError:
        pass
    def ref(x, w=None):
        return x / np.sqrt((x * x).mean(axis=(1, 2), keepdims=True) + 1e-5) * \
            (1 if w is None else w)
    gradcheck(fn, inputs, numpy_fn=ref, torch_fn=tfn)


def test_rmsnorm_module_loads_torch_state_dict():
    torch = pytest.importorskip("torch")
    tm = torch.nn.RMSNorm([3])
    with torch.no_grad():
        tm.weight.uniform_()
    m = nn.RMSNorm([3])
    m.load_state_dict({k: tb.tensor(v.numpy()) for k, v in tm.state_dict().items()})
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_allclose(m(tb.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cls,shape", [(nn.Dropout1d, (4, 6, 50)), (nn.Dropout1d, (6, 50)),
                                       (nn.Dropout2d, (4, 6, 5, 10)),
                                       (nn.Dropout3d, (4, 6, 2, 5, 5)),
                                       (nn.Dropout3d, (6, 2, 5, 5))])
def test_channel_dropout_zeroes_whole_channels(cls, shape):
    tb.manual_seed(0)
    layer = cls(0.5)
    x = tb.tensor(RNG.random(shape).astype(np.float32) + 1, requires_grad=True)
    y = layer(x)
    spatial = {nn.Dropout1d: 1, nn.Dropout2d: 2, nn.Dropout3d: 3}[cls]
    ch = y.detach().numpy().reshape(int(np.prod(shape[:-spatial])), -1)   # one row per channel
    zero = (ch == 0).all(axis=1)
    kept = ch[~zero] / x.detach().numpy().reshape(ch.shape)[~zero]
    assert zero.any() and (~zero).any()
    np.testing.assert_allclose(kept, 2.0, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy().reshape(ch.shape)[zero], 0)
    layer.eval()
    assert layer(x) is x


def test_dropout_finite_differences_with_fixed_seed():
    def fn(x):
        tb.manual_seed(1)
        return F.dropout2d(x, 0.4) + F.alpha_dropout(x, 0.3, training=True) + \
            F.feature_alpha_dropout(x, 0.2, training=True)
    gradcheck(fn, [RNG.standard_normal((2, 3, 2, 2))])


def test_alpha_dropout_keeps_mean_and_variance():
    tb.manual_seed(0)
    x = tb.randn(200000)
    y = nn.AlphaDropout(0.2).train()(x)
    assert abs(float(y.mean())) < 0.02 and abs(float(y.std()) - 1) < 0.02
    assert float(F.alpha_dropout(x, 1.0, training=True).abs().sum()) == 0


def test_embedding_max_norm_matches_torch():
    torch = pytest.importorskip("torch")
    w = RNG.standard_normal((10, 4)).astype(np.float32) * 3
    idx = np.array([[1, 2, 2], [7, 0, 1]])
    tm = torch.nn.Embedding(10, 4, max_norm=1.0, padding_idx=0)
    m = nn.Embedding(10, 4, max_norm=1.0, padding_idx=0)
    with torch.no_grad():
        tm.weight.copy_(torch.tensor(w))
    m.load_state_dict({"weight": tb.tensor(w)})
    out, tout = m(tb.tensor(idx)), tm(torch.tensor(idx))
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(m.weight.detach().numpy(), tm.weight.detach().numpy(), rtol=1e-5)


BAG_CASES = [
    dict(mode="sum"), dict(mode="mean"), dict(mode="max"),
    dict(mode="sum", per_sample_weights=True), dict(mode="mean", padding_idx=2),
    dict(mode="sum", include_last_offset=True), dict(mode="mean", two_d=True),
]


@pytest.mark.parametrize("case", BAG_CASES)
def test_embedding_bag(case):
    case = dict(case)
    two_d, psw = case.pop("two_d", False), case.pop("per_sample_weights", False)
    w = RNG.standard_normal((6, 3))
    if two_d:
        idx, offsets = np.array([[1, 2, 4], [5, 2, 0]]), None
    else:
        idx = np.array([1, 2, 4, 5, 4, 2, 3])
        offsets = np.array([0, 2, 2, 5] + ([7] if case.get("include_last_offset") else []))
    inputs = [w] + ([RNG.random(idx.size)] if psw else [])

    def fn(w, p=None):
        return F.embedding_bag(tb.tensor(idx), w, None if offsets is None else tb.tensor(offsets),
                               per_sample_weights=p, **case)
    tfn = None
    try:
        import torch

        def tfn(w, p=None):
            return torch.nn.functional.embedding_bag(
                torch.tensor(idx), w, None if offsets is None else torch.tensor(offsets),
                per_sample_weights=p, **case)
    except ImportError:
        pass
    gradcheck(fn, inputs, torch_fn=tfn)


def test_embedding_bag_module_and_errors():
    bag = nn.EmbeddingBag(5, 2, mode="max")
    assert tuple(bag(tb.tensor([[0, 1], [2, 3]])).shape) == (2, 2)
    with pytest.raises(NotImplementedError, match="per_sample_weights"):
        bag(tb.tensor([[0, 1]]), per_sample_weights=tb.ones(2))
    with pytest.raises(ValueError, match="offsets has to be None"):
        bag(tb.tensor([[0, 1]]), tb.tensor([0]))
    with pytest.raises(IndexError, match="out of range"):
        bag(tb.tensor([[0, 7]]))


def test_new_modules_match_torch_reprs_and_state_dicts():
    torch = pytest.importorskip("torch")
    pairs = [(nn.PReLU(3), torch.nn.PReLU(3)), (nn.Softplus(2.0), torch.nn.Softplus(2.0)),
             (nn.Hardswish(), torch.nn.Hardswish()), (nn.Mish(), torch.nn.Mish()),
             (nn.Dropout2d(0.3), torch.nn.Dropout2d(0.3)),
             (nn.AlphaDropout(0.1), torch.nn.AlphaDropout(0.1)),
             (nn.EmbeddingBag(5, 2, mode="sum"), torch.nn.EmbeddingBag(5, 2, mode="sum"))]
    for ours, theirs in pairs:
        assert repr(ours) == repr(theirs)
        ours.load_state_dict({k: tb.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    np.testing.assert_allclose(pairs[0][0](tb.tensor(x)).detach().numpy(),
                               pairs[0][1](torch.tensor(x)).detach().numpy(), rtol=1e-6)


def test_clip_grad_helpers_exist():
    p = nn.Parameter(tb.zeros(3))
    p.grad = tb.tensor([3.0, -4.0, 0.0])
    nn.utils.clip_grad_value_([p], 1.0)
    assert p.grad.tolist() == [1.0, -1.0, 0.0]


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch_and_finite_differences(dim):
    conv_like = nn.Linear(4, 3).double()
    m = nn.utils.weight_norm(conv_like, dim=dim)
    names = [n for n, _ in m.named_parameters()]
    assert sorted(names) == ["bias", "weight_g", "weight_v"]
    params = [p.detach().numpy().copy() for _, p in m.named_parameters()]

    def fn(x, *ps):
        for n, p in zip(names, ps, strict=True):
            m._parameters[n] = p
        return m(x)
    tfn = None
    try:
        import torch
        tm = torch.nn.utils.weight_norm(torch.nn.Linear(4, 3).double(), dim=dim)
        assert sorted(n for n, _ in tm.named_parameters()) == sorted(names)

        def tfn(x, *ps):
            return torch.func.functional_call(tm, dict(zip(names, ps, strict=True)), (x,))
    except ImportError:
        pass
    gradcheck(fn, [RNG.standard_normal((2, 4)), *params], torch_fn=tfn)
    w = m.weight.detach().numpy()
    nn.utils.remove_weight_norm(m)
    assert sorted(n for n, _ in m.named_parameters()) == ["bias", "weight"]
    np.testing.assert_allclose(m.weight.detach().numpy(), w)


def test_parametrizations_weight_norm_matches_torch_and_orthogonal_is_refused():
    torch = pytest.importorskip("torch")
    w = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    outs = []
    for lib in (tb, torch):
        m = lib.nn.Linear(4, 3)
        with lib.no_grad():
            m.weight.copy_(lib.tensor(w))
            m.bias.zero_()
        lib.nn.utils.parametrizations.weight_norm(m)
        y = m(lib.ones(2, 4))
        y.sum().backward()
        outs.append((sorted(m.state_dict()), y.detach().numpy(),
                     m.parametrizations.weight.original0.grad.numpy(),
                     m.parametrizations.weight.original1.grad.numpy()))
    assert outs[0][0] == outs[1][0]
    for a, b in zip(outs[0][1:], outs[1][1:]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(NotImplementedError, match="orthogonal is not supported"):
        nn.utils.parametrizations.orthogonal(nn.Linear(2, 2))


def test_embedding_scale_grad_by_freq_matches_torch():
    # not the gradient of the lookup (rows are scaled by 1/frequency), so torch is the reference
    torch = pytest.importorskip("torch")
    idx = np.array([[1, 2, 2], [3, 2, 1]])
    w, g = RNG.standard_normal((5, 3)), RNG.standard_normal((2, 3, 3))
    m = nn.Embedding(5, 3, scale_grad_by_freq=True).double()
    m.load_state_dict({"weight": tb.tensor(w)})
    m(tb.tensor(idx)).backward(tb.tensor(g))
    tw = torch.tensor(w, requires_grad=True)
    torch.nn.functional.embedding(torch.tensor(idx), tw, scale_grad_by_freq=True).backward(
        torch.tensor(g))
    np.testing.assert_allclose(m.weight.grad.numpy(), tw.grad.numpy(), atol=1e-12)



def test_multihead_attention_out_proj_is_torchs_class():
    m = nn.MultiheadAttention(4, 2)
    cls = nn.modules.linear.NonDynamicallyQuantizableLinear
    assert type(m.out_proj) is cls and isinstance(m.out_proj, nn.Linear)
    torch = pytest.importorskip("torch")
    assert type(torch.nn.MultiheadAttention(4, 2).out_proj).__qualname__ == cls.__qualname__
