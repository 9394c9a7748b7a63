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
