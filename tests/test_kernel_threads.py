"""The fused native kernels (GELU, softmax, layer norm and its backward, log_softmax,
cross-entropy, Adam, and the convolution path's im2col/col2im, max pooling and batch norm)
split across tb.set_num_threads threads (csrc/kernels/parallel.h):
the same values, bit for bit, as on one thread (each chunk is whole rows or whole 8-value
vectors; layer norm's weight and bias sums go by fixed blocks of rows), and a forked child of a
process that ran them still runs them (the pool's workers do not come along: the child makes
its own pool)."""
import multiprocessing as mp

import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain import _native

pytestmark = pytest.mark.skipif(not _native.is_available(), reason="tensorbrain._C not built")
rng = np.random.default_rng(3)


def _all_kernels(C):
    x = rng.standard_normal((3, 97, 1031)).astype(np.float32)       # odd sizes: uneven chunks
    g = rng.standard_normal(x.shape).astype(np.float32)
    s = rng.standard_normal((4, 8, 77, 77)).astype(np.float32)   # 2464 rows: 5 grains
    return x, g, s


def _run(C, x, g, s):
    out = [C.gelu_erf_forward(x), C.gelu_erf_backward(x, g)]
    for causal in (False, True):
        p = s.copy()
        C.softmax_rows_forward(p, 0.3, causal)
        gp = s[::-1].copy()
        C.softmax_rows_backward(gp, p, 0.3)
        out += [p, gp]
    x2, g2 = x.reshape(-1, 1031), g.reshape(-1, 1031)
    w = np.linspace(0.5, 1.5, 1031, dtype=np.float32)
    y, mean, rstd = C.layer_norm_rows_forward(x2, w, None, 1e-5)
    out += [y, mean, rstd, *C.layer_norm_rows_backward(x2, mean, rstd, w, g2, True, True, True)]
    logp = C.log_softmax_rows_forward(x)
    t = np.arange(logp.size // 1031) % 1031
    out += [logp, C.cross_entropy_rows_backward(logp.reshape(-1, 1031), t, 0.5)]
    p, m, v = x.ravel().copy(), g.ravel().copy(), np.abs(x).ravel()
    C.adam_step(p, g.ravel(), m, v, 0.9, 0.999, 0.03, 1e-8, 0.01)
    out += [p, m, v]
    # the convolution path: split by channel, image or plane
    img = x.ravel()[:8 * 16 * 23 * 21].reshape(8, 16, 23, 21)
    for fold in (True, False):
        cols = C.im2col2d(img, 3, 3, 1, 2, 1, 1, 1, 1, 23, 11, fold)
        out += [cols, C.col2im2d(cols * 0.5, 8, 16, 23, 21, 3, 3, 1, 2, 1, 1, 1, 1, 23, 11, fold)]
    out += [C.add_arrays(x, g), C.relu_forward(g)]
    chan = np.linspace(-1, 1, 16, dtype=np.float32)
    out += [C.swap_leading_axes(img.reshape(8, 16, -1)), C.swap_leading_axes(img.reshape(16, 8, -1), chan)]
    pooled, winners = C.max_pool2d_forward(img, 3, 2, 2, 2, 1, 0, 1, 1, 12, 10)
    out += [pooled, winners, C.max_pool2d_backward(pooled[::-1].copy(), winners, 23, 21)]
    bn = np.ascontiguousarray(x.reshape(3, 97 * 1031)[:, :24 * 4096]).reshape(3, 24, 4096)
    gbn = np.ascontiguousarray(g.reshape(3, 97 * 1031)[:, :24 * 4096]).reshape(3, 24, 4096)
    wc, bc = np.linspace(0.5, 2, 24, dtype=np.float32), np.linspace(-1, 1, 24, dtype=np.float32)
    y, mean, var = C.batch_norm_train_forward(bn, wc, bc, 1e-5)
    rstd = (1 / np.sqrt(var + 1e-5)).astype(np.float32)
    out += [y, mean, var, *C.batch_norm_train_backward(gbn, bn, mean, rstd, wc, True, True, True)]
    return out


@pytest.fixture(params=["spin", "sleep"])
def waiting(request):
    """The pool's waits as built (a caller spins for its workers' chunks before it sleeps), and
    with no spin at all, so that every wait goes through the condition variables."""
    C = _native.module()
    if request.param == "sleep":
        C._set_pool_spin_us(0)
    yield request.param
    C._set_pool_spin_us(100_000)                        # parallel.cpp's kSpinUs


def test_two_threads_match_one_bit_for_bit(waiting):
    C = _native.module()
    before = tb.get_num_threads()
    args = _all_kernels(C)
    try:
        tb.set_num_threads(1)
        assert C._kernel_threads() == 1
        one = _run(C, *args)
        tb.set_num_threads(2)
        assert C._kernel_threads() == 2
        two = _run(C, *args)
        tb.set_num_threads(3)                               # more threads than cores
        three = _run(C, *args)
    finally:
        tb.set_num_threads(before)
    for a, b, c in zip(one, two, three):
        assert np.array_equal(a, b) and np.array_equal(a, c)


def _child(q):
    C = _native.module()
    x = np.linspace(-3, 3, 1 << 17, dtype=np.float32)
    q.put(bool(np.array_equal(C.gelu_erf_forward(x), C.gelu_erf_forward(x.copy()))))


def _forked_child_says_true(target, what):
    """Fork a child running ``target(queue)``; it must put True and exit within a minute."""
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=target, args=(q,))
    p.start()
    p.join(60)
    if p.is_alive():
        p.kill()
        pytest.fail(f"the forked child hung in {what}")
    assert p.exitcode == 0 and q.get(timeout=5) is True


def test_forked_child_runs_parallel_kernels():
    C = _native.module()
    before = tb.get_num_threads()
    try:
        tb.set_num_threads(2)
        C.gelu_erf_forward(np.ones(1 << 17, np.float32))    # the parent's pool is started
        _forked_child_says_true(_child, "a parallel kernel")
    finally:
        tb.set_num_threads(before)


def test_concurrent_callers_each_get_their_own_helpers():
    """Python threads calling the split kernels at once (the GIL released inside): every call
    starts and joins its own helpers, so each result equals the one-thread result."""
    C = _native.module()
    x = rng.standard_normal((64, 1031)).astype(np.float32)
    before = tb.get_num_threads()
    try:
        tb.set_num_threads(1)
        want = C.gelu_erf_forward(x), C.log_softmax_rows_forward(x)
        tb.set_num_threads(2)
        bad = []

        def work(_):
            for _ in range(20):
                got = C.gelu_erf_forward(x), C.log_softmax_rows_forward(x)
                bad.extend(i for i in range(2) if not np.array_equal(got[i], want[i]))
        _in_threads(work, 3, 60)
        assert not bad
    finally:
        tb.set_num_threads(before)


# ***** one pool for our kernels and NumPy's OpenBLAS (TB_BLAS_POOL) *****

def _pool_on():
    """Two threads with the OpenBLAS callback registered; skips where it cannot be (another
    BLAS, an older OpenBLAS, TB_BLAS_POOL=0)."""
    from tensorbrain import _threads
    tb.set_num_threads(2)
    why = _threads._share_blas_pool(_native.module())
    if why != "registered":
        pytest.skip(f"the BLAS pool is {why}")


def _products(n=4):
    a = [rng.standard_normal((300 + 7 * i, 257)).astype(np.float32) for i in range(n)]
    b = [rng.standard_normal((257, 411)).astype(np.float32) for _ in range(n)]
    want = [x.astype(np.float64) @ y.astype(np.float64) for x, y in zip(a, b)]
    return a, b, want


def _in_threads(work, n=4, timeout=120):
    """work(i) on n Python threads at once; fails if one has not finished within timeout s."""
    import threading
    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread hung on the pool"


def test_blas_products_run_on_the_pool_and_are_right(waiting):
    C = _native.module()
    before = tb.get_num_threads()
    try:
        _pool_on()
        a, b, want = _products()
        ran = C._blas_jobs_run()
        got = [x @ y for x, y in zip(a, b)]
        assert C._blas_jobs_run() >= ran + 2 * len(a), "OpenBLAS did not run its jobs through the pool"
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-3)
    finally:
        tb.set_num_threads(before)


def test_pool_survives_concurrent_products_and_kernels():
    """Four Python threads each interleave BLAS products (jobs on the pool, each needing its own
    worker while its sibling waits) with split kernels: every result right, nothing hangs."""
    C = _native.module()
    before = tb.get_num_threads()
    try:
        _pool_on()
        a, b, want = _products()
        x = rng.standard_normal((64, 1031)).astype(np.float32)
        tb.set_num_threads(1)
        want_k = C.log_softmax_rows_forward(x)
        _pool_on()
        bad = []

        def work(i):
            for r in range(15):
                j = (i + r) % len(a)
                if not np.allclose(a[j] @ b[j], want[j], rtol=1e-4, atol=1e-3):
                    bad.append(("product", i, r))
                if not np.array_equal(C.log_softmax_rows_forward(x), want_k):
                    bad.append(("kernel", i, r))
        _in_threads(work)
        assert not bad
    finally:
        tb.set_num_threads(before)


def test_float32_and_float64_products_at_once_are_right():
    """Python threads running float32 and float64 products at the same time, each product's
    jobs on the pool: every result right (through the callback, two regions at once gave values
    near 1e21 until the pool ran one region at a time, csrc/kernels/parallel.cpp)."""
    before = tb.get_num_threads()
    try:
        _pool_on()
        a32 = rng.standard_normal((300, 300)).astype(np.float32)
        a64 = a32.astype(np.float64)
        want = a64 @ a64
        bad = []

        def work(i):
            a = a32 if i % 2 else a64
            for r in range(30):
                if not np.allclose(a @ a, want, rtol=1e-3, atol=1e-2):
                    bad.append((a.dtype.name, i, r))
        _in_threads(work)
        assert not bad, f"{len(bad)} wrong products, e.g. {bad[:3]}"
    finally:
        tb.set_num_threads(before)

def _blas_child(q):
    a = np.arange(512 * 512, dtype=np.float32).reshape(512, 512) % 7
    got = a @ a.T
    want = a.astype(np.float64) @ a.T.astype(np.float64)
    q.put(bool(np.array_equal(got, want.astype(np.float32))))


def test_forked_child_runs_blas_through_a_fresh_pool():
    """A child forked while the parent's pool has workers (which do not come along) makes its
    own pool for OpenBLAS's jobs: the product is right and the child does not hang."""
    before = tb.get_num_threads()
    try:
        _pool_on()
        a, b, _ = _products(1)
        a[0] @ b[0]                                         # the parent's pool has workers
        _forked_child_says_true(_blas_child, "a BLAS product")
    finally:
        tb.set_num_threads(before)
