"""scatter / scatter_add / index_add and their in-place forms: values against NumPy written
out by hand (np.add.at), values and gradients against float64 finite differences and torch."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.testing import gradcheck

rng = np.random.default_rng(0)
X = rng.standard_normal((3, 4))
IDX = np.array([[0, 2, 1], [2, 2, 0]])      # smaller than SRC in both dims, repeats along dim 0
SRC = rng.standard_normal((3, 4))
IDX1 = np.array([[3, 0], [1, 2], [0, 2]])   # along dim 1 (and -1), no repeats within a row


def _np_scatter_add(x, dim, idx, src):
    out = x.copy()
    grid = list(np.ix_(*[np.arange(s) for s in idx.shape]))
    grid[dim] = idx
    np.add.at(out, tuple(grid), src[tuple(slice(0, n) for n in idx.shape)])
    return out


def _np_scatter(x, dim, idx, src):
    out = x.copy()
    for pos in np.ndindex(idx.shape):
        target = list(pos)
        target[dim] = idx[pos]
        out[tuple(target)] = src[pos] if isinstance(src, np.ndarray) else src
    return out


@pytest.mark.parametrize("dim", [0, -2])
def test_scatter_add_values_and_gradients(dim):
    # torch's backward refuses a src larger than index (its ScatterAddBackward0 returns an
    # index-shaped gradient), so the larger src is checked against finite differences only
    gradcheck(lambda x, i, s: tb.scatter_add(x, dim, i, s), [X, IDX, SRC],
              numpy_fn=lambda x, i, s: _np_scatter_add(x, dim % 2, i, s))
    gradcheck(lambda x, i, s: tb.scatter_add(x, dim, i, s), [X, IDX, SRC[:2, :3]],
              numpy_fn=lambda x, i, s: _np_scatter_add(x, dim % 2, i, s),
              torch_fn=lambda x, i, s: x.scatter_add(dim, i, s))


@pytest.mark.parametrize("dim", [1, -1])
def test_scatter_values_and_gradients(dim):
    gradcheck(lambda x, i, s: x.scatter(dim, i, s), [X, IDX1, SRC],
              numpy_fn=lambda x, i, s: _np_scatter(x, 1, i, s))
    gradcheck(lambda x, i, s: x.scatter(dim, i, s), [X, IDX1, SRC[:, :2]],
              numpy_fn=lambda x, i, s: _np_scatter(x, 1, i, s),
              torch_fn=lambda x, i, s: x.scatter(dim, i, s))
    gradcheck(lambda x, i: tb.scatter(x, dim, i, value=2.5), [X, IDX1],
              numpy_fn=lambda x, i: _np_scatter(x, 1, i, 2.5),
              torch_fn=lambda x, i: x.scatter(dim, i, 2.5))


@pytest.mark.parametrize("alpha", [1, -0.5])
def test_index_add_values_and_gradients(alpha):
    idx = np.array([3, 0, 3])
    src = rng.standard_normal((3, 3))

    def np_fn(x, i, s):
        out = x.copy()
        np.add.at(out, (slice(None), i), alpha * s)
        return out
    gradcheck(lambda x, i, s: tb.index_add(x, 1, i, s, alpha=alpha), [X, idx, src],
              numpy_fn=np_fn, torch_fn=lambda x, i, s: x.index_add(-1, i, s, alpha=alpha))


def test_inplace_forms_record_src_only_graph():
    src = tb.tensor([1.0, 2.0, 3.0], requires_grad=True)
    out = tb.zeros(3).scatter_add_(0, tb.tensor([0, 2, 0]), src)
    assert out.tolist() == [4.0, 0.0, 2.0]
    (out * tb.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert src.grad.tolist() == [1.0, 3.0, 1.0]
    y = tb.ones(2, 2)
    y.index_add_(0, tb.tensor([1]), tb.tensor([[5.0, 6.0]]))
    assert y.tolist() == [[1.0, 1.0], [6.0, 7.0]]
    z = tb.zeros(2, 3)
    assert z.scatter_(1, tb.tensor([[2], [0]]), 4.0) is z
    assert z.tolist() == [[0.0, 0.0, 4.0], [4.0, 0.0, 0.0]]
    assert z.dtype == tb.float32


def test_integer_scatter_add_keeps_dtype_and_errors():
    out = tb.zeros(4, dtype=tb.int64).scatter_add(0, tb.tensor([1, 1, 3]), tb.tensor([1, 1, 1]))
    assert out.dtype == tb.int64 and out.tolist() == [0, 2, 0, 1]
    with pytest.raises(NotImplementedError, match="reduce"):
        tb.zeros(3).scatter_(0, tb.tensor([0]), tb.ones(1), reduce="add")
    with pytest.raises(RuntimeError, match="same number of dimensions"):
        tb.zeros(3, 3).scatter_add(0, tb.tensor([0]), tb.ones(3, 3))
