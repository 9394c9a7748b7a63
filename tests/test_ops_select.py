"""nonzero, masked_select, unique, bincount, count_nonzero, take_along_dim, median, kthvalue:
values against NumPy, gradients against float64 finite differences and, where installed,
values and gradients against torch."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.testing import gradcheck

rng = np.random.default_rng(1)
X = rng.standard_normal((3, 5))             # distinct values: medians and kth values unique
INTS = np.array([[0, 3, 0, 2], [1, 0, 0, 7], [3, 3, 9, 0]])


def test_nonzero_matches_numpy():
    t = tb.tensor(INTS)
    got = t.nonzero()
    assert got.dtype == tb.int64
    np.testing.assert_array_equal(got.numpy(), np.argwhere(INTS))
    for g, w in zip(tb.nonzero(t, as_tuple=True), np.nonzero(INTS)):
        np.testing.assert_array_equal(g.numpy(), w)
    assert tuple(tb.nonzero(tb.tensor(5)).shape) == (1, 0)
    assert tb.nonzero(tb.zeros(2, 2)).shape == (0, 2)


def test_masked_select_values_and_gradients():
    mask = X > 0.2
    gradcheck(lambda x, m: tb.masked_select(x, m), [X, mask], numpy_fn=lambda x, m: x[m],
              torch_fn=lambda x, m: x.masked_select(m))
    row_mask = np.array([True, False, True, True, False])    # broadcast against X's rows
    gradcheck(lambda x, m: x.masked_select(m), [X, row_mask],
              numpy_fn=lambda x, m: x[np.broadcast_to(m, x.shape)],
              torch_fn=lambda x, m: x.masked_select(m))
    with pytest.raises(RuntimeError, match="Bool"):
        tb.tensor(X).masked_select(tb.tensor(INTS[:, :1]))


@pytest.mark.parametrize("data", [INTS, np.array([2.5, -1.0, 2.5, 0.0], dtype=np.float32)])
def test_unique_matches_numpy(data):
    values, inverse, counts = np.unique(data, return_inverse=True, return_counts=True)
    t = tb.tensor(data)
    np.testing.assert_array_equal(tb.unique(t).numpy(), values)
    u, i, c = t.unique(sorted=True, return_inverse=True, return_counts=True)
    assert u.dtype == t.dtype and i.dtype == c.dtype == tb.int64
    np.testing.assert_array_equal(u.numpy(), values)
    np.testing.assert_array_equal(i.numpy(), inverse.reshape(data.shape))
    np.testing.assert_array_equal(c.numpy(), counts)
    _, c2 = tb.unique(t, return_counts=True)
    np.testing.assert_array_equal(c2.numpy(), counts)
    with pytest.raises(NotImplementedError, match="dim"):
        tb.unique(t, dim=0)


def test_bincount_matches_numpy_and_torch_dtypes():
    x = np.array([0, 4, 1, 1, 4, 4])
    w = np.array([0.5, 1.0, 2.0, 0.25, 1.0, 3.0], dtype=np.float32)
    got = tb.bincount(tb.tensor(x))
    assert got.dtype == tb.int64
    np.testing.assert_array_equal(got.numpy(), np.bincount(x))
    np.testing.assert_array_equal(tb.tensor(x).bincount(minlength=8).numpy(), np.bincount(x, minlength=8))
    gw = tb.bincount(tb.tensor(x), tb.tensor(w))
    assert gw.dtype == tb.float32     # torch keeps float32 weights' dtype, promotes the rest
    np.testing.assert_allclose(gw.numpy(), np.bincount(x, w))
    assert tb.bincount(tb.tensor(x), tb.tensor(x)).dtype == tb.float64
    with pytest.raises(RuntimeError, match="non-negative"):
        tb.bincount(tb.tensor([1, -1]))


@pytest.mark.parametrize("dim", [None, 0, -1, (0, 1)])
def test_count_nonzero_matches_numpy(dim):
    got = tb.count_nonzero(tb.tensor(INTS), dim=dim)
    assert got.dtype == tb.int64
    np.testing.assert_array_equal(got.numpy(), np.count_nonzero(INTS, axis=dim))


def test_take_along_dim_values_and_gradients():
    idx = np.argsort(X, axis=1)
    gradcheck(lambda x, i: tb.take_along_dim(x, i, dim=1), [X, idx],
              numpy_fn=lambda x, i: np.take_along_axis(x, i, axis=1),
              torch_fn=lambda x, i: x.take_along_dim(i, dim=1))
    bcast = np.array([[0, 4, 4]])            # one index row broadcast over X's 3 rows, repeats
    gradcheck(lambda x, i: x.take_along_dim(i, dim=-1), [X, bcast],
              numpy_fn=lambda x, i: np.take_along_axis(x, i, axis=1),
              torch_fn=lambda x, i: x.take_along_dim(i, dim=-1))
    flat = np.array([14, 0, 7])
    gradcheck(lambda x, i: tb.take_along_dim(x, i), [X, flat],
              numpy_fn=lambda x, i: x.reshape(-1)[i],
              torch_fn=lambda x, i: x.take_along_dim(i))


def test_median_values_and_gradients():
    gradcheck(lambda x: x.median(), [X],
              numpy_fn=lambda x: np.sort(x, axis=None)[(x.size - 1) // 2],   # the lower median
              torch_fn=lambda x: x.median())
    even = X[:, :4]
    for dim in (0, 1, -1):
        n = even.shape[dim]
        gradcheck(lambda x: tb.median(x, dim, keepdim=True), [even],
                  numpy_fn=lambda x: (np.take(np.sort(x, axis=dim), [(n - 1) // 2], axis=dim),
                                      np.take(np.argsort(x, axis=dim), [(n - 1) // 2], axis=dim)),
                  torch_fn=lambda x: tuple(x.median(dim, keepdim=True)))
    assert np.isnan(tb.tensor([1.0, np.nan, 2.0]).median().item())
    v, i = tb.median(tb.tensor([[1.0, np.nan, 2.0, np.nan]]), 1)
    assert np.isnan(v.item()) and i.tolist() == [1]          # torch: the first NaN


@pytest.mark.parametrize("k,dim", [(1, -1), (3, 1), (2, 0)])
def test_kthvalue_values_and_gradients(k, dim):
    gradcheck(lambda x: tb.kthvalue(x, k, dim), [X],
              numpy_fn=lambda x: (np.take(np.sort(x, axis=dim), k - 1, axis=dim),
                                  np.take(np.argsort(x, axis=dim), k - 1, axis=dim)),
              torch_fn=lambda x: tuple(x.kthvalue(k, dim)))
    with pytest.raises(RuntimeError, match="out of range"):
        tb.tensor(X).kthvalue(9)
