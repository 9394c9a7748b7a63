"""CSR / CSC tensors against torch's: construction, conversions, indices, matmul values and
gradients, errors; COO's sparse_resize_."""
import numpy as np
import pytest

import tensorbrain as tb

torch = pytest.importorskip("torch")

DENSE = [[0.0, 2.0, 0.0, 1.5], [3.0, 0.0, 4.0, 0.0], [0.0, 0.0, 0.0, 0.0]]


def _same(got, want):
    np.testing.assert_allclose(np.asarray(got.tolist()), want.detach().numpy(), rtol=1e-12)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_conversions_and_indices_match_torch(fmt):
    d, td = tb.tensor(DENSE), torch.tensor(DENSE, dtype=torch.float64)
    for got, want in ((getattr(d, f"to_sparse_{fmt}")(), getattr(td, f"to_sparse_{fmt}")()),
                      (d.to_sparse(layout=getattr(tb, f"sparse_{fmt}")),
                       td.to_sparse(layout=getattr(torch, f"sparse_{fmt}"))),
                      (d.to_sparse().to_sparse(layout=getattr(tb, f"sparse_{fmt}")),
                       td.to_sparse().to_sparse(layout=getattr(torch, f"sparse_{fmt}")))):
        assert repr(got.layout) == repr(want.layout)
        assert (got.is_sparse, got.is_sparse_csr) == (want.is_sparse, want.is_sparse_csr)
        names = ("crow_indices", "col_indices") if fmt == "csr" else ("ccol_indices", "row_indices")
        for name in names:
            assert getattr(got, name)().tolist() == getattr(want, name)().tolist()
        _same(got.values(), want.values())
        _same(got.to_dense(), want.to_dense())
        coo, tcoo = got.to_sparse_coo(), want.to_sparse_coo()
        assert coo._indices().tolist() == tcoo._indices().tolist()
        assert coo.is_coalesced() == tcoo.is_coalesced()
        assert repr(got.t().layout) == repr(want.t().layout)
        _same(got.t().to_dense(), want.t().to_dense())
        assert tuple(got.shape) == tuple(want.shape) and got._nnz() == want._nnz()
        other = "crow_indices" if fmt == "csc" else "ccol_indices"
        errs = []
        for t in (got, want):
            with pytest.raises(RuntimeError) as e:
                getattr(t, other)()
            errs.append(str(e.value))
            with pytest.raises(RuntimeError, match="indices expected sparse coordinate"):
                t.indices()
        assert errs[0] == errs[1]
    text = repr(tb.tensor([[0.0, 1.0]]).to_sparse_csr())
    assert text.startswith("tensor(crow_indices=tensor([0, 1]),") and \
        text.endswith("layout=torch.sparse_csr)")


@pytest.mark.parametrize("fmt", ["csr", "csc"])
def test_constructors_and_matmul_match_torch(fmt):
    comp, plain, vals = [0, 1, 3, 3], [1, 0, 2], [2.0, 3.0, 4.0]
    make = getattr(tb, f"sparse_{fmt}_tensor")
    tmake = getattr(torch, f"sparse_{fmt}_tensor")
    for size in (None, (3, 5) if fmt == "csr" else (5, 3)):
        args = (torch.tensor(comp), torch.tensor(plain), torch.tensor(vals, dtype=torch.float64))
        s, ts = make(comp, plain, vals, size), tmake(*args, *((size,) if size else ()))
        assert tuple(s.shape) == tuple(ts.shape)
        _same(s.to_dense(), ts.to_dense())
        m = np.arange(s.shape[1] * 2, dtype=np.float64).reshape(s.shape[1], 2)
        x, tx = tb.tensor(m, requires_grad=True), torch.tensor(m, requires_grad=True)
        for got, want in ((tb.sparse.mm(s, x), torch.sparse.mm(ts, tx)), (s @ x, ts @ tx)):
            _same(got, want)
            (got * got).sum().backward()
            (want * want).sum().backward()
            _same(x.grad, tx.grad)
    with pytest.raises(RuntimeError, match="must start at 0"):
        make([1, 2], [0], [1.0])
    with pytest.raises(RuntimeError):
        tmake(torch.tensor([1, 2]), torch.tensor([0]), torch.tensor([1.0]), check_invariants=True)


def test_gradients_reach_the_dense_source_as_in_torch():
    d = tb.tensor(DENSE, requires_grad=True)
    td = torch.tensor(DENSE, dtype=torch.float64, requires_grad=True)
    m = np.arange(8.0).reshape(4, 2)
    x, tx = tb.tensor(m, requires_grad=True), torch.tensor(m, requires_grad=True)
    mm = {tb: tb.sparse.mm, torch: torch.sparse.mm}
    steps = [lambda t, y: mm[tb if isinstance(t, tb.Tensor) else torch](t.to_sparse_csr(), y).pow(2).sum(),
             lambda t, y: t.to_sparse_csr().to_dense().pow(2).sum(),
             lambda t, y: t.to_sparse_csc().to_dense().pow(3).sum(),
             lambda t, y: t.to_sparse_csr().values().sum()]
    for step in steps:
        step(d, x).backward()
        step(td, tx).backward()
        _same(d.grad, td.grad)
        _same(x.grad, tx.grad)


def test_dense_errors_and_unsupported_layouts():
    d, td = tb.ones(2, 2), torch.ones(2, 2)
    for name in ("crow_indices", "col_indices", "ccol_indices", "row_indices"):
        errs = []
        for t in (d, td, d.to_sparse(), td.to_sparse()):
            with pytest.raises(RuntimeError) as e:
                getattr(t, name)()
            errs.append(str(e.value))
        assert errs[0] == errs[1] and errs[2] == errs[3]
    with pytest.raises(NotImplementedError, match="2-D"):
        tb.ones(2, 2, 2).to_sparse_csr()
    with pytest.raises(NotImplementedError, match="BSR|blocksize"):
        d.to_sparse(layout=tb.sparse_bsr, blocksize=(1, 1))


def test_coo_sparse_resize_matches_torch():
    s, ts = tb.tensor(DENSE).to_sparse(), torch.tensor(DENSE, dtype=torch.float64).to_sparse()
    assert s.sparse_resize_((4, 6), 2, 0) is s
    ts.sparse_resize_((4, 6), 2, 0)
    _same(s.to_dense(), ts.to_dense())
    for bad in (((1, 1), 2, 0), ((4, 6, 1), 2, 1)):
        with pytest.raises(RuntimeError):
            ts.sparse_resize_(*bad)
        with pytest.raises(RuntimeError):
            s.sparse_resize_(*bad)
    empty, tempty = tb.sparse_coo_tensor(tb.zeros(2, 0, dtype=tb.int64), tb.zeros(0), (2, 2)), \
        torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.int64), torch.zeros(0), (2, 2))
    empty.sparse_resize_((1, 3, 2), 1, 2)
    tempty.sparse_resize_((1, 3, 2), 1, 2)
    assert tuple(empty.shape) == tuple(tempty.shape) and empty.sparse_dim() == tempty.sparse_dim()
    with pytest.raises(NotImplementedError):
        tb.ones(2).sparse_resize_((3,), 1, 0)
