"""roll, diag, trace, repeat_interleave, meshgrid, kron (rearrange.py), cumprod and nan_to_num:
values against NumPy, gradients against float64 finite differences and, where installed,
values and gradients against torch."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.testing import gradcheck

rng = np.random.default_rng(2)
X = rng.standard_normal((3, 4))
V = rng.standard_normal(3)


@pytest.mark.parametrize("shifts,dims", [(2, None), (-1, 1), ((1, -2), (0, -1)), (5, 0)])
def test_roll_values_and_gradients(shifts, dims):
    gradcheck(lambda x: tb.roll(x, shifts, dims), [X],
              numpy_fn=lambda x: np.roll(x, shifts, axis=dims),
              torch_fn=lambda x: x.roll(shifts, dims) if dims is not None else x.roll(shifts))


@pytest.mark.parametrize("k", [0, 1, -2])
def test_diag_values_and_gradients(k):
    gradcheck(lambda v: tb.diag(v, k), [V], numpy_fn=lambda v: np.diag(v, k),
              torch_fn=lambda v: v.diag(k))
    gradcheck(lambda x: x.diag(k), [X], numpy_fn=lambda x: np.diag(x, k),
              torch_fn=lambda x: x.diag(k))
    with pytest.raises(RuntimeError, match="1D or 2D"):
        tb.zeros(2, 2, 2).diag()


@pytest.mark.parametrize("m", [X, X.T, X[:3, :3]])
def test_trace_values_and_gradients(m):
    gradcheck(lambda x: tb.trace(x), [m], numpy_fn=np.trace, torch_fn=lambda x: x.trace())
    got = tb.tensor([[1, 2], [3, 4]], dtype=tb.int32).trace()
    assert got.dtype == tb.int64 and got.item() == 5


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_cumprod_values_and_gradients(dim):
    gradcheck(lambda x: x.cumprod(dim), [X], numpy_fn=lambda x: np.cumprod(x, axis=dim),
              torch_fn=lambda x: x.cumprod(dim))
    with_zeros = X.copy()
    with_zeros[1, 1] = with_zeros[2, 3] = with_zeros[0, 0] = 0.0
    with_zeros[2, 0] = 0.0                                # two zeros in one column
    gradcheck(lambda x: tb.cumprod(x, dim), [with_zeros],
              numpy_fn=lambda x: np.cumprod(x, axis=dim), torch_fn=lambda x: x.cumprod(dim))
    got = tb.tensor([1, 2, 3], dtype=tb.int32).cumprod(0)
    assert got.dtype == tb.int64 and got.tolist() == [1, 2, 6]


def test_repeat_interleave_values_and_gradients():
    gradcheck(lambda x: x.repeat_interleave(2), [X], numpy_fn=lambda x: np.repeat(x, 2),
              torch_fn=lambda x: x.repeat_interleave(2))
    reps = np.array([2, 0, 1, 3])
    gradcheck(lambda x, r: tb.repeat_interleave(x, r, dim=-1), [X, reps],
              numpy_fn=lambda x, r: np.repeat(x, r, axis=1),
              torch_fn=lambda x, r: x.repeat_interleave(r, dim=-1))
    gradcheck(lambda x, r: tb.repeat_interleave(x, r, dim=0), [X, np.array([3])],
              numpy_fn=lambda x, r: np.repeat(x, 3, axis=0),
              torch_fn=lambda x, r: x.repeat_interleave(r, dim=0))
    ids = tb.repeat_interleave(tb.tensor([2, 0, 3]))
    assert ids.dtype == tb.int64
    np.testing.assert_array_equal(ids.numpy(), np.repeat(np.arange(3), [2, 0, 3]))


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid_values_and_gradients(indexing):
    a, b, c = rng.standard_normal(2), rng.standard_normal(3), rng.standard_normal(4)
    gradcheck(lambda a, b, c: tb.meshgrid(a, b, c, indexing=indexing), [a, b, c],
              numpy_fn=lambda a, b, c: tuple(np.meshgrid(a, b, c, indexing=indexing)),
              torch_fn=lambda a, b, c: tuple(torch_meshgrid(a, b, c, indexing)))
    grids = tb.meshgrid([tb.tensor([1, 2]), tb.tensor([3, 4, 5])], indexing=indexing)
    want = np.meshgrid([1, 2], [3, 4, 5], indexing=indexing)
    for g, w in zip(grids, want):
        np.testing.assert_array_equal(g.numpy(), w)


def torch_meshgrid(a, b, c, indexing):
    import torch
    return torch.meshgrid(a, b, c, indexing=indexing)


@pytest.mark.parametrize("sa,sb", [((2, 3), (3, 2)), ((3,), (2, 2)), ((2, 1, 2), (2,))])
def test_kron_values_and_gradients(sa, sb):
    a, b = rng.standard_normal(sa), rng.standard_normal(sb)
    gradcheck(lambda a, b: tb.kron(a, b), [a, b], numpy_fn=np.kron,
              torch_fn=lambda a, b: a.kron(b))
    got = tb.kron(tb.tensor([[1, 2]]), tb.tensor([[1], [10]]))
    assert got.dtype == tb.int64
    np.testing.assert_array_equal(got.numpy(), np.kron([[1, 2]], [[1], [10]]))


def test_nan_to_num_values_and_gradients():
    x = np.array([np.nan, np.inf, -np.inf, 1.5, -2.0])
    gradcheck(lambda x: tb.nan_to_num(x), [x], numpy_fn=np.nan_to_num,
              torch_fn=lambda x: x.nan_to_num(), check_grad=False)
    gradcheck(lambda x: x.nan_to_num(1.0, 2.0, -3.0), [x],
              numpy_fn=lambda x: np.nan_to_num(x, nan=1.0, posinf=2.0, neginf=-3.0),
              torch_fn=lambda x: x.nan_to_num(1.0, 2.0, -3.0), check_grad=False)
    f32 = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)
    np.testing.assert_array_equal(tb.tensor(f32).nan_to_num().numpy(), np.nan_to_num(f32))
    u = tb.tensor([np.nan, 1.0])
    u.nan_to_num_(nan=-1.0)
    np.testing.assert_array_equal(u.numpy(), np.nan_to_num(np.array([np.nan, 1.0]), nan=-1.0))
    t = tb.tensor(x, requires_grad=True)
    t.nan_to_num().sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.isfinite(x).astype(float))
    torch = pytest.importorskip("torch")
    tt = torch.tensor(x, requires_grad=True)
    tt.nan_to_num().sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), tt.grad.numpy())
