"""The fused float32 kernels of csrc/kernels/fused.cpp (GELU, ...) against their NumPy twins in
tensorbrain/_ops (same names), on both CPU paths; the ops built on them against the twins' ops.
(The ops themselves are checked against torch and finite differences in tests/nn and
tests/test_gelu_erf.py.)"""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _native
from tensorbrain._ops import elementwise

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
rng = np.random.default_rng(0)
EPS = float(np.finfo(np.float32).eps)


def test_gelu_kernels_match_twins(cpu_path):
    C = cpu_path
    x = np.concatenate([rng.standard_normal(1001) * 3, [0.0, -0.0, 5.7, -5.7, 40.0, -40.0]])
    x = x.astype(np.float32).reshape(-1, 1)[:, 0]          # an odd length: the vector tail
    g = rng.standard_normal(x.shape).astype(np.float32)
    # the same erf rational in the same float32 operations: bit for bit
    assert np.array_equal(C.gelu_erf_forward(x), elementwise.gelu_erf_forward(x))
    np.testing.assert_allclose(C.gelu_erf_backward(x, g), elementwise.gelu_erf_backward(x, g),
                               rtol=8 * EPS, atol=8 * EPS)
    with pytest.raises(ValueError, match="differ in size"):
        C.gelu_erf_backward(x, g[:-1])


def test_gelu_op_native_matches_twin(monkeypatch):
    x = rng.standard_normal((4, 33)).astype(np.float32)
    g = rng.standard_normal((4, 33)).astype(np.float32)

    def run(native):
        monkeypatch.setattr(elementwise, "_NATIVE_FUSED", native)
        t = tb.tensor(x, requires_grad=True)
        out = tb.nn.functional.gelu(t)
        out.backward(tb.tensor(g))
        return out.detach().numpy(), t.grad.numpy()
    for a, b in zip(run(True), run(False)):
        np.testing.assert_allclose(a, b, rtol=8 * EPS, atol=8 * EPS)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 5, 5), (4, 3, 7), (6, 4), (2, 37, 37), (3, 48)])
def test_softmax_kernels_match_twins(cpu_path, causal, shape):
    from tensorbrain._ops import attention
    C = cpu_path
    s = (rng.standard_normal(shape) * 4).astype(np.float32)
    a, b = s.copy(), s.copy()
    C.softmax_rows_forward(a, 0.37, causal)
    attention.softmax_rows_forward(b, 0.37, causal)
    np.testing.assert_allclose(a, b, rtol=16 * EPS, atol=4 * EPS)
    assert np.array_equal(a == 0, b == 0)                 # the causal zeros exactly
    g = rng.standard_normal(shape).astype(np.float32)
    ga, gb = g.copy(), g.copy()
    C.softmax_rows_backward(ga, a, 0.37)
    attention.softmax_rows_backward(gb, a, 0.37)
    np.testing.assert_allclose(ga, gb, rtol=16 * EPS, atol=4 * EPS)


@pytest.mark.parametrize("kw", [dict(is_causal=True), dict(), dict(mask=True)], ids=str)
def test_attention_native_matches_twin(kw, monkeypatch):
    q, k, v = (rng.standard_normal((2, 3, 6, 4)).astype(np.float32) for _ in range(3))
    m = rng.standard_normal((6, 6)).astype(np.float32)

    def run(native):
        monkeypatch.setattr(elementwise, "_NATIVE_FUSED", native)
        ts = [tb.tensor(a, requires_grad=True) for a in (q, k, v, m)]
        mask = ts[3] if kw.get("mask") else None
        out = tb.nn.functional.scaled_dot_product_attention(
            *ts[:3], attn_mask=mask, is_causal=kw.get("is_causal", False))
        out.backward(tb.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape).astype(np.float32)))
        return [out.detach().numpy()] + [t.grad.numpy() for t in ts[:3]] + \
            ([ts[3].grad.numpy()] if mask is not None else [])
    for a, b in zip(run(True), run(False)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_one_batch_element_at_a_time_gives_the_batched_bits(is_causal, monkeypatch):
    """Without mask or dropout a float32 batch runs one element at a time (attention._per_batch);
    each element on its own (batch 1) takes the batched path: the same bits, forward and back."""
    from tensorbrain._ops import attention
    taken = []
    per_batch = attention._per_batch
    monkeypatch.setattr(attention, "_per_batch", lambda *a: taken.append(1) or per_batch(*a))
    q, k, v = (rng.standard_normal((3, 2, 9, 4)).astype(np.float32) for _ in range(3))
    g = rng.standard_normal((3, 2, 9, 4)).astype(np.float32)

    def run(sl):
        ts = [tb.tensor(a[sl], requires_grad=True) for a in (q, k, v)]
        out = tb.nn.functional.scaled_dot_product_attention(*ts, is_causal=is_causal)
        out.backward(tb.tensor(g[sl]))
        return [out.detach().numpy()] + [t.grad.numpy() for t in ts]
    whole = run(slice(None))
    assert taken == [1]
    parts = [run(slice(b, b + 1)) for b in range(3)]
    assert taken == [1]
    for i, a in enumerate(whole):
        assert np.array_equal(a, np.concatenate([p[i] for p in parts])), i


def _assert_grads_match(got, want):
    """(gx, gweight, gbias) of a kernel and its twin: equal up to rounding, None alike."""
    for a, t in zip(got, want, strict=True):
        assert (a is None) == (t is None)
        if t is not None:
            np.testing.assert_allclose(a, t, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("d", [5, 33, 261])
def test_layer_norm_kernels_match_twins(cpu_path, affine, d):
    from tensorbrain._ops import norm
    C = cpu_path
    x = (rng.standard_normal((7, d)) * 3 + 1).astype(np.float32)
    w, b = (rng.standard_normal(d).astype(np.float32) if affine else None for _ in range(2))
    g = rng.standard_normal((7, d)).astype(np.float32)
    for a, t in zip(C.layer_norm_rows_forward(x, w, b, 1e-5), norm.layer_norm_rows_forward(x, w, b, 1e-5)):
        np.testing.assert_allclose(a, t, rtol=1e-5, atol=1e-5)
    out, mean, rstd = C.layer_norm_rows_forward(x, w, b, 1e-5)
    _assert_grads_match(C.layer_norm_rows_backward(x, mean, rstd, w, g, True, affine, affine),
                        norm.layer_norm_rows_backward(x, mean, rstd, w, g, True, affine, affine))


def test_layer_norm_op_native_matches_twin(monkeypatch):
    x = rng.standard_normal((3, 4, 10)).astype(np.float32)

    def run(native):
        monkeypatch.setattr(elementwise, "_NATIVE_FUSED", native)
        ln = tb.nn.LayerNorm((4, 10))
        with tb.no_grad():
            ln.weight.copy_(tb.tensor(np.linspace(0.5, 1.5, 40).reshape(4, 10).astype(np.float32)))
            ln.bias.copy_(tb.tensor(np.linspace(-1, 1, 40).reshape(4, 10).astype(np.float32)))
        t = tb.tensor(x, requires_grad=True)
        out = ln(t)
        out.backward(tb.tensor(np.cos(np.arange(out.numel())).reshape(out.shape).astype(np.float32)))
        return out.detach().numpy(), t.grad.numpy(), ln.weight.grad.numpy(), ln.bias.grad.numpy()
    for a, b in zip(run(True), run(False)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (7, 5), (3, 4, 8, 9)])   # planes of 30, 1, 72
def test_batch_norm_kernels_match_twins(affine, shape):
    from tensorbrain._ops import norm
    C = _native.module()
    x = (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32)
    c = shape[1]
    w, b = (rng.standard_normal(c).astype(np.float32) if affine else None for _ in range(2))
    for a, t in zip(C.batch_norm_train_forward(x, w, b, 1e-5), norm.batch_norm_train_forward(x, w, b, 1e-5)):
        np.testing.assert_allclose(a, t, rtol=1e-5, atol=1e-5)
    _, mean, var = C.batch_norm_train_forward(x, w, b, 1e-5)
    rstd = (1 / np.sqrt(var + 1e-5)).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    _assert_grads_match(C.batch_norm_train_backward(g, x, mean, rstd, w, True, affine, affine),
                        norm.batch_norm_train_backward(g, x, mean, rstd, w, True, affine, affine))


def test_batch_norm_op_native_matches_twin(monkeypatch):
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)

    def run(native):
        monkeypatch.setattr(elementwise, "_NATIVE_FUSED", native)
        bn = tb.nn.BatchNorm2d(3)
        with tb.no_grad():
            bn.weight.copy_(tb.tensor(np.array([0.5, 1.0, 2.0], np.float32)))
        t = tb.tensor(x, requires_grad=True)
        out = bn(t)
        out.backward(tb.tensor(np.cos(np.arange(out.numel())).reshape(out.shape).astype(np.float32)))
        return (out.detach().numpy(), t.grad.numpy(), bn.weight.grad.numpy(), bn.bias.grad.numpy(),
                bn.running_mean.numpy(), bn.running_var.numpy())
    for a, b in zip(run(True), run(False)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cols", [1, 13, 1000])
def test_log_softmax_and_cross_entropy_kernels_match_twins(cpu_path, cols):
    from tensorbrain._ops import loss
    C = cpu_path
    x = (rng.standard_normal((9, cols)) * 5).astype(np.float32)
    x[1] = -np.inf                                        # a fully masked row: the twin's m = 0
    x[2, 0] = np.nan                                      # NaN anywhere: the whole row NaN
    x[3, -1] = -np.inf                                    # one masked logit stays -inf
    x[4] += 80.0                                          # large logits: shifted by the max
    with np.errstate(invalid="ignore", divide="ignore"):
        want = loss.log_softmax_rows_forward(x)
    got = C.log_softmax_rows_forward(x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=4 * EPS, atol=8 * EPS)
    x = np.delete(x, [1, 2], axis=0)                      # cross-entropy's rows are finite
    logp = C.log_softmax_rows_forward(x)
    t = rng.integers(0, cols, len(x))
    np.testing.assert_allclose(C.cross_entropy_rows_backward(logp, t, 0.3),
                               loss.cross_entropy_rows_backward(logp, t, 0.3), rtol=8 * EPS, atol=4 * EPS)
    with pytest.raises(IndexError, match="out of bounds"):
        C.cross_entropy_rows_backward(logp, np.full(len(x), cols), 1.0)
    with pytest.raises(ValueError, match="class indices"):
        C.cross_entropy_rows_backward(logp, t[:-1], 1.0)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_op_native_matches_twin(monkeypatch, reduction):
    x = (rng.standard_normal((12, 37)) * 3).astype(np.float32)
    t = rng.integers(0, 37, 12)

    def run(native):
        monkeypatch.setattr(elementwise, "_NATIVE_FUSED", native)
        xt = tb.tensor(x, requires_grad=True)
        out = tb.nn.functional.cross_entropy(xt, tb.tensor(t), reduction=reduction)
        out.sum().backward()
        ls = tb.nn.functional.log_softmax(tb.tensor(x), dim=-1)
        return out.detach().numpy(), xt.grad.numpy(), ls.numpy()
    for a, b in zip(run(True), run(False)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_embedding_rows_add_matches_twin():
    from tensorbrain.nn import functional as F
    C = _native.module()
    idx = rng.integers(0, 37, 500)                        # many repeats
    rows = rng.standard_normal((500, 19)).astype(np.float32)
    a, b = np.zeros((40, 19), np.float32), np.zeros((40, 19), np.float32)
    C.embedding_rows_add(a, idx, rows)
    F.embedding_rows_add(b, idx, rows)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)   # reduceat sums in its own order
    np.testing.assert_allclose(a, np.stack([rows[idx == i].sum(0, dtype=np.float64) for i in range(40)]),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(IndexError, match="out of range for 40 rows"):
        C.embedding_rows_add(a, np.array([40]), rows[:1])
    with pytest.raises(ValueError, match="share dim"):
        C.embedding_rows_add(a, idx, rows[:, :3].copy())


def test_relu_backward_kernel_matches_twin_bit_for_bit():
    """g * (out > 0) in one native pass: the twin's product with 1 or 0, so -g * 0 is -0 and a
    NaN or infinite g under a zero output stays NaN; split across threads when large."""
    C = _native.module()
    out = np.maximum(rng.standard_normal(100_003), 0).astype(np.float32)
    g = rng.standard_normal(out.shape).astype(np.float32)
    out[:4], g[:4] = [np.nan, 0.0, -0.0, np.inf], [1.0, -2.0, 3.0, 4.0]
    out[4:8], g[4:8] = 0.0, [np.nan, -1.0, np.inf, -np.inf]
    with np.errstate(invalid="ignore"):
        want = elementwise.relu_backward(out, g)
    got = C.relu_backward(out, g)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="differ in size"):
        C.relu_backward(out, g[:5])


def test_relu_forward_kernel_matches_numpys_maximum_bit_for_bit():
    """max(x, 0) natively, as NumPy's maximum: NaN stays NaN, -0 becomes +0, infinities pass;
    and the op takes it (and its twin) for contiguous and strided inputs alike."""
    C = _native.module()
    x = rng.standard_normal(100_003).astype(np.float32)
    x[:6] = [np.nan, -0.0, 0.0, np.inf, -np.inf, -np.nan]
    assert np.array_equal(C.relu_forward(x).view(np.uint32), np.maximum(x, 0).view(np.uint32))
    with pytest.raises(TypeError):
        C.relu_forward(x.astype(np.float64))
    for a in (x[6:9006].reshape(-1, 9), x[6:9006].reshape(-1, 9)[:, ::2]):
        t = tb.tensor(a, requires_grad=True)
        r = tb.relu(t)
        r.backward(tb.ones_like(r))
        assert np.array_equal(r.detach().numpy(), np.maximum(a, 0))
        assert np.array_equal(t.grad.numpy(), (a > 0).astype(np.float32))


def test_add_arrays_is_numpys_add_and_the_ops_take_it(monkeypatch):
    """The native add (new array or in place) gives NumPy's bits; tensor addition and the
    engine's gradient sums go through it for large float32 arrays and give what NumPy gives."""
    from tensorbrain import _xp
    C = _native.module()
    a = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal((300, 257)).astype(np.float32)
    a[0, :4], b[0, :4] = [np.inf, -np.inf, np.nan, 1e38], [1.0, np.inf, 2.0, 1e38]
    with np.errstate(invalid="ignore", over="ignore"):
        want = a + b
        assert np.array_equal(C.add_arrays(a, b).view(np.uint32), want.view(np.uint32))
        acc = a.copy()
        res = C.add_arrays(acc, b, acc)                 # in place: what the engine's sums do
        assert np.shares_memory(res, acc) and np.array_equal(acc.view(np.uint32), want.view(np.uint32))
    with pytest.raises(ValueError, match="differ in shape"):
        C.add_arrays(a, b[:5])
    with pytest.raises(ValueError, match="writable array of a's"):
        C.add_arrays(a, b, np.empty(5, np.float32))
    calls = []
    real = C.add_arrays
    monkeypatch.setattr(C, "add_arrays", lambda *args: calls.append(1) or real(*args))
    x = rng.standard_normal((4, 128, 256)).astype(np.float32)   # 131072 values: native
    w = rng.standard_normal((4, 128, 256)).astype(np.float32)
    t = tb.tensor(x, requires_grad=True)
    y = t + tb.tensor(w)                               # the forward add
    ((y * y).sum() + (y * 3.0).sum()).backward()       # y's gradient: a sum of two
    assert len(calls) >= 2
    np.testing.assert_array_equal(y.detach().numpy(), x + w)
    np.testing.assert_allclose(t.grad.numpy(), 2 * (x + w) + 3.0, rtol=1e-6)
    assert np.array_equal(_xp.add(x[:10], w[:10]), x[:10] + w[:10])    # small: NumPy's


def test_attention_with_grouped_query_heads_in_float32():
    """enable_gqa with a float32 batch (k, v with fewer heads) stays on the batched path: equal
    to attention over k and v repeated per query head, gradients summed back per kv head."""
    q = rng.standard_normal((2, 4, 5, 3)).astype(np.float32)
    k, v = (rng.standard_normal((2, 2, 5, 3)).astype(np.float32) for _ in range(2))
    g = rng.standard_normal(q.shape).astype(np.float32)
    ts = [tb.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = tb.nn.functional.scaled_dot_product_attention(*ts, enable_gqa=True)
    out.backward(tb.tensor(g))
    rs = [tb.tensor(q, requires_grad=True)] + [tb.tensor(np.repeat(a, 2, axis=1), requires_grad=True)
                                               for a in (k, v)]
    ref = tb.nn.functional.scaled_dot_product_attention(*rs)
    ref.backward(tb.tensor(g))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ts[0].grad.numpy(), rs[0].grad.numpy(), rtol=1e-5, atol=1e-6)
    for t, r in zip(ts[1:], rs[1:]):
        np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy().reshape(2, 2, 2, 5, 3).sum(axis=2),
                                   rtol=1e-5, atol=1e-5)
