"""Sparse COO tensors (tensorbrain/sparse.py): construction, coalesce, to_dense, to_sparse and
sparse.mm / spmm / mm, values and gradients against torch."""
import numpy as np
import pytest

import tensorbrain as tb

RNG = np.random.default_rng(0)
IDX = np.array([[0, 2, 1, 2, 0], [1, 0, 3, 0, 1]])   # duplicates at (0,1) and (2,0)
VAL = np.array([1.0, 2.0, 3.0, 4.0, 5.0])


def test_construction_and_coalesce_follow_torch():
    s = tb.sparse_coo_tensor(IDX, VAL, (3, 4))
    assert s.is_sparse and s.layout is tb.sparse_coo and isinstance(s, tb.Tensor)
    assert s.shape == (3, 4) and s._nnz() == 5 and not s.is_coalesced()
    with pytest.raises(RuntimeError, match="uncoalesced"):
        s.indices()
    c = s.coalesce()
    assert c.is_coalesced() and c.indices().tolist() == [[0, 1, 2], [1, 3, 0]]
    assert c.values().tolist() == [6.0, 3.0, 6.0]
    assert tb.sparse_coo_tensor(IDX, VAL).shape == (3, 4)               # inferred size
    with pytest.raises(RuntimeError, match="size is inconsistent"):
        tb.sparse_coo_tensor(IDX, VAL, (2, 4))
    with pytest.raises(RuntimeError, match="same nnz"):
        tb.sparse_coo_tensor(IDX, VAL[:3], (3, 4))
    torch = pytest.importorskip("torch")
    t = torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL), (3, 4))
    np.testing.assert_array_equal(s.to_dense().numpy(), t.to_dense().numpy())
    np.testing.assert_array_equal(c.indices().numpy(), t.coalesce().indices().numpy())
    assert torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL)).shape == (3, 4)
    with pytest.raises(RuntimeError):
        t.indices()


def test_to_sparse_roundtrip_and_legacy_constructor():
    x = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -1.0]])
    s = tb.tensor(x).to_sparse()
    assert s.is_coalesced() and s.indices().tolist() == [[0, 1, 1], [1, 0, 2]]
    np.testing.assert_array_equal(s.to_dense().numpy(), x)
    assert tb.tensor(x).to_dense() is not None and not tb.tensor(x).is_sparse
    legacy = tb.sparse.FloatTensor(tb.tensor(IDX), tb.tensor(VAL, dtype=tb.float32),
                                   tb.Size([3, 4]))
    assert legacy.dtype == tb.float32 and legacy.to_dense().sum().item() == VAL.sum()
    torch = pytest.importorskip("torch")
    np.testing.assert_array_equal(s.indices().numpy(),
                                  torch.tensor(x).to_sparse().indices().numpy())


@pytest.mark.parametrize("entry", ["sparse.mm", "spmm", "mm", "matmul", "@"])
def test_sparse_times_dense_gradients_match_torch(entry):
    torch = pytest.importorskip("torch")
    d0 = RNG.standard_normal((4, 2))
    cot = RNG.standard_normal((3, 2))
    results = []
    for lib in (tb, torch):
        v = lib.tensor(VAL, requires_grad=True)
        d = lib.tensor(d0, requires_grad=True)
        s = lib.sparse_coo_tensor(lib.tensor(IDX), v, (3, 4))
        call = {"sparse.mm": lambda: lib.sparse.mm(s, d), "spmm": lambda: lib.spmm(s, d),
                "mm": lambda: lib.mm(s, d), "matmul": lambda: s.matmul(d),
                "@": lambda: s @ d}[entry]
        out = call()
        (out * lib.tensor(cot)).sum().backward()
        results.append((out.detach().numpy(), v.grad.numpy(), d.grad.numpy()))
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_to_dense_sum_and_softmax_match_torch():
    torch = pytest.importorskip("torch")
    out = []
    for lib in (tb, torch):
        v = lib.tensor(VAL, requires_grad=True)
        s = lib.sparse_coo_tensor(lib.tensor(IDX), v, (3, 4)).coalesce()
        sm = lib.sparse.softmax(s, 1)
        loss = (s.to_dense() ** 2).sum() + lib.sparse.sum(s) + (sm.to_dense() * 3).sum() \
            + (lib.sparse.log_softmax(s, 0).to_dense() ** 2).sum()
        loss.backward()
        out.append((loss.item(), v.grad.numpy(), sm.to_dense().detach().numpy()))
    np.testing.assert_allclose(out[0][0], out[1][0], rtol=1e-12)
    np.testing.assert_allclose(out[0][1], out[1][1], rtol=1e-10)
    np.testing.assert_allclose(out[0][2], out[1][2], rtol=1e-12)


def test_dense_fallback_and_scalar_ops():
    s = tb.sparse_coo_tensor(IDX, VAL, (3, 4))
    dense = s.to_dense().numpy()
    np.testing.assert_array_equal((s * 2).to_dense().numpy(), dense * 2)
    assert (s * 2).is_sparse and (s / 2).is_sparse and (-s).is_sparse
    np.testing.assert_array_equal((s + s).to_dense().numpy(), dense * 2)
    np.testing.assert_array_equal(s.t().to_dense().numpy(), dense.T)
    np.testing.assert_array_equal((s + tb.ones(3, 4)).numpy(), dense + 1)   # dense result
    np.testing.assert_array_equal(tb.sum(s, 1).numpy(), dense.sum(1))
    assert s.float().dtype == tb.float32 and s.clone()._nnz() == 5


@pytest.mark.parametrize("offsets,shape", [([0, -1, -2], (3, 3)), ([1, -2, 0], (3, 4)),
                                           ([2, -1, 3], (4, 3)), ([0, 1, -1], (5, 5))])
def test_spdiags_matches_torch(offsets, shape):
    """sparse.spdiags: the same COO entries (order, explicit zeros) as torch's; the values keep
    their graph (a gradient torch does not have)."""
    torch = pytest.importorskip("torch")
    d0 = np.arange(12.0).reshape(3, 4)
    d = tb.tensor(d0, requires_grad=True)
    got = tb.sparse.spdiags(d, tb.tensor(offsets), shape)
    want = torch.sparse.spdiags(torch.tensor(d0), torch.tensor(offsets), shape)
    assert got.is_coalesced() == want.is_coalesced()
    np.testing.assert_array_equal(got._indices().numpy(), want._indices().numpy())
    np.testing.assert_array_equal(got._values().detach().numpy(), want._values().numpy())
    np.testing.assert_array_equal(got.to_dense().detach().numpy(), want.to_dense().numpy())
    got.to_dense().sum().backward()
    used = np.zeros_like(d0)
    rows, cols = shape
    for i, k in enumerate(offsets):
        for j in range(max(0, k), min(cols, rows + k, 4)):
            used[i, j] = 1
    np.testing.assert_array_equal(d.grad.numpy(), used)
    with pytest.raises(ValueError, match="duplicate"):
        tb.sparse.spdiags(d, tb.tensor([0, 0, 1]), shape)
