"""Every layer's forward and backward against a reference.

NumPy references run everywhere; where torch is installed, each layer is also compared with the
same torch layer after copying our weights into it (tests skip cleanly without torch).
"""
import math
import subprocess
import sys

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import nn

RNG = np.random.default_rng(0)


def randn(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def leaf(arr):
    return tb.tensor(arr, requires_grad=True)


# ***** NumPy references (run without torch) *****
def test_linear_forward_backward_numpy():
    lin = nn.Linear(5, 3)
    x, g = randn(4, 5), randn(4, 3)
    xt = leaf(x)
    out = lin(xt)
    w, b = lin.weight._data, lin.bias._data
    np.testing.assert_allclose(out._data, x @ w.T + b, rtol=1e-5, atol=1e-6)
    out.backward(tb.tensor(g))
    np.testing.assert_allclose(xt.grad._data, g @ w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lin.weight.grad._data, g.T @ x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(lin.bias.grad._data, g.sum(0), rtol=1e-5, atol=1e-6)
    assert nn.Linear(2, 2, bias=False).bias is None


def _conv2d_ref(x, w, b, stride, pad):
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            out[:, :, i, j] = np.einsum("nckl,ockl->no", patch, w)
    return out + b[None, :, None, None]


def test_conv2d_forward_and_weight_grad_numpy():
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1)
    x = randn(2, 2, 7, 7)
    out = conv(tb.tensor(x))
    ref = _conv2d_ref(x, conv.weight._data, conv.bias._data, 2, 1)
    np.testing.assert_allclose(out._data, ref, rtol=1e-4, atol=1e-5)
    # d(sum(out * g))/dw by central differences on a few weight entries
    g = randn(*out.shape)
    (out * tb.tensor(g)).sum().backward()
    w = conv.weight._data.astype(np.float64)
    for idx in [(0, 0, 0, 0), (2, 1, 1, 2), (1, 0, 2, 1)]:
        wp, wm = w.copy(), w.copy()
        wp[idx] += 1e-3
        wm[idx] -= 1e-3
        num = ((_conv2d_ref(x, wp, conv.bias._data, 2, 1) - _conv2d_ref(x, wm, conv.bias._data, 2, 1))
               * g).sum() / 2e-3
        assert conv.weight.grad._data[idx] == pytest.approx(num, rel=1e-3, abs=1e-3)
    np.testing.assert_allclose(conv.bias.grad._data, g.sum((0, 2, 3)), rtol=1e-5, atol=1e-5)


def test_conv2d_padding_same_and_valid_and_errors():
    x = tb.randn(1, 2, 6, 6)
    assert nn.Conv2d(2, 4, 3, padding="same")(x).shape == (1, 4, 6, 6)
    assert nn.Conv2d(2, 4, 3, padding="valid")(x).shape == (1, 4, 4, 4)
    assert nn.Conv2d(2, 4, 3, groups=2)(x).shape == (1, 4, 4, 4)
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(2, 2, 3, stride=2, padding="same")


def test_batchnorm2d_training_eval_and_running_stats_numpy():
    bn = nn.BatchNorm2d(3, momentum=0.2)
    x = randn(4, 3, 5, 5) * 2 + 1
    out = bn(tb.tensor(x))
    mu = x.mean((0, 2, 3))
    var = x.var((0, 2, 3))
    ref = (x - mu[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(out._data, ref, rtol=1e-4, atol=1e-4)
    n = x.size // 3
    np.testing.assert_allclose(bn.running_mean._data, 0.2 * mu, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var._data, 0.8 + 0.2 * var * n / (n - 1), rtol=1e-5)
    assert int(bn.num_batches_tracked.item()) == 1
    bn.eval()
    out = bn(tb.tensor(x))
    ref = (x - bn.running_mean._data[None, :, None, None]) / np.sqrt(
        bn.running_var._data[None, :, None, None] + 1e-5)
    np.testing.assert_allclose(out._data, ref, rtol=1e-4, atol=1e-4)
    assert int(bn.num_batches_tracked.item()) == 1  # eval does not count batches


def test_batchnorm_momentum_none_is_a_cumulative_average():
    bn = nn.BatchNorm1d(2, momentum=None)
    batches = [randn(8, 2) + i for i in range(3)]
    for b in batches:
        bn(tb.tensor(b))
    np.testing.assert_allclose(bn.running_mean._data, np.mean([b.mean(0) for b in batches], 0),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var._data,
                               np.mean([b.var(0, ddof=1) for b in batches], 0), rtol=1e-5)
    assert int(bn.num_batches_tracked.item()) == 3


def test_batchnorm_without_running_stats_and_input_checks():
    bn = nn.BatchNorm1d(2, track_running_stats=False, affine=False)
    assert bn.running_mean is None and list(bn.state_dict()) == []
    bn.eval()  # no running stats: batch statistics even in eval, as in PyTorch
    x = randn(6, 2)
    np.testing.assert_allclose(bn(tb.tensor(x))._data, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5),
                               rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(2)(tb.randn(2, 2))


def test_layernorm_and_groupnorm_numpy():
    x = randn(2, 4, 3, 3)
    ln = nn.LayerNorm([3, 3])
    mu, var = x.mean((2, 3), keepdims=True), x.var((2, 3), keepdims=True)
    np.testing.assert_allclose(ln(tb.tensor(x))._data, (x - mu) / np.sqrt(var + 1e-5), rtol=1e-4,
                               atol=1e-4)
    gn = nn.GroupNorm(2, 4)
    xg = x.reshape(2, 2, -1)
    ref = ((xg - xg.mean(2, keepdims=True)) / np.sqrt(xg.var(2, keepdims=True) + 1e-5))
    np.testing.assert_allclose(gn(tb.tensor(x))._data, ref.reshape(x.shape), rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="divisible"):
        nn.GroupNorm(3, 4)


def test_embedding_lookup_grad_and_padding_idx():
    emb = nn.Embedding(6, 3, padding_idx=1)
    np.testing.assert_array_equal(emb.weight._data[1], 0)
    idx = np.array([[0, 1, 4], [4, 4, 2]])
    out = emb(tb.tensor(idx))
    np.testing.assert_array_equal(out._data, emb.weight._data[idx])
    out.sum().backward()
    counts = np.bincount(idx.ravel(), minlength=6).astype(np.float32)
    counts[1] = 0  # the padding row gets no gradient
    np.testing.assert_allclose(emb.weight.grad._data, np.repeat(counts[:, None], 3, 1))
    frozen = nn.Embedding.from_pretrained(tb.ones(2, 2))
    assert not frozen.weight.requires_grad


def test_dropout_train_scales_and_eval_is_identity():
    tb.manual_seed(0)
    d = nn.Dropout(0.25)
    x = tb.ones(100_000)
    y = d(x)._data
    kept = y != 0
    assert abs(kept.mean() - 0.75) < 0.01
    np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
    d.eval()
    assert d(x) is x or np.array_equal(d(x)._data, x._data)
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)


def test_pooling_numpy():
    x = randn(2, 3, 6, 6)
    np.testing.assert_allclose(nn.MaxPool2d(2)(tb.tensor(x))._data,
                               x.reshape(2, 3, 3, 2, 3, 2).max((3, 5)))
    np.testing.assert_allclose(nn.AvgPool2d(3)(tb.tensor(x))._data,
                               x.reshape(2, 3, 2, 3, 2, 3).mean((3, 5)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.AdaptiveAvgPool2d(1)(tb.tensor(x))._data,
                               x.mean((2, 3), keepdims=True), rtol=1e-5, atol=1e-6)


def test_activations_numpy():
    x = randn(4, 5)
    t = tb.tensor(x)
    np.testing.assert_allclose(nn.ReLU()(t)._data, np.maximum(x, 0))
    np.testing.assert_allclose(nn.Tanh()(t)._data, np.tanh(x), rtol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(t)._data, 1 / (1 + np.exp(-x)), rtol=1e-6)
    np.testing.assert_allclose(nn.SiLU()(t)._data, x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(nn.GELU()(t)._data, 0.5 * x * (1 + erf(x / math.sqrt(2))),
                               rtol=1e-4, atol=1e-5)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(nn.Softmax(dim=1)(t)._data, e / e.sum(1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(nn.LogSoftmax(dim=1)(t)._data,
                               np.log(e / e.sum(1, keepdims=True)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(nn.LeakyReLU(0.1)(t)._data, np.where(x > 0, x, 0.1 * x), rtol=1e-6)
    assert nn.Identity(3, k=4)(t) is t
    assert nn.Flatten()(tb.zeros(2, 3, 4)).shape == (2, 12)
    assert nn.Unflatten(1, (3, 4))(tb.zeros(2, 12)).shape == (2, 3, 4)


def test_losses_numpy():
    logits, target = randn(6, 4), np.array([0, 3, 1, 1, 2, 0])
    logp = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    ce = nn.CrossEntropyLoss()(leaf(logits), tb.tensor(target))
    assert ce.item() == pytest.approx(-logp[np.arange(6), target].mean(), rel=1e-5)
    assert nn.NLLLoss(reduction="sum")(tb.tensor(logp), tb.tensor(target)).item() == \
        pytest.approx(-logp[np.arange(6), target].sum(), rel=1e-5)
    w = np.array([1.0, 2.0, 0.5, 1.0], np.float32)
    wce = nn.CrossEntropyLoss(weight=tb.tensor(w))(tb.tensor(logits), tb.tensor(target))
    ref = -(w[target] * logp[np.arange(6), target]).sum() / w[target].sum()
    assert wce.item() == pytest.approx(ref, rel=1e-5)
    a, b = randn(3, 2), randn(3, 2)
    assert nn.MSELoss()(tb.tensor(a), tb.tensor(b)).item() == pytest.approx(((a - b) ** 2).mean(),
                                                                             rel=1e-5)
    assert nn.L1Loss(reduction="sum")(tb.tensor(a), tb.tensor(b)).item() == \
        pytest.approx(np.abs(a - b).sum(), rel=1e-5)
    y = (b > 0).astype(np.float32)
    bce = np.mean(np.maximum(a, 0) - a * y + np.log1p(np.exp(-np.abs(a))))
    assert nn.BCEWithLogitsLoss()(tb.tensor(a), tb.tensor(y)).item() == pytest.approx(bce, rel=1e-5)
    np.testing.assert_allclose(nn.MSELoss(reduction="none")(tb.tensor(a), tb.tensor(b))._data,
                               (a - b) ** 2, rtol=1e-6)
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss(reduction="avg")


def test_cross_entropy_grad_numpy():
    logits, target = randn(5, 3), np.array([2, 0, 1, 1, 0])
    x = leaf(logits)
    nn.CrossEntropyLoss()(x, tb.tensor(target)).backward()
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    p[np.arange(5), target] -= 1
    np.testing.assert_allclose(x.grad._data, p / 5, rtol=1e-5, atol=1e-6)


def test_multihead_attention_numpy():
    mha = nn.MultiheadAttention(8, 2, batch_first=True)
    x = randn(2, 5, 8)
    out, weights = mha(tb.tensor(x), tb.tensor(x), tb.tensor(x))
    w, b = mha.in_proj_weight._data, mha.in_proj_bias._data
    q, k, v = np.split(x @ w.T + b, 3, axis=-1)
    heads = lambda a: a.reshape(2, 5, 2, 4).transpose(0, 2, 1, 3)  # noqa: E731
    s = heads(q) @ heads(k).transpose(0, 1, 3, 2) / 2.0
    a = np.exp(s - s.max(-1, keepdims=True))
    a /= a.sum(-1, keepdims=True)
    o = (a @ heads(v)).transpose(0, 2, 1, 3).reshape(2, 5, 8)
    ref = o @ mha.out_proj.weight._data.T + mha.out_proj.bias._data
    np.testing.assert_allclose(out._data, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(weights._data, a.mean(1), rtol=1e-4, atol=1e-6)


def test_transformer_encoder_layer_backward_reaches_every_parameter():
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True)
    mask = np.zeros((2, 5), bool)
    mask[0, 3:] = True
    layer(tb.randn(2, 5, 8), src_key_padding_mask=tb.tensor(mask)).sum().backward()
    assert all(p.grad is not None and np.isfinite(p.grad._data).all() for p in layer.parameters())


# ***** torch references (weights copied over) *****
def _copy_into_torch(ours, theirs, torch):
    theirs.load_state_dict({k: torch.from_numpy(np.array(v._data)) for k, v in
                            ours.state_dict().items()})


def _compare(ours, theirs, x, torch, rtol=1e-4, atol=1e-5, target=None, train=True):
    """Forward, input gradient and every parameter gradient, ours vs torch."""
    _copy_into_torch(ours, theirs, torch)
    ours.train(train)
    theirs.train(train)
    xt = leaf(x) if x.dtype.kind == "f" else tb.tensor(x)
    xr = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    args = (xt,) if target is None else (xt, tb.tensor(target))
    targs = (xr,) if target is None else (xr, torch.tensor(target))
    out, ref = ours(*args), theirs(*targs)
    np.testing.assert_allclose(out._data, ref.detach().numpy(), rtol=rtol, atol=atol)
    g = randn(*ref.shape) if ref.dim() else np.float32(1.0)
    out.backward(tb.tensor(g))
    ref.backward(torch.tensor(g))
    if x.dtype.kind == "f":
        np.testing.assert_allclose(xt.grad._data, xr.grad.numpy(), rtol=rtol, atol=atol)
    theirs_params = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        np.testing.assert_allclose(p.grad._data, theirs_params[name].grad.numpy(), rtol=rtol,
                                   atol=atol, err_msg=name)
    for name, b in theirs.named_buffers():
        np.testing.assert_allclose(ours.get_buffer(name)._data, b.numpy(), rtol=rtol, atol=atol,
                                   err_msg=name)


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("make", [
    lambda m: m.Linear(6, 4),
    lambda m: m.Conv2d(3, 4, 3, stride=2, padding=1),
    lambda m: m.Conv2d(4, 4, 3, padding=1, groups=2, bias=False),
    lambda m: m.BatchNorm2d(3),
    lambda m: m.GroupNorm(3, 3),
    lambda m: m.LayerNorm(6),
    lambda m: m.MaxPool2d(3, stride=2, padding=1),
    lambda m: m.AvgPool2d(2),
    lambda m: m.AdaptiveAvgPool2d(1),
    lambda m: m.GELU(),
    lambda m: m.GELU(approximate="tanh"),
    lambda m: m.SiLU(),
    lambda m: m.LogSoftmax(dim=1),
], ids=["linear", "conv", "conv_groups", "bn2d", "groupnorm", "layernorm", "maxpool",
        "avgpool", "adaptive", "gelu", "gelu_tanh", "silu", "logsoftmax"])
def test_layer_matches_torch(torch, make):
    ours, theirs = make(nn), make(torch.nn)
    shape = (2, 6) if isinstance(ours, (nn.Linear,)) else (2, 3, 6, 6)
    if isinstance(ours, nn.LayerNorm):
        shape = (2, 3, 6)
    if isinstance(ours, nn.Conv2d) and ours.groups == 2:
        shape = (2, 4, 5, 5)
    _compare(ours, theirs, randn(*shape), torch)


def test_batchnorm1d_eval_and_3d_match_torch(torch):
    ours, theirs = nn.BatchNorm1d(3, momentum=None), torch.nn.BatchNorm1d(3, momentum=None)
    _compare(ours, theirs, randn(4, 3, 5), torch)
    _compare(ours, theirs, randn(4, 3), torch, train=False)


def test_losses_match_torch(torch):
    logits = randn(5, 4)
    target = np.array([0, 3, -100, 1, 2])
    for ours, theirs in [(nn.CrossEntropyLoss(label_smoothing=0.1),
                          torch.nn.CrossEntropyLoss(label_smoothing=0.1)),
                         (nn.CrossEntropyLoss(reduction="none"),
                          torch.nn.CrossEntropyLoss(reduction="none"))]:
        _compare(ours, theirs, logits, torch, target=target)
    a, y = randn(3, 4), (randn(3, 4) > 0).astype(np.float32)
    pos = tb.tensor(np.array([1.0, 2.0, 0.5, 3.0], np.float32))
    _compare(nn.BCEWithLogitsLoss(pos_weight=pos),
             torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor(pos._data)), a, torch, target=y)
    _compare(nn.MSELoss(), torch.nn.MSELoss(), a, torch, target=y)
    _compare(nn.L1Loss(), torch.nn.L1Loss(), a, torch, target=y)


def test_embedding_matches_torch(torch):
    ours, theirs = nn.Embedding(7, 3, padding_idx=2), torch.nn.Embedding(7, 3, padding_idx=2)
    _compare(ours, theirs, np.array([[1, 2, 6], [6, 0, 2]]), torch)


def test_transformer_layer_matches_torch(torch):
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    _compare(ours, theirs, randn(2, 5, 8), torch, rtol=1e-3, atol=1e-4)
    ours = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=True, activation="gelu")
    theirs = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, norm_first=True,
                                              activation="gelu")
    _compare(ours, theirs, randn(5, 2, 8), torch, rtol=1e-3, atol=1e-4)


def test_multihead_attention_masks_match_torch(torch):
    ours, theirs = nn.MultiheadAttention(8, 4), torch.nn.MultiheadAttention(8, 4)
    _copy_into_torch(ours, theirs, torch)
    q, k = randn(3, 2, 8), randn(4, 2, 8)
    pad = np.array([[False, False, True, True], [False, False, False, True]])
    causal = np.triu(np.ones((3, 4), bool), 1)
    out, w = ours(tb.tensor(q), tb.tensor(k), tb.tensor(k), key_padding_mask=tb.tensor(pad),
                  attn_mask=tb.tensor(causal))
    ref, rw = theirs(torch.tensor(q), torch.tensor(k), torch.tensor(k),
                     key_padding_mask=torch.tensor(pad), attn_mask=torch.tensor(causal))
    np.testing.assert_allclose(out._data, ref.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w._data, rw.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_clip_grad_matches_torch(torch):
    grads = [randn(3, 4) * 5, randn(7)]
    for norm_type in (2.0, 1.0, math.inf):
        ours = [nn.Parameter(tb.zeros(*g.shape)) for g in grads]
        theirs = [torch.zeros(*g.shape, requires_grad=True) for g in grads]
        for p, q, g in zip(ours, theirs, grads):
            p.grad = tb.tensor(g)
            q.grad = torch.tensor(g)
        n1 = nn.utils.clip_grad_norm_(ours, 1.5, norm_type=norm_type)
        n2 = torch.nn.utils.clip_grad_norm_(theirs, 1.5, norm_type=norm_type)
        assert n1.item() == pytest.approx(n2.item(), rel=1e-5)
        for p, q in zip(ours, theirs):
            np.testing.assert_allclose(p.grad._data, q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_clip_grad_gets_the_sharded_norm_from_the_dtensor_layer():
    """nn never imports distributed: the DTensor module (also loaded by FSDP1) registers the
    collective norm that clip_grad_norm_ uses for sharded gradients; before that, a clear error."""
    code = """
import sys
import tensorbrain as tb
from tensorbrain.nn.utils import clip_grad
assert not any(m.startswith("tensorbrain.distributed") for m in sys.modules), "nn loaded distributed"
assert clip_grad._sharded_total_norm is None
try:
    clip_grad.get_total_norm([(tb.zeros(2), [])])
except RuntimeError as e:
    assert "import tensorbrain.distributed.tensor" in str(e), e
else:
    raise AssertionError("no error without the DTensor layer")
import tensorbrain.distributed.fsdp.fully_sharded_data_parallel
from tensorbrain.distributed.tensor._factories import _total_norm
assert clip_grad._sharded_total_norm is _total_norm
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_clip_grad_numpy():
    p = nn.Parameter(tb.zeros(2))
    p.grad = tb.tensor([3.0, -4.0])
    total = nn.utils.clip_grad_norm_(p, 10.0)
    assert total.item() == pytest.approx(5.0) and p.grad.tolist() == [3.0, -4.0]
    nn.utils.clip_grad_value_([p], 3.5)
    assert p.grad.tolist() == [3.0, -3.5]
    p.grad = tb.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    q = nn.Parameter(tb.zeros(3))
    nn.utils.vector_to_parameters(tb.tensor([1.0, 2.0, 3.0, 4.0, 5.0]), [p, q])
    assert nn.utils.parameters_to_vector([p, q]).tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
