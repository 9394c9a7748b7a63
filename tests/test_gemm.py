"""tensorbrain._gemm: products on MKL's GEMM (when the ``mkl`` wheel is installed) against
NumPy's float64 products, for every operand layout CBLAS can express, with bias, into ``out``,
split across threads; what MKL cannot take falls back to NumPy with the same result."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _gemm, _native

rng = np.random.default_rng(11)


def _mkl():
    if _gemm._module() is None:
        pytest.skip(f"MKL is not in use: {_gemm.backend()}")
    return _native.module()


def _operand(rows, cols, how, dtype):
    """A (rows, cols) array stored as `how`: C order, a transpose, or a slice of a wider one."""
    if how == "c":
        return rng.standard_normal((rows, cols)).astype(dtype)
    if how == "t":
        return rng.standard_normal((cols, rows)).astype(dtype).T
    return rng.standard_normal((rows + 3, cols + 5)).astype(dtype)[2:rows + 2, 1:cols + 1]   # ld > cols


def _want(a, b, bias=None):
    w = a.astype(np.float64) @ b.astype(np.float64)
    return w if bias is None else w + bias


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("la", ["c", "t", "slice"])
@pytest.mark.parametrize("lb", ["c", "t", "slice"])
def test_every_layout_matches_float64(dtype, la, lb):
    a, b = _operand(37, 53, la, dtype), _operand(53, 29, lb, dtype)
    got = _gemm.mm(a, b)
    assert got.shape == (37, 29) and got.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, _want(a, b), rtol=tol, atol=tol)


@pytest.mark.parametrize("shape", [(1, 7, 5), (6, 1, 4), (5, 8, 1), (0, 4, 3), (4, 0, 3), (3, 4, 0)])
def test_edge_shapes(shape):
    m, k, n = shape
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    for x, y in ((a, b), (np.asfortranarray(a), np.asfortranarray(b))):
        got = _gemm.mm(x, y)
        assert got.shape == (m, n)
        np.testing.assert_allclose(got, _want(x, y), rtol=1e-5, atol=1e-5)


def test_bias_and_out():
    a, b = rng.standard_normal((40, 30)).astype(np.float32), rng.standard_normal((30, 20)).astype(np.float32)
    bias = rng.standard_normal(20).astype(np.float32)
    np.testing.assert_allclose(_gemm.mm(a, b, bias=bias), _want(a, b, bias), rtol=1e-5, atol=1e-5)
    out = np.full((40, 20), np.nan, np.float32)
    assert _gemm.mm(a, b.T.copy().T, out=out) is out
    np.testing.assert_allclose(out, _want(a, b), rtol=1e-5, atol=1e-5)
    out[:] = np.nan                                   # beta = 1 must not read the old values
    _gemm.mm(a, b, out=out, bias=bias)
    np.testing.assert_allclose(out, _want(a, b, bias), rtol=1e-5, atol=1e-5)


def test_what_cblas_cannot_take_falls_back():
    """A broadcast operand, integers, mixed dtypes, a non-contiguous out: NumPy's result."""
    C = _native.module() if _native.is_available() else None
    a = np.broadcast_to(rng.standard_normal((1, 30)).astype(np.float32), (25, 30))
    b = rng.standard_normal((30, 12)).astype(np.float32)
    np.testing.assert_allclose(_gemm.mm(a, b), _want(a, b), rtol=1e-5, atol=1e-5)
    if C is not None and hasattr(C, "gemm"):
        assert C.gemm(a, b, np.empty((25, 12), np.float32)) is False
    ia, ib = np.arange(12).reshape(3, 4), np.arange(8).reshape(4, 2)
    assert np.array_equal(_gemm.mm(ia, ib), ia @ ib)
    mixed = _gemm.mm(b.T.astype(np.float64), b)
    assert mixed.dtype == np.float64
    np.testing.assert_allclose(mixed, _want(b.T, b), rtol=1e-5)
    out = np.empty((12, 24), np.float32)[:, ::2]
    _gemm.mm(b.T, b, out=out)
    np.testing.assert_allclose(out, _want(b.T, b), rtol=1e-4, atol=1e-4)


def test_stacks():
    w = rng.standard_normal((9, 14)).astype(np.float32)
    cols = rng.standard_normal((5, 14, 22)).astype(np.float32)
    g = rng.standard_normal((5, 9, 22)).astype(np.float32)
    np.testing.assert_allclose(_gemm.mm_each(w, cols), np.matmul(w.astype(np.float64), cols), rtol=1e-4, atol=1e-4)
    want = np.einsum("bkl,bol->ko", cols.astype(np.float64), g.astype(np.float64))
    np.testing.assert_allclose(_gemm.mm_sum(cols, g.swapaxes(-1, -2)), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("limit", [8 << 20, 0])   # the products in one batched call; one at a time
def test_mm_sum_matches_float64_and_one_thread(limit, monkeypatch):
    _mkl()
    monkeypatch.setattr(_gemm, "_SUM_STACK_BYTES", limit)
    cols = rng.standard_normal((32, 27, 1024)).astype(np.float32)   # a conv net's first layer
    g = rng.standard_normal((32, 32, 1024)).astype(np.float32)
    want = np.einsum("bkl,bol->ko", cols.astype(np.float64), g.astype(np.float64))
    before = tb.get_num_threads()
    try:
        tb.set_num_threads(1)
        one = _gemm.mm_sum(cols, g.swapaxes(-1, -2))
        for t in (2, 3):
            tb.set_num_threads(t)
            np.testing.assert_array_equal(_gemm.mm_sum(cols, g.swapaxes(-1, -2)), one)
    finally:
        tb.set_num_threads(before)
    np.testing.assert_allclose(one, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape", [(1000, 256, 700), (64, 300, 3000)])   # split by rows; by columns
@pytest.mark.parametrize("lb", ["c", "t"])
def test_split_across_threads_matches_one_thread(shape, lb):
    """Row or column blocks on the native pool (2 and 3 threads), with a bias, give the
    one-thread product."""
    C = _mkl()
    m, k, n = shape
    a, b = _operand(m, k, "t", np.float32), _operand(k, n, lb, np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    before = tb.get_num_threads()
    try:
        tb.set_num_threads(1)
        one = _gemm.mm(a, b, bias=bias)
        for t in (2, 3):
            tb.set_num_threads(t)
            assert C._kernel_threads() == t
            np.testing.assert_allclose(_gemm.mm(a, b, bias=bias), one, rtol=1e-6, atol=1e-5)
    finally:
        tb.set_num_threads(before)
    np.testing.assert_allclose(one, _want(a, b, bias), rtol=1e-4, atol=1e-3)


def test_mkl_takes_every_layout():
    C = _mkl()
    for la in ("c", "t", "slice"):
        for lb in ("c", "t", "slice"):
            a, b = _operand(20, 30, la, np.float32), _operand(30, 10, lb, np.float32)
            out = np.empty((20, 10), np.float32)
            assert C.gemm(a, b, out) is True
            np.testing.assert_allclose(out, _want(a, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"\(20, 30\) @ \(31, 10\)"):
        C.gemm(a, np.ones((31, 10), np.float32), out)


def test_tb_gemm_chooses(monkeypatch):
    monkeypatch.setattr(_gemm, "_state", dict(_gemm._state))   # both of its entries restored after
    monkeypatch.setitem(_gemm._state, "why", None)
    monkeypatch.setenv("TB_GEMM", "numpy")
    assert _gemm.backend() == "numpy: TB_GEMM=numpy"
    # TB_GEMM=mkl where no MKL can be found (a stand-in for a machine without the wheel: this
    # one may have it) names the variable and what to do
    monkeypatch.setitem(_gemm._state, "why", None)
    monkeypatch.setenv("TB_GEMM", "mkl")
    monkeypatch.setattr(_gemm, "_find_mkl", lambda: None)
    if _native.is_available() and hasattr(_native.module(), "_gemm_load"):
        with pytest.raises(RuntimeError, match="TB_GEMM=mkl but MKL cannot be used.*pip install"):
            _gemm.backend()
    monkeypatch.setitem(_gemm._state, "why", None)


def _attention64(q, k, v, g, scale, causal):
    """Reference attention forward and gradients in float64 NumPy."""
    q, k, v, g = (a.astype(np.float64) for a in (q, k, v, g))
    s = q @ k.swapaxes(-1, -2) * scale
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    gp = g @ v.swapaxes(-1, -2)
    ds = p * (gp - (gp * p).sum(-1, keepdims=True)) * scale
    return p @ v, ds @ k, ds.swapaxes(-1, -2) @ q, p.swapaxes(-1, -2) @ g


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("views", ["gpt", "contiguous"])
def test_attention_kernels_match_float64_and_the_loop(causal, views):
    """attention_forward/_backward (each (batch, head) matrix on one thread) against float64
    NumPy, and bit for bit against the per-batch loop on the same MKL products and softmax
    kernels, at 1, 2 and 3 threads: q, k, v as a GPT makes them (heads split out of one
    projection: strided views; g a transposed view, the output and gradients written into
    transposed layouts) or contiguous, with S != L and Ev != E."""
    C = _mkl()
    B, H, L, E = 5, 7, 64, 16   # big enough that 2 and 3 threads split inside a batch element
    if views == "gpt":   # (B, L, 3*H*E) projection -> three (B, H, L, E) transposed views
        qkv = rng.standard_normal((B, L, 3 * H * E)).astype(np.float32)
        q, k, v = (qkv[..., i * H * E:(i + 1) * H * E].reshape(B, L, H, E).transpose(0, 2, 1, 3) for i in range(3))
        S, Ev = L, E
    else:
        S, Ev = (L if causal else 80), 12
        q = rng.standard_normal((B, H, L, E)).astype(np.float32)
        k = rng.standard_normal((B, H, S, E)).astype(np.float32)
        v = rng.standard_normal((B, H, S, Ev)).astype(np.float32)
    g = rng.standard_normal((B, H, L, Ev)).astype(np.float32)
    if views == "gpt":   # g as it comes back through y.transpose(1, 2).reshape(B, L, H * Ev)
        g = np.ascontiguousarray(g.transpose(0, 2, 1, 3)).transpose(0, 2, 1, 3)
    scale = 0.37

    def loop():   # the per-batch twin in tensorbrain/_ops/attention.py
        p, out = np.empty((B, H, L, S), np.float32), np.empty((B, H, L, Ev), np.float32)
        gq, gk, gv = np.empty(q.shape, np.float32), np.empty(k.shape, np.float32), np.empty(v.shape, np.float32)
        for b in range(B):
            _gemm.bmm(q[b], k[b].swapaxes(-1, -2), out=p[b])
            C.softmax_rows_forward(p[b], scale, causal)
            _gemm.bmm(p[b], v[b], out=out[b])
            gp = np.empty((H, L, S), np.float32)
            _gemm.bmm(p[b].swapaxes(-1, -2), g[b], out=gv[b])
            _gemm.bmm(g[b], v[b].swapaxes(-1, -2), out=gp)
            C.softmax_rows_backward(gp, p[b], scale)
            _gemm.bmm(gp, k[b], out=gq[b])
            _gemm.bmm(gp.swapaxes(-1, -2), q[b], out=gk[b])
        return out, gq, gk, gv

    def native():   # outputs laid out as tensorbrain/_ops/attention.py makes them (strided for "gpt")
        p, out = np.empty((B, H, L, S), np.float32), np.empty((B, L, H, Ev), np.float32).transpose(0, 2, 1, 3)
        gq, gk, gv = (np.empty_like(a) for a in (q, k, v))
        assert C.attention_forward(q, k, v, p, out, scale, causal) is True
        assert C.attention_backward(q, k, v, p, g, gq, gk, gv, scale) is True
        return out, gq, gk, gv

    before = tb.get_num_threads()
    try:
        tb.set_num_threads(1)
        twin = loop()
        for t in (1, 2, 3):
            tb.set_num_threads(t)
            for a, b in zip(native(), twin):
                np.testing.assert_array_equal(a, b)
    finally:
        tb.set_num_threads(before)
    for a, want in zip(twin, _attention64(q, k, v, g, scale, causal)):
        np.testing.assert_allclose(a, want, rtol=1e-4, atol=1e-5)


def test_attention_output_and_gradients_keep_the_heads_layout():
    """F.scaled_dot_product_attention on a GPT's head views: its output is laid out (B, L, H, E)
    (torch's CPU flash attention's layout), so ``y.transpose(1, 2).reshape(B, L, H * E)`` is a
    view, and the gradients, taken from a transposed g, match float64 NumPy. With MKL
    (one native call each way) and without (the per-batch loop on NumPy's products)."""
    if _native.loaded() is None:
        pytest.skip("the per-batch attention path needs tensorbrain._C")
    B, H, L, E = 3, 4, 16, 8
    qkv = tb.tensor(rng.standard_normal((B, L, 3 * H * E)).astype(np.float32), requires_grad=True)
    q, k, v = (z.reshape(B, L, H, E).transpose(1, 2) for z in qkv.split(H * E, dim=2))
    y = tb.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    y2 = y.transpose(1, 2).reshape(B, L, H * E)
    assert np.shares_memory(y2.detach().numpy(), y.detach().numpy())
    g = rng.standard_normal((B, L, H * E)).astype(np.float32)
    y2.backward(tb.tensor(g))
    g4 = g.reshape(B, L, H, E).transpose(0, 2, 1, 3)
    want = _attention64(q.detach().numpy(), k.detach().numpy(), v.detach().numpy(), g4, E ** -0.5, True)
    np.testing.assert_allclose(y.detach().numpy(), want[0], rtol=1e-4, atol=1e-5)
    grads = np.concatenate([a.transpose(0, 2, 1, 3).reshape(B, L, H * E) for a in want[1:]], axis=2)
    np.testing.assert_allclose(qkv.grad.numpy(), grads, rtol=1e-4, atol=1e-5)


def test_attention_kernels_refuse_what_they_cannot_take():
    C = _mkl()
    q = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    p, out = np.empty((2, 3, 4, 4), np.float32), np.empty((2, 3, 4, 5), np.float32)
    assert C.attention_forward(q.astype(np.float64), q, q, p, out, 1.0, False) is False    # float64
    assert C.attention_forward(q, q, q, p, np.empty((2, 3, 5, 4), np.float32).swapaxes(2, 3), 1.0, False) is False
    with pytest.raises(ValueError, match=r"p has shape \(2, 3, 4, 3\), expected \(2, 3, 4, 4\)"):
        C.attention_forward(q, q, q, np.empty((2, 3, 4, 3), np.float32), out, 1.0, False)
    with pytest.raises(ValueError, match="do not match"):
        C.attention_forward(q, q[:, :2], q, p, out, 1.0, False)


# ***** without MKL: batches of products one item per pool thread on NumPy's OpenBLAS *****

def _openblas_items():
    """Two threads with NumPy's OpenBLAS found for one-item-per-thread batches; skips where MKL
    takes the batches or the OpenBLAS is not one whose symbols we know."""
    from tensorbrain import _threads
    if _gemm._module() is not None or _native.module()._gemm_loaded():
        pytest.skip("MKL takes the batches here")
    tb.set_num_threads(2)
    _threads._share_blas_pool(_native.module())
    if not _threads._state["blas_items"]:
        pytest.skip(f"NumPy's OpenBLAS is not used for batches: the BLAS pool is {_threads._state['blas_pool']}")
    return _native.module()


def _blas_threads():
    """The thread count of each ILP64 OpenBLAS loaded (NumPy's; the one the path uses: another
    library, such as torch's or SciPy's, may load a 32-bit one of its own)."""
    from threadpoolctl import threadpool_info
    return [i["num_threads"] for i in threadpool_info()
            if i.get("internal_api") == "openblas" and "openblas64_" in i.get("filepath", "")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_openblas_items_match_float64_and_give_back_the_threads(dtype, monkeypatch):
    """mm_each (the weight at stride 0, and transposed), mm_sum (a swapped stack) and bmm on two
    threads: each item a one-thread OpenBLAS product on the pool, the results those of float64
    products, and OpenBLAS's own thread count back at two afterwards; fewer items than threads
    and TB_GEMM=numpy keep NumPy's matmul."""
    before = tb.get_num_threads()
    try:
        C = _openblas_items()
        w = rng.standard_normal((32, 27)).astype(dtype)          # a conv net's first layer
        cols = rng.standard_normal((12, 27, 300)).astype(dtype)
        g = rng.standard_normal((12, 32, 300)).astype(dtype)
        a = rng.standard_normal((12, 40, 23)).astype(dtype)
        b = rng.standard_normal((12, 23, 50)).astype(dtype)
        f64 = lambda x: x.astype(np.float64)   # noqa: E731
        ran = C._openblas_items_run()
        np.testing.assert_allclose(_gemm.mm_each(w, cols), f64(w) @ f64(cols), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(_gemm.mm_each(w.T.copy().T, cols), f64(w) @ f64(cols), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(_gemm.mm_each(np.ascontiguousarray(w.T), g), f64(w).T @ f64(g),
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(_gemm.mm_sum(cols, g.swapaxes(-1, -2)),
                                   np.einsum("bkl,bol->ko", f64(cols), f64(g)), rtol=1e-4, atol=1e-3)
        out = np.empty((12, 40, 50), dtype)
        assert _gemm.bmm(a, b, out=out) is out
        np.testing.assert_allclose(out, f64(a) @ f64(b), rtol=1e-4, atol=1e-4)
        assert C._openblas_items_run() == ran + 5, "the batches did not run one item per thread"
        np.testing.assert_allclose(_gemm.bmm(a[:1], b[:1]), f64(a[:1]) @ f64(b[:1]), rtol=1e-4, atol=1e-4)
        assert C._openblas_items_run() == ran + 5, "a single item took the pool (OpenBLAS's own threads split it)"
        assert _blas_threads() == [2]
        monkeypatch.setenv("TB_GEMM", "numpy")
        np.testing.assert_allclose(_gemm.mm_each(w, cols), f64(w) @ f64(cols), rtol=1e-4, atol=1e-4)
        assert C._openblas_items_run() == ran + 5, "TB_GEMM=numpy still ran the batch on the pool"
    finally:
        tb.set_num_threads(before)


def test_openblas_items_from_many_threads_give_back_the_threads():
    """Four Python threads run batches at once (each puts OpenBLAS on one thread while it runs;
    the last one out restores it) alongside plain products: every result right, nothing hangs,
    and OpenBLAS is on two threads at the end."""
    from .test_kernel_threads import _in_threads
    before = tb.get_num_threads()
    try:
        _openblas_items()
        w = rng.standard_normal((32, 27)).astype(np.float32)
        cols = [rng.standard_normal((16, 27, 256)).astype(np.float32) for _ in range(4)]
        want = [w.astype(np.float64) @ c for c in cols]
        big = rng.standard_normal((300, 300)).astype(np.float32)
        bad = []

        def work(i):
            for _ in range(25):
                if not np.allclose(_gemm.mm_each(w, cols[i]), want[i], rtol=1e-4, atol=1e-4):
                    bad.append(("each", i))
                if not np.allclose(big @ big, big.astype(np.float64) @ big, rtol=1e-3, atol=1e-2):
                    bad.append(("big", i, float(abs(big @ big - big.astype(np.float64) @ big).max())))
        _in_threads(work)
        assert not bad
        assert _blas_threads() == [2]
    finally:
        tb.set_num_threads(before)
