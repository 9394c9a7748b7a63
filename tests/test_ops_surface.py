"""The shape, indexing, statistics and matrix-product ops added for issue 29 (_ops/combine.py,
indexing.py, stats.py, blas.py, convert.py, _tensor_views_inplace.py): each case runs the same
call on TensorBrain and torch and compares values and (for float inputs) gradients, and
checks TensorBrain's gradient against finite differences (which needs no torch)."""
import numpy as np
import pytest

import tensorbrain as tb
from tensorbrain.testing import gradcheck

R = np.random.default_rng(0)


def A(*shape):
    return R.standard_normal(shape)


def I(*vals):  # noqa: E743  (an int64 index array)
    return np.array(vals, dtype=np.int64)


def _lib(x):
    return tb if isinstance(x, tb.Tensor) or x is tb else __import__("torch")


def _first(out):
    """The outputs to compare: tuples and named tuples flattened."""
    return out if isinstance(out, (tuple, list)) else (out,)


# name -> (call(lib, *tensors), inputs); lib is tb or torch, tensors are built from inputs
CASES = {
    "movedim": (lambda L, x: L.movedim(x, (0, 1), (2, 0)), [A(2, 3, 4)]),
    "moveaxis": (lambda L, x: x.moveaxis(-1, 0), [A(2, 3, 4)]),
    "ravel": (lambda L, x: x.t().ravel(), [A(2, 3)]),
    "tile": (lambda L, x: x.tile((2, 1, 3)), [A(2, 3)]),
    "broadcast_to": (lambda L, x: L.broadcast_to(x, (4, 2, 3)), [A(2, 1)]),
    "select": (lambda L, x: x.select(1, -1), [A(2, 3, 4)]),
    "diagonal": (lambda L, x: x.diagonal(1, 2, 0), [A(3, 2, 4)]),
    "diagonal_neg": (lambda L, x: L.diagonal(x, -1), [A(4, 3)]),
    "unfold": (lambda L, x: x.unfold(1, 3, 1), [A(2, 5)]),
    "unfold_step": (lambda L, x: x.unfold(0, 2, 3), [A(8, 2)]),
    "as_strided": (lambda L, x: L.as_strided(x, (3, 3), (1, 2), 1), [A(10)]),
    "atleast_3d": (lambda L, x, y: L.atleast_3d(x, y), [A(3), A(2, 2)]),
    "vstack": (lambda L, x, y: L.vstack([x, y]), [A(3), A(2, 3)]),
    "hstack": (lambda L, x, y: L.hstack([x, y]), [A(2, 1), A(2, 3)]),
    "dstack": (lambda L, x, y: L.dstack([x, y]), [A(3), A(3)]),
    "column_stack": (lambda L, x, y: L.column_stack([x, y]), [A(3), A(3, 2)]),
    "tensor_split": (lambda L, x: x.tensor_split(3, 1), [A(2, 7)]),
    "tensor_split_idx": (lambda L, x: L.tensor_split(x, [1, 5, 9]), [A(7)]),
    "hsplit": (lambda L, x: x.hsplit([1]), [A(2, 3)]),
    "vsplit": (lambda L, x: L.vsplit(x, 2), [A(4, 3)]),
    "dsplit": (lambda L, x: x.dsplit(2), [A(1, 2, 4)]),
    "split_with_sizes": (lambda L, x: x.split_with_sizes([2, 1, 3], 1), [A(2, 6)]),
    "fliplr": (lambda L, x: x.fliplr(), [A(2, 3)]),
    "flipud": (lambda L, x: L.flipud(x), [A(2, 3)]),
    "rot90_1": (lambda L, x: x.rot90(), [A(2, 3)]),
    "rot90_3": (lambda L, x: L.rot90(x, -1, (1, 2)), [A(2, 3, 4)]),
    "rot90_2": (lambda L, x: x.rot90(2), [A(2, 3)]),
    "broadcast_tensors": (lambda L, x, y: L.broadcast_tensors(x, y), [A(3, 1), A(4)]),
    "block_diag": (lambda L, x, y, z: L.block_diag(x, y, z), [A(2, 2), A(3), A(1, 2)]),
    "cartesian_prod": (lambda L, x, y: L.cartesian_prod(x, y), [A(2), A(3)]),
    "combinations": (lambda L, x: L.combinations(x, 2, with_replacement=True), [A(3)]),
    "diag_embed": (lambda L, x: L.diag_embed(x, 1, 0, 2), [A(2, 3)]),
    "diagflat": (lambda L, x: x.diagflat(-1), [A(2, 2)]),
    "index_copy": (lambda L, x, s, i: x.index_copy(1, i, s), [A(2, 4), A(2, 2), I(3, 0)]),
    "index_fill": (lambda L, x, i: x.index_fill(0, i, -2.0), [A(3, 2), I(2)]),
    "index_put": (lambda L, x, v, i, j: x.index_put((i, j), v, accumulate=True),
                  [A(3, 3), A(3), I(0, 0, 2), I(1, 1, 0)]),
    "index_put_write": (lambda L, x, v, i: x.index_put((i,), v), [A(3, 2), A(2), I(2, 0)]),
    "masked_scatter": (lambda L, x, s, m: x.masked_scatter(m, s),
                       [A(2, 3), A(5), np.array([[True, False, True], [False, True, True]])]),
    "take": (lambda L, x, i: L.take(x, i), [A(3, 3), I(0, 8, 4, 4).reshape(2, 2)]),
    "put": (lambda L, x, s, i: x.put(i, s, accumulate=True), [A(2, 3), A(3), I(5, 5, 0)]),
    "select_scatter": (lambda L, x, s: L.select_scatter(x, s, 1, 0), [A(2, 3), A(2)]),
    "slice_scatter": (lambda L, x, s: L.slice_scatter(x, s, 1, 0, 4, 2), [A(2, 5), A(2, 2)]),
    "diagonal_scatter": (lambda L, x, s: L.diagonal_scatter(x, s, 1), [A(3, 3), A(2)]),
    "mode": (lambda L, x: L.mode(x, 1), [np.array([[1., 2, 2, 3, 3], [4, 1, 4, 1, 0]])]),
    "mode_keepdim": (lambda L, x: x.mode(0, keepdim=True), [np.array([[5., 1], [5, 2], [1, 2]])]),
    "cummax": (lambda L, x: x.cummax(1), [np.array([[1., 3, 2, 3, 5], [2, 1, 2, 0, 2]])]),
    "cummin": (lambda L, x: L.cummin(x, 0), [np.array([[1., 3], [0, 3], [0, 4]])]),
    "logcumsumexp": (lambda L, x: x.logcumsumexp(1), [A(2, 4) * 10]),
    "nansum": (lambda L, x: L.nansum(x, 1), [np.array([[1., np.nan, 2], [3, 4, np.nan]])]),
    "nanmean": (lambda L, x: x.nanmean(0, keepdim=True),
                [np.array([[1., np.nan], [3, 4], [np.nan, 5]])]),
    "nanmedian": (lambda L, x: x.nanmedian(1), [np.array([[3., np.nan, 1, 2], [np.nan, 5, 4, 9]])]),
    "quantile": (lambda L, x: L.quantile(x, 0.3, dim=1, keepdim=True), [A(3, 5)]),
    "quantile_vec": (lambda L, x: L.quantile(x, L.tensor([0.1, 0.5, 1.0], dtype=x.dtype), dim=0),
                     [A(6, 2)]),
    "quantile_lower": (lambda L, x: x.quantile(0.4, interpolation="lower"), [A(7)]),
    "quantile_nearest": (lambda L, x: x.quantile(0.5, interpolation="nearest"), [A(6)]),
    "quantile_midpoint": (lambda L, x: x.quantile(0.45, 0, interpolation="midpoint"), [A(6, 2)]),
    "nanquantile": (lambda L, x: L.nanquantile(x, 0.5, 1), [np.array([[1., np.nan, 3], [4, 5, 6]])]),
    "std_mean": (lambda L, x: L.std_mean(x, 1, correction=0), [A(2, 4)]),
    "var_mean": (lambda L, x: L.var_mean(x, (0, 1), keepdim=True), [A(2, 4)]),
    "aminmax": (lambda L, x: L.aminmax(x, dim=1), [A(3, 4)]),
    "dist": (lambda L, x, y: L.dist(x, y, 3), [A(2, 3), A(3)]),
    "diff": (lambda L, x, p: x.diff(n=2, dim=1, prepend=p), [A(2, 5), A(2, 1)]),
    "cov": (lambda L, x: L.cov(x), [A(3, 6)]),
    "cov_weights": (lambda L, x, f, w: L.cov(x, correction=0, fweights=f, aweights=w),
                    [A(2, 4), I(1, 2, 1, 3), np.array([0.5, 1.0, 2.0, 1.0])]),
    "corrcoef": (lambda L, x: L.corrcoef(x), [A(3, 6)]),
    "renorm": (lambda L, x: x.renorm(2, 0, 1.5), [A(3, 4)]),
    "trapezoid": (lambda L, y: L.trapezoid(y, dx=0.5), [A(2, 5)]),
    "trapezoid_x": (lambda L, y, x: L.trapezoid(y, x), [A(2, 4), np.array([0., 0.5, 2, 3])]),
    "msort": (lambda L, x: L.msort(x), [A(4, 2)]),
    "sum_to_size": (lambda L, x: x.sum_to_size(3, 1), [A(2, 3, 4)]),
    "logsumexp_like": (lambda L, x: L.logcumsumexp(x, 0), [A(5)]),
    "addmm": (lambda L, m, a, b: L.addmm(m, a, b, beta=0.5, alpha=-2), [A(3), A(2, 4), A(4, 3)]),
    "addmm_beta0": (lambda L, m, a, b: L.addmm(m, a, b, beta=0),
                    [np.full((2, 3), np.nan), A(2, 4), A(4, 3)]),
    "addmv": (lambda L, m, a, v: L.addmv(m, a, v, alpha=3), [A(2), A(2, 3), A(3)]),
    "addr": (lambda L, m, a, b: m.addr(a, b, beta=2), [A(2, 3), A(2), A(3)]),
    "baddbmm": (lambda L, m, a, b: L.baddbmm(m, a, b, alpha=0.5), [A(1, 2, 3), A(4, 2, 5), A(4, 5, 3)]),
    "addbmm": (lambda L, m, a, b: L.addbmm(m, a, b), [A(2, 3), A(4, 2, 5), A(4, 5, 3)]),
    "mv": (lambda L, a, v: a.mv(v), [A(3, 4), A(4)]),
    "inner": (lambda L, a, b: L.inner(a, b), [A(2, 3), A(4, 3)]),
    "vdot": (lambda L, a, b: L.vdot(a, b), [A(4), A(4)]),
    "ger": (lambda L, a, b: L.ger(a, b), [A(2), A(3)]),
    "cross": (lambda L, a, b: L.cross(a, b, dim=1), [A(2, 3), A(2, 3)]),
    "tensordot": (lambda L, a, b: L.tensordot(a, b, ([1, 0], [0, 2])), [A(3, 4, 5), A(4, 2, 3)]),
    "chain_matmul": (lambda L, a, b, c: L.chain_matmul(a, b, c), [A(2, 3), A(3, 4), A(4, 1)]),
    "cdist2": (lambda L, a, b: L.cdist(a, b), [A(3, 4), A(2, 4)]),
    "cdist1": (lambda L, a, b: L.cdist(a, b, 1), [A(2, 3, 4), A(2, 2, 4)]),
    "cdist3": (lambda L, a, b: L.cdist(a, b, 3), [A(3, 2), A(2, 2)]),
    "cdistinf": (lambda L, a, b: L.cdist(a, b, float("inf")), [A(3, 2), A(4, 2)]),
}
# no finite differences: ties (the running extreme, the most frequent value) make the function
# non-differentiable at these inputs; torch's gradients are compared all the same
NO_GRAD = {"mode", "mode_keepdim", "nanmedian", "cummax", "cummin"}


def _run(lib, fn, arrays, requires):
    ts = []
    for a in arrays:
        if a.dtype.kind == "f":
            t = lib.tensor(a, requires_grad=requires)
        else:
            t = lib.tensor(a)
        ts.append(t)
    return ts, _first(fn(lib, *ts))


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    fn, arrays = CASES[name]

    def ours(*ts):
        outs = [o for o in _first(fn(tb, *ts)) if isinstance(o, tb.Tensor)]
        return tuple(o for o in outs if o.dtype.kind in "fc") or outs[0]
    if not any(np.isnan(a).any() for a in arrays if a.dtype.kind == "f") and name not in NO_GRAD:
        gradcheck(ours, arrays, atol=1e-6, rtol=1e-5, check_grad=name not in ("cdistinf",))
    torch = pytest.importorskip("torch")
    ts_a, out_a = _run(tb, fn, arrays, True)
    ts_b, out_b = _run(torch, fn, arrays, True)
    assert len(out_a) == len(out_b), name
    cot = []
    for oa, ob in zip(out_a, out_b):
        np.testing.assert_allclose(oa.detach().numpy(), ob.detach().numpy(), rtol=1e-10,
                                   atol=1e-12, err_msg=name)
        assert str(oa.dtype) == str(ob.dtype).replace("torch.", ""), name
        if oa.requires_grad and ob.requires_grad:
            cot.append((oa, ob, R.standard_normal(tuple(ob.shape))))
    if not cot:
        return
    sum((oa * tb.tensor(c)).sum() for oa, _, c in cot).backward()
    sum((ob * torch.tensor(c)).sum() for _, ob, c in cot).backward()
    for ta, tt in zip(ts_a, ts_b):
        if tt.grad is not None:
            np.testing.assert_allclose(ta.grad.numpy(), tt.grad.numpy(), rtol=1e-9, atol=1e-12,
                                       err_msg=name)


REDUCES = [(r, s) for r in ("sum", "prod", "mean", "amax", "amin") for s in (True, False)]


@pytest.mark.parametrize("reduce,include_self", REDUCES)
def test_scatter_reduce_matches_torch(reduce, include_self):
    torch = pytest.importorskip("torch")
    x0, s0 = A(3, 4), A(3, 4)
    s0[0, 0] = s0[1, 0]   # a tie for amax/amin
    idx = I(0, 2, 0, 1, 0, 0, 2, 1, 1, 2, 2, 0).reshape(3, 4)
    res = []
    for lib in (tb, torch):
        x, s = lib.tensor(x0, requires_grad=True), lib.tensor(s0, requires_grad=True)
        out = x.scatter_reduce(1, lib.tensor(idx), s, reduce, include_self=include_self)
        (out * lib.tensor(np.arange(12.).reshape(3, 4))).sum().backward()
        res.append((out.detach().numpy(), x.grad.numpy(), s.grad.numpy()))
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_index_queries_match_torch():
    torch = pytest.importorskip("torch")
    seq = np.array([[1, 3, 5, 7], [2, 4, 6, 8]])
    v = np.array([[3, 6], [1, 9]])
    for right in (False, True):
        np.testing.assert_array_equal(tb.searchsorted(tb.tensor(seq), tb.tensor(v), right=right),
                                      torch.searchsorted(torch.tensor(seq), torch.tensor(v),
                                                         right=right))
        np.testing.assert_array_equal(
            tb.bucketize(tb.tensor(v), tb.tensor(seq[0]), right=right).numpy(),
            torch.bucketize(torch.tensor(v), torch.tensor(seq[0]), right=right).numpy())
    np.testing.assert_array_equal(tb.isin(tb.tensor(v), tb.tensor([3, 9])).numpy(),
                                  torch.isin(torch.tensor(v), torch.tensor([3, 9])).numpy())
    x = np.array([[0, 1, 0], [2, 0, 3]])
    np.testing.assert_array_equal(tb.argwhere(tb.tensor(x)).numpy(),
                                  torch.argwhere(torch.tensor(x)).numpy())
    u = np.array([1, 1, 2, 2, 3, 1, 1, 2])
    for a, b in zip(tb.unique_consecutive(tb.tensor(u), True, True),
                    torch.unique_consecutive(torch.tensor(u), True, True)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    m = np.array([[1, 2], [1, 2], [3, 4], [1, 2]])
    for a, b in zip(tb.unique_consecutive(tb.tensor(m), True, True, dim=0),
                    torch.unique_consecutive(torch.tensor(m), True, True, dim=0)):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for off in (-1, 0, 2):
        np.testing.assert_array_equal(tb.triu_indices(3, 4, off).numpy(),
                                      torch.triu_indices(3, 4, off).numpy())
        np.testing.assert_array_equal(tb.tril_indices(4, 3, off).numpy(),
                                      torch.tril_indices(4, 3, off).numpy())
    h = A(50)
    np.testing.assert_allclose(tb.histc(tb.tensor(h), 7).numpy(),
                               torch.histc(torch.tensor(h), 7).numpy())
    np.testing.assert_allclose(tb.histc(tb.tensor(h), 5, -1, 1).numpy(),
                               torch.histc(torch.tensor(h), 5, -1, 1).numpy())
    for a, b in zip(tb.histogram(tb.tensor(h), 6), torch.histogram(torch.tensor(h), 6)):
        np.testing.assert_allclose(a.numpy(), b.numpy())


def test_conversions_and_inplace_views_match_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[1.7, -2.2, 300.0]])
    for name in ("byte", "char", "short"):
        a, b = getattr(tb.tensor(x), name)(), getattr(torch.tensor(x), name)()
        np.testing.assert_array_equal(a.numpy(), b.numpy())
        assert str(a.dtype) == str(b.dtype).replace("torch.", "")
    for call in (lambda t: t.squeeze_(0), lambda t: t.unsqueeze_(1), lambda t: t.t_(),
                 lambda t: t.transpose_(0, 1), lambda t: t.swapaxes_(1, 0),
                 lambda t: t.swapdims_(0, 1), lambda t: t.as_strided_((2,), (1,))):
        a, b = tb.tensor(x), torch.tensor(x)
        assert call(a) is a and call(b) is b
        assert tuple(a.shape) == tuple(b.shape) and a.tolist() == b.tolist()
    w, v = tb.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    for t in (w, v):
        y = t * 2
        y.t_()
        (y * y).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), v.grad.numpy())
    with pytest.raises(RuntimeError, match="leaf Variable"):
        tb.ones(2, 1, requires_grad=True).squeeze_()


def test_errors_name_the_argument():
    with pytest.raises(RuntimeError, match="split_sizes"):
        tb.ones(4).split_with_sizes([1, 2])
    with pytest.raises(RuntimeError, match="maximum size"):
        tb.ones(3).unfold(0, 5, 1)
    with pytest.raises(RuntimeError, match=r"q values must be in the range \[0, 1\]"):
        tb.quantile(tb.ones(3), 1.5)
    with pytest.raises(RuntimeError, match="reduce argument must be"):
        tb.zeros(2).scatter_reduce(0, tb.tensor([0]), tb.ones(1), "max")
    with pytest.raises(IndexError, match="out of range"):
        tb.ones(2, 3).select(1, 3)
    with pytest.raises(RuntimeError, match="must have length 3"):
        tb.cross(tb.ones(2), tb.ones(2))
