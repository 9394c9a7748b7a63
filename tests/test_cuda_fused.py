"""The GPU's fused float32 kernels (tensorbrain/_ops/cuda_fused.py) against their NumPy twins in
tensorbrain/_ops (same names), and the ops built on them against the same ops on the CuPy twins
(``_NATIVE_FUSED`` off) and on the CPU. GPU only: skipped without CUDA."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain._ops import attention, elementwise, loss, norm

pytestmark = pytest.mark.gpu
rng = np.random.default_rng(0)
TOL = dict(rtol=2e-5, atol=2e-5)


@pytest.fixture(scope="module")
def cf():
    from tensorbrain import _xp
    _xp.cupy()   # skips cleanly (conftest) without a GPU; raises here if CUDA is broken
    from tensorbrain._ops import cuda_fused
    return cuda_fused


def _cp(a):
    from tensorbrain import _xp
    return _xp.cupy().asarray(a)


def _np(a):
    return None if a is None else tb._xp.to_numpy(a)


@pytest.mark.parametrize("d", [7, 256, 1000])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_kernels_match_twins(cf, d, affine):
    x = (rng.standard_normal((13, d)) * 3 + 1).astype(np.float32)
    w, b = (rng.standard_normal(d).astype(np.float32) if affine else None for _ in range(2))
    want = norm.layer_norm_rows_forward(x, w, b, 1e-5)
    got = cf.layer_norm_rows_forward(_cp(x), *(None if t is None else _cp(t) for t in (w, b)), 1e-5)
    for a, t in zip(got, want):
        np.testing.assert_allclose(_np(a), t, **TOL)
    _, mean, rstd = want
    g = rng.standard_normal(x.shape).astype(np.float32)
    want = norm.layer_norm_rows_backward(x, mean, rstd, w, g, True, affine, affine)
    got = cf.layer_norm_rows_backward(_cp(x), _cp(mean), _cp(rstd), None if w is None else _cp(w),
                                      _cp(g), True, affine, affine)
    for a, t in zip(got, want):
        assert (a is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(_np(a), t, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (7, 5), (2, 600, 3)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_kernels_match_twins(cf, shape, affine):
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    c = shape[1]
    w, b = (rng.standard_normal(c).astype(np.float32) if affine else None for _ in range(2))
    want = norm.batch_norm_train_forward(x, w, b, 1e-5)
    got = cf.batch_norm_train_forward(_cp(x), *(None if t is None else _cp(t) for t in (w, b)), 1e-5)
    for a, t in zip(got, want):
        np.testing.assert_allclose(_np(a), t, **TOL)
    _, mean, var = want
    rstd = (1 / np.sqrt(var + 1e-5)).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    want = norm.batch_norm_train_backward(g, x, mean, rstd, w, True, affine, affine)
    got = cf.batch_norm_train_backward(_cp(g), _cp(x), _cp(mean), _cp(rstd),
                                       None if w is None else _cp(w), True, affine, affine)
    for a, t in zip(got, want):
        assert (a is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(_np(a), t, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 5, 5), (4, 3, 7), (6, 300)])
def test_softmax_kernels_match_twins(cf, causal, shape):
    s = (rng.standard_normal(shape) * 4).astype(np.float32)
    a, b = _cp(s), s.copy()
    cf.softmax_rows_forward(a, 0.37, causal)
    attention.softmax_rows_forward(b, 0.37, causal)
    np.testing.assert_allclose(_np(a), b, **TOL)
    assert np.array_equal(_np(a) == 0, b == 0)            # the causal zeros exactly
    g = rng.standard_normal(shape).astype(np.float32)
    ga, gb = _cp(g), g.copy()
    cf.softmax_rows_backward(ga, _cp(b), 0.37)
    attention.softmax_rows_backward(gb, b, 0.37)
    np.testing.assert_allclose(_np(ga), gb, **TOL)


@pytest.mark.parametrize("cols", [1, 13, 1000])
def test_log_softmax_and_cross_entropy_kernels_match_twins(cf, cols):
    x = (rng.standard_normal((9, cols)) * 5).astype(np.float32)
    x[1] = -np.inf                                        # a fully masked row
    x[2, 0] = np.nan                                      # NaN anywhere: the whole row NaN
    x[3, -1] = -np.inf
    x[4] += 80.0
    with np.errstate(invalid="ignore", divide="ignore"):
        want = loss.log_softmax_rows_forward(x)
    got = _np(cf.log_softmax_rows_forward(_cp(x)))
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], **TOL)
    x = np.delete(x, [1, 2], axis=0)
    logp = loss.log_softmax_rows_forward(x)
    t = rng.integers(0, cols, len(x))
    want = loss.cross_entropy_rows_backward(logp, t, 0.3)
    for r in (0.3, _cp(np.float32(0.3))):                 # a float, or a 0-d device array
        got = cf.cross_entropy_rows_backward(_cp(logp), _cp(t), r)
        np.testing.assert_allclose(_np(got), want, **TOL)


def test_gelu_and_embedding_kernels_match_twins(cf):
    x = np.concatenate([rng.standard_normal(1001) * 3, [0.0, -0.0, 5.7, -5.7, 40.0, -40.0]])
    x = x.astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    np.testing.assert_allclose(_np(cf.gelu_erf_forward(_cp(x))), elementwise.gelu_erf_forward(x), **TOL)
    np.testing.assert_allclose(_np(cf.gelu_erf_backward(_cp(x), _cp(g))),
                               elementwise.gelu_erf_backward(x, g), **TOL)
    from tensorbrain.nn.functional import embedding_rows_add
    target = np.zeros((5, 3), np.float32)
    idx = np.array([0, 4, 0, 2, 0])
    rows = rng.standard_normal((5, 3)).astype(np.float32)
    t = _cp(target)
    cf.embedding_rows_add(t, _cp(idx), _cp(rows))
    embedding_rows_add(target, idx, rows)
    np.testing.assert_allclose(_np(t), target, **TOL)


@pytest.mark.parametrize("kw", [dict(momentum=0.9), dict(momentum=0.9, nesterov=True, weight_decay=0.01),
                                dict(momentum=0.5, dampening=0.3, maximize=True), dict(weight_decay=0.1)])
def test_sgd_on_the_gpu_matches_the_cpu(kw):
    w0 = rng.standard_normal((4, 5)).astype(np.float32)
    grads = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(3)]
    out = []
    for dev in ("cpu", "cuda"):
        p = tb.nn.Parameter(tb.tensor(w0).to(dev))
        opt = tb.optim.SGD([p], lr=0.1, **kw)
        for g in grads:
            p.grad = tb.tensor(g).to(dev)
            opt.step()
        buf = opt.state[p].get("momentum_buffer")
        out.append((p.detach().cpu().numpy(), None if buf is None else tb._xp.to_numpy(buf)))
    np.testing.assert_allclose(out[1][0], out[0][0], rtol=1e-6, atol=1e-6)
    assert (out[1][1] is None) == (out[0][1] is None) == (not kw.get("momentum"))
    if kw.get("momentum"):
        np.testing.assert_allclose(out[1][1], out[0][1], rtol=1e-6, atol=1e-6)


def _run_ops(monkeypatch, fused):
    """A small model of every op with a fused kernel, forward and backward on the GPU."""
    monkeypatch.setattr(elementwise, "_NATIVE_FUSED", fused)
    r = np.random.default_rng(3)
    x = tb.tensor(r.standard_normal((4, 3, 6, 8)).astype(np.float32)).cuda().requires_grad_()
    bn = tb.nn.BatchNorm2d(3).cuda()
    ln = tb.nn.LayerNorm(8).cuda()
    emb = tb.nn.Embedding(10, 8).cuda()
    with tb.no_grad():
        for m in (bn, ln, emb):
            for p in m.parameters():
                p.copy_(tb.tensor(r.standard_normal(tuple(p.shape)).astype(np.float32)).cuda())
    h = ln(tb.nn.functional.gelu(bn(x)))                                    # (4, 3, 6, 8)
    h = tb.nn.functional.scaled_dot_product_attention(h, h, h, is_causal=True)
    h = h + emb(tb.tensor(r.integers(0, 10, (6,))).cuda())
    target = tb.tensor(r.integers(0, 8, (72,))).cuda()
    loss_ = tb.nn.functional.cross_entropy(h.reshape(-1, 8), target)
    loss_.backward()
    return [t.detach().cpu().numpy() for t in (loss_, h, x.grad, bn.weight.grad, bn.bias.grad,
                                               ln.weight.grad, emb.weight.grad, bn.running_var)]


def test_ops_on_fused_kernels_match_the_twins(monkeypatch):
    for a, b in zip(_run_ops(monkeypatch, True), _run_ops(monkeypatch, False)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("k,s,p,d", [(3, 1, 1, 1), (3, 2, 1, 1), (5, 2, 2, 2), (1, 1, 0, 1)])
def test_im2col_kernels_match_twins(cf, fold, k, s, p, d):
    from tensorbrain._ops import conv_columns
    x = rng.standard_normal((3, 4, 9, 8)).astype(np.float32)
    n, c, h, w = x.shape
    oh, ow = ((h + 2 * p - d * (k - 1) - 1) // s + 1, (w + 2 * p - d * (k - 1) - 1) // s + 1)
    geom = (k, k, s, s, p, p, d, d, oh, ow)
    want = conv_columns.im2col2d(x, *geom, fold)
    assert np.array_equal(_np(cf.im2col2d(_cp(x), *geom, fold)), want)
    cols = rng.standard_normal(want.shape).astype(np.float32)
    np.testing.assert_allclose(_np(cf.col2im2d(_cp(cols), n, c, h, w, *geom, fold)),
                               conv_columns.col2im2d(cols, n, c, h, w, *geom, fold), **TOL)


@pytest.mark.parametrize("kernels", ["0", "1"])
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("kw", [dict(stride=1, padding=1), dict(stride=2, padding=1),
                                dict(stride=1, padding=2, dilation=2), dict(stride=2, padding=0)])
def test_conv2d_on_the_gpu_matches_the_cpu(monkeypatch, kernels, transposed, kw):
    monkeypatch.setenv("TB_CUDA_CONV", kernels)
    r = np.random.default_rng(5)
    x = r.standard_normal((4, 3, 10, 9)).astype(np.float32)
    wshape = (3, 5, 3, 3) if transposed else (5, 3, 3, 3)
    w = r.standard_normal(wshape).astype(np.float32)
    b = r.standard_normal(5).astype(np.float32)
    fn = tb.nn.functional.conv_transpose2d if transposed else tb.nn.functional.conv2d
    res = []
    for dev in ("cpu", "cuda"):
        ts = [tb.tensor(a).to(dev).requires_grad_() for a in (x, w, b)]
        out = fn(*ts, **kw)
        out.backward(tb.tensor(np.cos(np.arange(out.numel())).reshape(out.shape).astype(np.float32)).to(dev))
        res.append([out.detach().cpu().numpy()] + [t.grad.cpu().numpy() for t in ts])
    for a, c in zip(*res):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-4)
