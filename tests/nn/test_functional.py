"""tb.nn.functional: every op's forward against NumPy (naive loops for conv/pool), its gradient
against float64 finite differences, and both against torch when torch is installed."""
import math

import numpy as np
import pytest

import tensorbrain as tb
import tensorbrain.nn.functional as F
from tensorbrain.testing import gradcheck

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # CI has no torch: the torch comparison is skipped, the rest still runs
    torch = TF = None


def tfn(make):
    """``make(TF)`` when torch is installed, else None (gradcheck then skips torch)."""
    return make(TF) if TF is not None else None


rng = np.random.default_rng(0)


# ***** NumPy references (slow, obvious loops) *****
def np_conv2d(x, w, b, stride=1, padding=0, dilation=1, groups=1):
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    kh, kw = w.shape[2:]
    if padding == "same":
        th, tw = dh * (kh - 1), dw * (kw - 1)
        pads = (th // 2, th - th // 2, tw // 2, tw - tw // 2)
    else:
        padding = 0 if padding == "valid" else padding
        ph, pw = (padding, padding) if isinstance(padding, int) else padding
        pads = (ph, ph, pw, pw)
    xp = np.pad(x, ((0, 0), (0, 0), pads[:2], pads[2:]))
    n, c, hp, wp = xp.shape
    oc = w.shape[0]
    oh = (hp - dh * (kh - 1) - 1) // sh + 1
    ow = (wp - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, oc, oh, ow))
    cg, ocg = c // groups, oc // groups
    for o in range(oc):
        gi = o // ocg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, gi * cg:(gi + 1) * cg, i * sh:i * sh + dh * (kh - 1) + 1:dh,
                           j * sw:j * sw + dw * (kw - 1) + 1:dw]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3)) + (b[o] if b is not None else 0)
    return out


def np_pool(x, k, s, p, mode, count_include_pad=True):
    n, c, h, w = x.shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * s - p, j * s - p
            rs, cs = slice(max(r0, 0), min(r0 + k, h)), slice(max(c0, 0), min(c0 + k, w))
            win = x[:, :, rs, cs]
            if mode == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = k * k if count_include_pad else win.shape[2] * win.shape[3]
                out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    return out


def np_log_softmax(x, d):
    m = x.max(axis=d, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=d, keepdims=True))


# ***** convolution and pooling *****
CONV_CASES = [
    dict(), dict(stride=2, padding=1), dict(padding="same", dilation=2),
    dict(groups=2, stride=(2, 1), padding=(1, 2)), dict(padding="same"), dict(padding="valid"),
    dict(groups=4, padding=1),
]


@pytest.mark.parametrize("kw", CONV_CASES, ids=str)
def test_conv2d(kw):
    g = kw.get("groups", 1)
    x = rng.standard_normal((2, 4, 6, 5))
    w = rng.standard_normal((4, 4 // g, 3, 2))
    b = rng.standard_normal(4)
    gradcheck(lambda x, w, b: F.conv2d(x, w, b, **kw), [x, w, b],
              numpy_fn=lambda x, w, b: np_conv2d(x, w, b, **kw),
              torch_fn=tfn(lambda TF: lambda x, w, b: TF.conv2d(x, w, b, **kw)))


def test_conv2d_no_bias_unbatched_and_float32():
    x, w = rng.standard_normal((3, 5, 5)), rng.standard_normal((2, 3, 3, 3))
    gradcheck(lambda x, w: F.conv2d(x, w), [x, w],
              numpy_fn=lambda x, w: np_conv2d(x[None], w, None)[0])
    out = F.conv2d(tb.tensor(x[None], dtype=tb.float32), tb.tensor(w, dtype=tb.float32))
    assert out.dtype == tb.float32 and out.is_contiguous()


def test_conv2d_bad_shapes_name_both():
    with pytest.raises(RuntimeError, match=r"\(2, 3, 5, 5\).*\(4, 2, 3, 3\)"):
        F.conv2d(tb.randn(2, 3, 5, 5), tb.randn(4, 2, 3, 3))
    with pytest.raises(ValueError, match="strided"):
        F.conv2d(tb.randn(1, 1, 5, 5), tb.randn(1, 1, 3, 3), stride=2, padding="same")


POOL_CASES = [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
              dict(kernel_size=3, stride=1, padding=1)]


@pytest.mark.parametrize("kw", POOL_CASES, ids=str)
def test_max_pool2d(kw):
    x = rng.standard_normal((2, 3, 7, 6))
    k, s, p = kw["kernel_size"], kw.get("stride", kw["kernel_size"]), kw.get("padding", 0)
    gradcheck(lambda x: F.max_pool2d(x, **kw), [x], numpy_fn=lambda x: np_pool(x, k, s, p, "max"),
              torch_fn=tfn(lambda TF: lambda x: TF.max_pool2d(x, **kw)))


@pytest.mark.parametrize("kw", [dict(kernel_size=3, stride=2, ceil_mode=True),
                                dict(kernel_size=(3, 2), stride=1, dilation=2, padding=1)], ids=str)
def test_max_pool2d_ceil_dilation_indices(kw):
    x = rng.standard_normal((2, 3, 7, 6))
    gradcheck(lambda x: F.max_pool2d(x, **kw), [x],
              torch_fn=tfn(lambda TF: lambda x: TF.max_pool2d(x, **kw)))
    out, idx = F.max_pool2d(tb.tensor(x), return_indices=True, **kw)
    # The indices point (into each flattened H*W plane) at the values returned.
    picked = np.take_along_axis(x.reshape(2, 3, -1), idx.numpy().reshape(2, 3, -1), 2)
    np.testing.assert_array_equal(picked.reshape(out.shape), out.numpy())
    if TF is not None:
        np.testing.assert_array_equal(idx.numpy(), TF.max_pool2d(torch.tensor(x), return_indices=True,
                                                                 **kw)[1].numpy())


@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("kw", POOL_CASES + [dict(kernel_size=3, stride=2, ceil_mode=True)], ids=str)
def test_avg_pool2d(kw, cip):
    x = rng.standard_normal((2, 3, 7, 6))
    k, s, p = kw["kernel_size"], kw.get("stride", kw["kernel_size"]), kw.get("padding", 0)
    ref = None if kw.get("ceil_mode") else (lambda x: np_pool(x, k, s, p, "avg", cip))
    gradcheck(lambda x: F.avg_pool2d(x, count_include_pad=cip, **kw), [x], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x: TF.avg_pool2d(x, count_include_pad=cip, **kw)))


@pytest.mark.parametrize("size", [(1, 1), (3, 2), (4, 5), (7, None), 2])
def test_adaptive_avg_pool2d(size):
    x = rng.standard_normal((2, 3, 7, 6))
    ref = None
    if size == (1, 1):
        ref = lambda x: x.mean(axis=(2, 3), keepdims=True)  # noqa: E731
    gradcheck(lambda x: F.adaptive_avg_pool2d(x, size), [x], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x: TF.adaptive_avg_pool2d(x, size)))


# ***** linear, activations, softmax *****
def test_linear_2d_and_3d():
    for shape in [(5, 3), (2, 4, 3)]:
        x, w, b = rng.standard_normal(shape), rng.standard_normal((4, 3)), rng.standard_normal(4)
        gradcheck(F.linear, [x, w, b], numpy_fn=lambda x, w, b: x @ w.T + b,
                  torch_fn=tfn(lambda TF: TF.linear))
    gradcheck(lambda x, w: F.linear(x, w), [rng.standard_normal((5, 3)), rng.standard_normal((2, 3))],
              numpy_fn=lambda x, w: x @ w.T)
    with pytest.raises(RuntimeError, match=r"\(5, 3\).*\(2, 4\)"):
        F.linear(tb.randn(5, 3), tb.randn(2, 4))


def test_bilinear():
    x1, x2 = rng.standard_normal((3, 2)), rng.standard_normal((3, 4))
    w, b = rng.standard_normal((5, 2, 4)), rng.standard_normal(5)
    gradcheck(F.bilinear, [x1, x2, w, b],
              numpy_fn=lambda x1, x2, w, b: np.einsum("ni,kij,nj->nk", x1, w, x2) + b,
              torch_fn=tfn(lambda TF: TF.bilinear))


def _away_from_kinks(x):
    return np.where(np.abs(x) < 1e-2, 0.5, x)   # finite differences across a kink are wrong


ACTIVATIONS = {
    "relu": (F.relu, lambda x: np.maximum(x, 0), lambda TF: TF.relu),
    "relu6": (F.relu6, lambda x: np.clip(x, 0, 6), lambda TF: TF.relu6),
    "sigmoid": (F.sigmoid, lambda x: 1 / (1 + np.exp(-x)), lambda TF: torch.sigmoid),
    "tanh": (F.tanh, np.tanh, lambda TF: torch.tanh),
    "gelu": (F.gelu, lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), lambda TF: TF.gelu),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"),
                  lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
                  lambda TF: lambda x: TF.gelu(x, approximate="tanh")),
    "silu": (F.silu, lambda x: x / (1 + np.exp(-x)), lambda TF: TF.silu),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.2), lambda x: np.where(x > 0, x, 0.2 * x),
                   lambda TF: lambda x: TF.leaky_relu(x, 0.2)),
    "elu": (F.elu, lambda x: np.where(x > 0, x, np.expm1(x)), lambda TF: TF.elu),
    "softplus": (F.softplus, lambda x: np.log1p(np.exp(x)), lambda TF: TF.softplus),
    "logsigmoid": (F.logsigmoid, lambda x: -np.log1p(np.exp(-x)), lambda TF: TF.logsigmoid),
    "hardtanh": (F.hardtanh, lambda x: np.clip(x, -1, 1), lambda TF: TF.hardtanh),
}


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation(name):
    fn, ref, tref = ACTIVATIONS[name]
    x = _away_from_kinks(rng.standard_normal((3, 4)) * 3)
    x = np.where(np.abs(np.abs(x) - 1) < 1e-2, 0.5, x)   # hardtanh's kinks at +-1
    gradcheck(fn, [x], numpy_fn=ref, torch_fn=tfn(tref))


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax(dim):
    x = rng.standard_normal((3, 4, 2))
    gradcheck(lambda x: F.softmax(x, dim), [x],
              numpy_fn=lambda x: np.exp(np_log_softmax(x, dim)),
              torch_fn=tfn(lambda TF: lambda x: TF.softmax(x, dim)))
    gradcheck(lambda x: F.log_softmax(x, dim), [x], numpy_fn=lambda x: np_log_softmax(x, dim),
              torch_fn=tfn(lambda TF: lambda x: TF.log_softmax(x, dim)))
    gradcheck(lambda x: F.softmin(x, dim), [x], numpy_fn=lambda x: np.exp(np_log_softmax(-x, dim)))


def test_log_softmax_is_stable_for_huge_logits():
    out = F.log_softmax(tb.tensor([[1000.0, 0.0], [-1000.0, 0.0]]), dim=1).numpy()
    np.testing.assert_allclose(out, [[0.0, -1000.0], [-1000.0, 0.0]])


# ***** losses *****
def np_cross_entropy(x, t, w=None, ignore_index=-100, reduction="mean", ls=0.0):
    c = x.shape[1]
    x2 = np.moveaxis(x, 1, -1).reshape(-1, c)
    t2 = t.reshape(-1)
    logp = np_log_softmax(x2, 1)
    w = np.ones(c) if w is None else w
    losses, ws = [], []
    for i in range(len(t2)):
        if t2[i] == ignore_index:
            losses.append(0.0)
            ws.append(0.0)
            continue
        nll = -w[t2[i]] * logp[i, t2[i]]
        smooth = -(w * logp[i]).sum()
        losses.append((1 - ls) * nll + ls / c * smooth)
        ws.append(w[t2[i]])
    losses = np.array(losses)
    if reduction == "none":
        return losses.reshape(t.shape)
    if reduction == "sum":
        return losses.sum()
    return losses.sum() / np.sum(ws)


CE_CASES = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=1),
            dict(label_smoothing=0.2), dict(weight=True), dict(weight=True, label_smoothing=0.1,
                                                               ignore_index=2)]


@pytest.mark.parametrize("kw", CE_CASES, ids=str)
@pytest.mark.parametrize("shape", [(6, 4), (2, 4, 3)])
def test_cross_entropy(kw, shape):
    x = rng.standard_normal(shape)
    t = rng.integers(0, 4, size=(shape[0],) + shape[2:])
    t.reshape(-1)[0] = 1
    kw = dict(kw)
    w = rng.random(4) + 0.5 if kw.pop("weight", False) else None
    args, names = ([x, t, w], "x t w") if w is not None else ([x, t], "x t")
    fn = (lambda x, t, w: F.cross_entropy(x, t, weight=w, **kw)) if w is not None else \
        (lambda x, t: F.cross_entropy(x, t, **kw))
    ref = (lambda x, t, w: np_cross_entropy(x, t, w, **_np_kw(kw))) if w is not None else \
        (lambda x, t: np_cross_entropy(x, t, **_np_kw(kw)))
    tf = tfn(lambda TF: (lambda x, t, w: TF.cross_entropy(x, t, weight=w, **kw)) if w is not None
             else (lambda x, t: TF.cross_entropy(x, t, **kw)))
    gradcheck(fn, args, numpy_fn=ref, torch_fn=tf, grad_inputs=[0])


def _np_kw(kw):
    return {"ignore_index": kw.get("ignore_index", -100), "reduction": kw.get("reduction", "mean"),
            "ls": kw.get("label_smoothing", 0.0)}


def test_cross_entropy_probability_targets():
    x = rng.standard_normal((5, 3))
    p = np.exp(np_log_softmax(rng.standard_normal((5, 3)), 1))
    gradcheck(lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1), [x, p], grad_inputs=[0],
              numpy_fn=lambda x, p: -((p * 0.9 + 0.1 / 3) * np_log_softmax(x, 1)).sum(1).mean(),
              torch_fn=tfn(lambda TF: lambda x, p: TF.cross_entropy(x, p, label_smoothing=0.1)))


def test_cross_entropy_errors_name_shapes():
    with pytest.raises(RuntimeError, match=r"\(4, 3\).*\(5,\)"):
        F.cross_entropy(tb.randn(4, 3), tb.tensor([0, 1, 2, 0, 1]))
    with pytest.raises(IndexError, match="out of bounds for 3 classes"):
        F.cross_entropy(tb.randn(2, 3), tb.tensor([0, 3]))


@pytest.mark.parametrize("kw", [dict(), dict(reduction="sum"), dict(reduction="none"),
                                dict(ignore_index=0), dict(weight=True)], ids=str)
def test_nll_loss(kw):
    x = np_log_softmax(rng.standard_normal((6, 4)), 1)
    t = np.array([0, 1, 2, 3, 1, 0])
    kw = dict(kw)
    w = rng.random(4) + 0.5 if kw.pop("weight", False) else None
    if w is None:
        gradcheck(lambda x, t: F.nll_loss(x, t, **kw), [x, t],
                  numpy_fn=lambda x, t: np_cross_entropy(x, t, **_np_kw(kw)),   # log_softmax is idempotent
                  torch_fn=tfn(lambda TF: lambda x, t: TF.nll_loss(x, t, **kw)))
    else:
        gradcheck(lambda x, t, w: F.nll_loss(x, t, weight=w), [x, t, w], grad_inputs=[0],
                  numpy_fn=lambda x, t, w: np_cross_entropy(x, t, w),
                  torch_fn=tfn(lambda TF: lambda x, t, w: TF.nll_loss(x, t, weight=w)))


REDUCE = {"mean": np.mean, "sum": np.sum, "none": lambda a: a}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(reduction):
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    red = REDUCE[reduction]
    for fn, ref, tname in [
        (F.mse_loss, lambda x, y: red((x - y) ** 2), "mse_loss"),
        (F.l1_loss, lambda x, y: red(np.abs(x - y)), "l1_loss"),
        (F.smooth_l1_loss, lambda x, y: red(np.where(np.abs(x - y) < 1, 0.5 * (x - y) ** 2,
                                                     np.abs(x - y) - 0.5)), "smooth_l1_loss"),
        (F.huber_loss, lambda x, y: red(np.where(np.abs(x - y) < 1, 0.5 * (x - y) ** 2,
                                                 np.abs(x - y) - 0.5)), "huber_loss"),
    ]:
        gradcheck(lambda x, y: fn(x, y, reduction=reduction), [x, y],
                  numpy_fn=ref, torch_fn=tfn(lambda TF: lambda x, y: getattr(TF, tname)(x, y, reduction=reduction)))


def test_mse_loss_broadcast_target_gradient_is_unbroadcast():
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((1, 3))
    gradcheck(F.mse_loss, [x, y], numpy_fn=lambda x, y: ((x - y) ** 2).mean())


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_bce_with_logits(reduction):
    x = rng.standard_normal((4, 3)) * 3
    t = rng.random((4, 3))
    w, pw = rng.random((4, 3)) + 0.5, rng.random(3) + 0.5
    sp = lambda z: np.logaddexp(0, z)  # noqa: E731
    gradcheck(lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, reduction=reduction, pos_weight=pw),
              [x, t, w, pw], grad_inputs=[0, 1],
              numpy_fn=lambda x, t, w, pw: REDUCE[reduction](w * (-(pw * t * -sp(-x) + (1 - t) * -sp(x)))),
              torch_fn=tfn(lambda TF: lambda x, t, w, pw: TF.binary_cross_entropy_with_logits(
                  x, t, w, reduction=reduction, pos_weight=pw)))
    big = F.binary_cross_entropy_with_logits(tb.tensor([1000.0, -1000.0]), tb.tensor([0.0, 1.0]))
    assert math.isfinite(big.item())


def test_binary_cross_entropy_and_kl_div():
    p = rng.random((4, 3)) * 0.8 + 0.1
    t = rng.random((4, 3))
    gradcheck(F.binary_cross_entropy, [p, t],
              numpy_fn=lambda p, t: -(t * np.log(p) + (1 - t) * np.log(1 - p)).mean(),
              torch_fn=tfn(lambda TF: TF.binary_cross_entropy))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(tb.tensor([1.5]), tb.tensor([1.0]))
    logq = np_log_softmax(rng.standard_normal((4, 3)), 1)
    pt = np.exp(np_log_softmax(rng.standard_normal((4, 3)), 1))
    for red in ["batchmean", "sum", "mean"]:
        ref = {"batchmean": lambda a: a.sum() / 4, "sum": np.sum, "mean": np.mean}[red]
        gradcheck(lambda q, p: F.kl_div(q, p, reduction=red), [logq, pt],
                  numpy_fn=lambda q, p: ref(p * (np.log(p) - q)),
                  torch_fn=tfn(lambda TF: lambda q, p: TF.kl_div(q, p, reduction=red)))


# ***** normalisation *****
def test_layer_norm():
    x, w, b = rng.standard_normal((3, 2, 4)), rng.standard_normal((2, 4)), rng.standard_normal((2, 4))

    def ref(x, w, b):
        mu = x.mean(axis=(1, 2), keepdims=True)
        v = x.var(axis=(1, 2), keepdims=True)
        return (x - mu) / np.sqrt(v + 1e-5) * w + b
    gradcheck(lambda x, w, b: F.layer_norm(x, (2, 4), w, b), [x, w, b], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x, w, b: TF.layer_norm(x, (2, 4), w, b)))
    gradcheck(lambda x: F.layer_norm(x, 4), [x],
              numpy_fn=lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5))


@pytest.mark.parametrize("shape", [(5, 3), (4, 3, 2, 2)])
def test_batch_norm_training_updates_running_stats(shape):
    x, w, b = rng.standard_normal(shape), rng.standard_normal(3), rng.standard_normal(3)
    axes = (0,) + tuple(range(2, len(shape)))
    bs = (1, 3) + (1,) * (len(shape) - 2)

    def ref(x, w, b):
        return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + 1e-5) \
            * w.reshape(bs) + b.reshape(bs)
    gradcheck(lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True), [x, w, b],
              numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x, w, b: TF.batch_norm(x, None, None, w, b, training=True)))
    rm, rv = tb.zeros(3, dtype=tb.float64), tb.ones(3, dtype=tb.float64)
    F.batch_norm(tb.tensor(x), rm, rv, training=True, momentum=0.3)
    n = x.size // 3
    np.testing.assert_allclose(rm.numpy(), 0.3 * x.mean(axes))
    np.testing.assert_allclose(rv.numpy(), 0.7 + 0.3 * x.var(axes) * n / (n - 1))


def test_batch_norm_eval_uses_running_stats():
    x = rng.standard_normal((4, 3, 2))
    rm, rv = rng.standard_normal(3), rng.random(3) + 0.5
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    gradcheck(lambda x, w, b: F.batch_norm(x, tb.tensor(rm), tb.tensor(rv), w, b, training=False),
              [x, w, b],
              numpy_fn=lambda x, w, b: (x - rm[:, None]) / np.sqrt(rv[:, None] + 1e-5) * w[:, None] + b[:, None])
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(tb.randn(1, 3), None, None, training=True)


def test_group_norm():
    x, w, b = rng.standard_normal((2, 6, 3)), rng.standard_normal(6), rng.standard_normal(6)

    def ref(x, w, b):
        g = x.reshape(2, 3, -1)
        h = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(x.shape)
        return h * w[:, None] + b[:, None]
    gradcheck(lambda x, w, b: F.group_norm(x, 3, w, b), [x, w, b], numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda x, w, b: TF.group_norm(x, 3, w, b)))
    with pytest.raises(RuntimeError, match="not divisible by num_groups=4"):
        F.group_norm(tb.randn(2, 6, 3), 4)


# ***** dropout, embedding, pad, one_hot, normalize, attention *****
def test_dropout_uses_tb_generator_and_scales():
    x = tb.ones(1000, requires_grad=True)
    tb.manual_seed(3)
    a = F.dropout(x, 0.25)
    tb.manual_seed(3)
    b = F.dropout(x, 0.25)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    vals = set(np.unique(a.detach().numpy()).tolist())
    assert vals <= {0.0, float(np.float32(1 / 0.75))} and 0.15 < (a.detach().numpy() == 0).mean() < 0.35
    a.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), a.detach().numpy())
    assert F.dropout(x, 0.5, training=False) is x
    assert (F.dropout(x, 1.0).detach().numpy() == 0).all()


def test_embedding_repeated_ids_accumulate_and_padding_idx():
    w = rng.standard_normal((5, 3))
    idx = np.array([[0, 2, 2], [4, 2, 1]])
    gradcheck(lambda w: F.embedding(tb.tensor(idx), w), [w], numpy_fn=lambda w: w[idx],
              torch_fn=tfn(lambda TF: lambda w: TF.embedding(torch.tensor(idx), w)))
    wt = tb.tensor(w, requires_grad=True)
    F.embedding(tb.tensor(idx), wt, padding_idx=2).sum().backward()
    np.testing.assert_array_equal(wt.grad.numpy()[:, 0], [1, 1, 0, 0, 1])
    with pytest.raises(IndexError, match="5 rows"):
        F.embedding(tb.tensor([5]), wt)


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
def test_pad(mode):
    x = rng.standard_normal((2, 3, 4))
    p = (1, 2, 2, 1)
    npm = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    gradcheck(lambda x: F.pad(x, p, mode=mode), [x],
              numpy_fn=lambda x: np.pad(x, ((0, 0), (2, 1), (1, 2)), mode=npm),
              torch_fn=tfn(lambda TF: lambda x: TF.pad(x, p, mode=mode)))


def test_pad_constant_value_and_negative_crop():
    x = rng.standard_normal((3, 4))
    gradcheck(lambda x: F.pad(x, (-1, 2), value=7.0), [x],
              numpy_fn=lambda x: np.pad(x[:, 1:], ((0, 0), (0, 2)), constant_values=7.0))


def test_one_hot_normalize_cosine_similarity():
    oh = F.one_hot(tb.tensor([0, 2, 1]), 4)
    assert oh.dtype == tb.int64
    np.testing.assert_array_equal(oh.numpy(), np.eye(4, dtype=np.int64)[[0, 2, 1]])
    assert F.one_hot(tb.tensor([1, 3])).shape == (2, 4)
    with pytest.raises(RuntimeError, match="num_classes=2"):
        F.one_hot(tb.tensor([2]), 2)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    gradcheck(F.normalize, [x], numpy_fn=lambda x: x / np.linalg.norm(x, axis=1, keepdims=True),
              torch_fn=tfn(lambda TF: TF.normalize))
    gradcheck(lambda x: F.normalize(x, p=3, dim=0), [x],
              numpy_fn=lambda x: x / (np.abs(x) ** 3).sum(0, keepdims=True) ** (1 / 3))
    gradcheck(F.cosine_similarity, [x, y],
              numpy_fn=lambda x, y: (x * y).sum(1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1),
              torch_fn=tfn(lambda TF: TF.cosine_similarity))


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention(causal):
    q, k, v = (rng.standard_normal((2, 3, 4)) for _ in range(3))

    def ref(q, k, v):
        s = q @ np.swapaxes(k, -1, -2) / 2.0
        if causal:
            s = np.where(np.tril(np.ones((3, 3), bool)), s, -np.inf)
        return np.exp(np_log_softmax(s, -1)) @ v
    gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), [q, k, v],
              numpy_fn=ref,
              torch_fn=tfn(lambda TF: lambda q, k, v: TF.scaled_dot_product_attention(q, k, v, is_causal=causal)))
    mask = rng.standard_normal((3, 3))
    gradcheck(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), [q, k, v, mask],
              grad_inputs=[0, 1, 2],
              torch_fn=tfn(lambda TF: lambda q, k, v, m: TF.scaled_dot_product_attention(q, k, v, attn_mask=m)))


# ***** GPU: the same checks on CuPy *****
@pytest.mark.gpu
def test_functional_on_gpu_matches_cpu():
    x = rng.standard_normal((2, 4, 6, 5))
    w = rng.standard_normal((4, 2, 3, 3))
    for fn, args in [
        (lambda x, w: F.conv2d(x, w, padding=1, groups=2), [x, w]),
        (lambda x: F.max_pool2d(x, 3, 2, 1), [x]),
        (lambda x: F.avg_pool2d(x, 2), [x]),
        (lambda x: F.cross_entropy(x.reshape(-1, 5), tb.tensor([0, 1, 2, 3] * 12, device="cuda")), [x]),
        (lambda x: F.layer_norm(x, (5,)), [x]),
    ]:
        gradcheck(fn, args, device="cuda")


def test_max_pool2d_propagates_nan_and_survives_in_place_on_output():
    x = rng.standard_normal((1, 1, 4, 4))
    x[0, 0, 1, 1] = np.nan
    out = F.max_pool2d(tb.tensor(x), 2).numpy()
    assert np.isnan(out[0, 0, 0, 0]) and not np.isnan(out[0, 0, 1, 1])
    xt = tb.tensor(rng.standard_normal((1, 1, 4, 4)), requires_grad=True)
    y = F.max_pool2d(xt, 2)
    with tb.no_grad():
        y._data[...] = 100.0          # changing the output must not change which inputs get grad
    y.backward(tb.ones(1, 1, 2, 2, dtype=tb.float64))
    assert xt.grad.numpy().sum() == 4 and set(np.unique(xt.grad.numpy())) == {0.0, 1.0}


def test_conv2d_small_images_take_the_single_gemm_path():
    # L = OH*OW <= 16 switches to one (OC x K)@(K x N*L) GEMM; same answers.
    x, w, b = rng.standard_normal((3, 4, 4, 4)), rng.standard_normal((5, 4, 3, 3)), rng.standard_normal(5)
    gradcheck(lambda x, w, b: F.conv2d(x, w, b, padding=1), [x, w, b],
              numpy_fn=lambda x, w, b: np_conv2d(x, w, b, padding=1),
              torch_fn=tfn(lambda TF: lambda x, w, b: TF.conv2d(x, w, b, padding=1)))
    gradcheck(lambda x, w: F.conv2d(x, w, stride=2), [x[:, :, :, :], w], numpy_fn=lambda x, w: np_conv2d(x, w, None, stride=2))


def test_max_pool2d_ties_send_the_gradient_to_the_first_position():
    # All-zero windows (common after ReLU): PyTorch gives the whole gradient to the first max.
    x = tb.zeros(1, 1, 4, 4, dtype=tb.float64, requires_grad=True)
    F.max_pool2d(x, 2).sum().backward()
    want = np.zeros((4, 4))
    want[::2, ::2] = 1
    np.testing.assert_array_equal(x.grad.numpy()[0, 0], want)
    if torch is not None:
        xt = torch.zeros(1, 1, 4, 4, dtype=torch.float64, requires_grad=True)
        TF.max_pool2d(xt, 2).sum().backward()
        np.testing.assert_array_equal(xt.grad.numpy()[0, 0], want)


@pytest.mark.parametrize("shape,axes", [((5,), (0,)), ((300, 7), (0,)), ((4, 700), (1,)), ((6, 5, 130), (0, 2)),
                                        ((3, 4, 5, 6), (0, 2, 3)), ((3, 4, 5), (0, 1)), ((2, 3, 4), (0, 1, 2)),
                                        ((3, 4, 5), (1,)), ((0, 3), (0,))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
def test_sum_axes_equals_numpys_sum(shape, axes, dtype):
    """The bias-gradient sums (through BLAS matrix-vector products where they can) give NumPy's
    shape and dtype, and float32 sums at least as close to the exact sum as NumPy's own."""
    from tensorbrain._ops.core import sum_axes
    a = (rng.standard_normal(shape) * 10 + 3).astype(dtype)
    got, ref = sum_axes(a, axes), a.sum(axis=axes)
    assert np.shape(got) == np.shape(ref) and got.dtype == ref.dtype
    exact = a.astype(np.float64).sum(axis=axes)
    tol = 1e-2 if dtype == np.float16 else 0
    assert np.all(np.abs(got - exact) <= np.abs(ref - exact) * 2 + np.abs(exact) * max(tol, 4 * np.finfo(np.float32).eps)
                  + (1e-9 if dtype != np.float16 else 1.0))
    # into an offered destination (DDP's arena slot): the same bits, in that array
    out = np.full(np.shape(ref), 7, ref.dtype)
    assert sum_axes(a, axes, out=out) is out
    np.testing.assert_array_equal(out, got)
